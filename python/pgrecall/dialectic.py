"""The dialectic: ``Memory.chat(observer, target, question)``.

It gathers what the database holds for the question — the representation
of ``target`` from ``observer``'s perspective, recall evidence for the
question as the observer may see it, and the working representation of a
session — and, with an ``llm`` callable, asks it to answer from that context
alone. Everything gathered passed the eligibility rule in SQL; the LLM never
sees more than the observer may.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Sequence

if TYPE_CHECKING:
    from .driver import Memory


@dataclass(frozen=True)
class Chat:
    question: str
    observer: str | None  # None: the global view
    target: str
    representation: list[dict]  # memories and facts about the target from the observer's view
    evidence: list[dict]  # recall items for the question: memory_id, body, score, observations
    working: dict | None  # the session's working representation of the target, if a session was named
    prompt: str
    answer: str | None = None  # the llm's answer; None without an llm
    meta: dict = field(default_factory=dict)  # recall's metadata (dense_available, counts, ...)


def build_prompt(question: str, observer: str | None, target: str, representation: list[dict],
                 evidence: list[dict], working: dict | None) -> str:
    view = f"{observer}'s view of {target}" if observer else f"what is known about {target} (global view)"
    lines = [f"Answer the question using only the context below: {view}.",
             "If the context does not say, answer that you do not know.", "", "Representation:"]
    lines += [f"- {r['body']} ({r['item']} {r['id']})" for r in representation] or ["- (nothing yet)"]
    if working is not None:
        items = next(iter(working.get("representation", {}).values()), [])
        lines += ["", "Working representation in this session:"]
        lines += [f"- {i['text']} (turn {i['offset']})" for i in items] or ["- (nothing yet)"]
    lines += ["", "Recalled for the question:"]
    lines += [f"- {e['body']} ({e['item']} {e['id']})" for e in evidence] or ["- (nothing)"]
    lines += ["", f"Question: {question}"]
    return "\n".join(lines)


def gather(mem: "Memory", observer: str | None, target: str, question: str, *, session: int | None = None,
           llm: Callable[[str], str] | None = None, purpose: str = "converse", limit: int = 10,
           principal: str | None = None, scopes: Sequence[str] | None = None) -> Chat:
    who = observer or principal or mem.principal
    representation = mem.representation(target, observer=observer, purpose=purpose, principal=who, scopes=scopes)
    recalled = mem.recall(question, purpose=purpose, limit=limit, principal=who, scopes=scopes)
    # recall's items are memories, and facts about the entities the question names (with their quotes)
    evidence = [{"item": i.item, "id": i.fact_id if i.item == "fact" else i.memory_id,
                 "memory_id": i.memory_id, "fact_id": i.fact_id, "body": i.body, "score": i.score,
                 "observations": [o["offset"] for o in i.provenance.get("observations", i.provenance.get("evidence", []))]}
                for i in recalled.items]
    working = None
    if session is not None:
        working = mem.get_representation(session, observer or target, target, principal=who, scopes=scopes)
    prompt = build_prompt(question, observer, target, representation, evidence, working)
    answer = llm(prompt) if llm is not None else None
    return Chat(question, observer, target, representation, evidence, working, prompt, answer, recalled.meta)
