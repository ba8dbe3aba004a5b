"""The dialectic: ``Memory.chat(observer, target, question)``.

It gathers what the database holds for the question — the representation
of ``target`` from ``observer``'s perspective, recall evidence for the
question as the observer may see it, and the working representation of a
session — and, with an ``llm`` callable, asks it to answer from that context
alone. Everything gathered passed the eligibility rule in SQL; the LLM never
sees more than the observer may.

:func:`chat` is a driver Program: the sync and the async driver run the same
steps (the LLM, like the embedding model, runs in a thread in the async one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ._calls import Handle, Program, offload, one_snapshot, step, steps
from ._generated import get_representation, representation
from .recall import RecallItem, RecallMeta, recall
from .sessions import RepresentationItem, WorkingRepresentation


@dataclass(frozen=True)
class ChatEvidence:
    """A recall item for the question: a memory or a fact, with the log offsets it cites."""

    item: str  # memory or fact
    id: int | None  # the memory id or the fact id
    memory_id: int | None
    fact_id: int | None
    body: str
    score: float
    observations: list[int]

    @classmethod
    def of(cls, item: RecallItem) -> ChatEvidence:
        cited = item.fact_provenance or item.provenance  # exactly one of them is given
        return cls(item.item, item.fact_id if item.item == "fact" else item.memory_id, item.memory_id,
                   item.fact_id, item.body, item.score, cited.offsets if cited is not None else [])


@dataclass(frozen=True)
class Chat:
    question: str
    observer: str | None  # None: the global view
    target: str
    representation: list[RepresentationItem]  # memories and facts about the target from the observer's view
    evidence: list[ChatEvidence]  # recall items for the question
    working: WorkingRepresentation | None  # the session's working representation of the target, if named
    prompt: str
    meta: RecallMeta  # recall's metadata (dense_available, counts, ...)
    answer: str | None = None  # the llm's answer; None without an llm


def build_prompt(question: str, observer: str | None, target: str, representation: Sequence[RepresentationItem],
                 evidence: Sequence[ChatEvidence], working: WorkingRepresentation | None) -> str:
    view = f"{observer}'s view of {target}" if observer else f"what is known about {target} (global view)"
    lines = [f"Answer the question using only the context below: {view}.",
             "If the context does not say, answer that you do not know.", "", "Representation:"]
    lines += [f"- {r.body} ({r.item} {r.id})" for r in representation] or ["- (nothing yet)"]
    if working is not None:
        items = next(iter(working.representation.values()), [])
        lines += ["", "Working representation in this session:"]
        lines += [f"- {i.text} (turn {i.offset})" for i in items] or ["- (nothing yet)"]
    lines += ["", "Recalled for the question:"]
    lines += [f"- {e.body} ({e.item} {e.id})" for e in evidence] or ["- (nothing)"]
    lines += ["", f"Question: {question}"]
    return "\n".join(lines)


def _context(h: Handle, observer: str | None, target: str, question: str, session: int | None, purpose: str,
             limit: int, who: str | None, scopes: Sequence[str] | None) -> Program[tuple[Any, Any, Any]]:
    """What chat reads: the representation, recall for the question and, with a session, the working one."""
    about = yield from step(representation(h, target, observer=observer, purpose=purpose, principal=who,
                                           scopes=scopes))
    recalled = yield from steps(recall(h, question, purpose=purpose, limit=limit, principal=who, scopes=scopes))
    working = None
    if session is not None:
        working = yield from step(get_representation(h, session, observer or target, target, principal=who,
                                                     scopes=scopes))
    return about, recalled, working


def chat(h: Handle, observer: str | None, target: str, question: str, *, session: int | None = None,
         llm: Callable[[str], str] | None = None, purpose: str = "converse", limit: int = 10,
         principal: str | None = None, scopes: Sequence[str] | None = None) -> Program[Chat]:
    """The dialectic: what ``observer`` (None: the global view) knows about ``target`` for ``question``.

    Gathers the representation, recall evidence for the question (as the observer, or the principal
    for the global view) and, with a session, the working representation. With ``llm`` (a callable
    taking the prompt), asks it to answer from that context only; without one, returns the context.
    """
    who = observer or principal or h.principal
    # The three reads see one snapshot (released before the LLM is asked): what was remembered between them
    # cannot make the representation and the evidence disagree.
    about, recalled, working = yield from one_snapshot(_context(h, observer, target, question, session, purpose,
                                                                limit, who, scopes))
    evidence = [ChatEvidence.of(i) for i in recalled.items]
    prompt = build_prompt(question, observer, target, about, evidence, working)
    answer = (yield from offload(llm, prompt)) if llm is not None else None
    return Chat(question, observer, target, about, evidence, working, prompt, recalled.meta, answer)
