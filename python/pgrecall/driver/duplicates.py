"""Duplicates: pairs the database proposes (cosine over the memories' own texts, among the principal's newest
visible memories) and the decision a person records about one (keep both, supersede or forget).

Each function builds the call of one stored function; ``Memory`` and ``AsyncMemory`` run it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ._calls import Call, Handle, from_own_json, json_object, one, parse, timestamp
from ._generated import DuplicateDecision as DuplicateDecision  # re-exported
from ._generated import DuplicateMeta as DuplicateMeta  # re-exported
from ._generated import MemoryProvenance

# -- row types ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DuplicateSide:
    """One memory of a proposed pair, as the reviewer is shown it."""

    id: int
    scope: str
    kind: str
    title: str | None
    body: str
    revision: int  # pass it to decide_duplicate: a memory changed meanwhile is not decided blind
    created_at: datetime = field(metadata=parse(timestamp))
    audience: str | None = field()
    purposes: list[str] = field()
    # as read() gives it: the turns it came from (speaker, time), visible sources, entities
    provenance: MemoryProvenance = field(metadata=parse(json_object(MemoryProvenance)))


@dataclass(frozen=True)
class DuplicatePair:
    """Two memories similar enough to be shown to a person: ``a`` is the older one."""

    rank: int
    cosine: float
    a: DuplicateSide
    b: DuplicateSide
    b_may_replace_a: bool  # b reaches everyone a reaches, for every purpose: "supersede a by b" is allowed
    a_may_replace_b: bool


_PAIR_KEYS = ("rank", "cosine", "b_may_replace_a", "a_may_replace_b")


def _pair(obj: Mapping[str, Any]) -> DuplicatePair:
    """duplicate_proposals()' flat columns (a_id, a_body, ..., b_id, ...) as a pair of two sides."""
    sides = {prefix: from_own_json(DuplicateSide, {k[2:]: v for k, v in obj.items()
                                               if k.startswith(prefix + "_") and k not in _PAIR_KEYS})
             for prefix in ("a", "b")}
    return from_own_json(DuplicatePair, {**{k: v for k, v in obj.items() if k in _PAIR_KEYS}, **sides})


@dataclass(frozen=True)
class DuplicateProposals:
    """duplicate_proposals' answer and the metadata of the same call."""

    pairs: list[DuplicatePair] = field(metadata=parse(lambda items: [_pair(i) for i in items], column="items",
                                                      composite=True))
    meta: DuplicateMeta = field(metadata=parse(json_object(DuplicateMeta), composite=True))


# -- calls --------------------------------------------------------------------------------------------------


def duplicate_proposals(h: Handle, *, limit: int = 20, principal: str | None = None,
                        scopes: Sequence[str] | None = None) -> Call[DuplicateProposals]:
    """Pairs of current memories the principal may see for a common purpose, among its newest
    ``duplicate_window``, with cosine >= ``duplicate_cosine`` and not yet decided; best first, with the
    metadata of the same call. Nothing is merged: a person decides with :meth:`decide_duplicate`."""
    principal, scopes = h.who(principal, scopes)
    return one("duplicate_proposals_answer", {"principal": principal, "scopes": scopes, "limit": limit},
               DuplicateProposals)

