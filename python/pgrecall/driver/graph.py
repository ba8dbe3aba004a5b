"""The graph: entities, facts with their quotes and two time ranges, traversal and citations.

Each function builds the call of one stored function; ``Memory`` and ``AsyncMemory`` run it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb
from psycopg.types.range import Range

from ._calls import Call, Handle, json_items, json_list, one, parse, rows
from ._generated import AssertedFact as AssertedFact  # re-exported
from ._generated import Citation as Citation  # re-exported
from ._generated import Entity as Entity  # re-exported
from ._generated import EntityAliases as EntityAliases  # re-exported
from ._generated import EntityMerge as EntityMerge  # re-exported
from ._generated import FactQuote as FactQuote  # re-exported
from ._generated import Predicate as Predicate  # re-exported

# -- row types ----------------------------------------------------------------------------------------------

# A fact's quote (the declared type fact_quote) under the name it had before it was declared.
Evidence = FactQuote


@dataclass(frozen=True)
class RetractedFact:
    fact_id: int
    known: Range[datetime]  # closed now: what we believed, and until when


@dataclass(frozen=True)
class FactRow:
    fact_id: int
    subject: str
    predicate: str
    object: str
    statement: str
    valid: Range[datetime]
    known: Range[datetime]
    confidence: float
    salience: float
    observer: str | None
    evidence: list[Evidence] = field(metadata=parse(json_list(Evidence), composite=True))


@dataclass(frozen=True)
class Edge:
    """A fact reached by traversal, ``depth`` hops from the seeds, between two entity ids."""

    depth: int
    fact_id: int
    subject: str
    predicate: str
    object: str
    statement: str
    valid: Range[datetime]
    known: Range[datetime]
    from_entity: int
    to_entity: int | None


# -- calls --------------------------------------------------------------------------------------------------


def assert_fact(h: Handle, subject: str, predicate: str, object_: str, *, evidence: Sequence[Mapping[str, Any]],
                statement: str | None = None, valid_from: datetime | None = None, valid_to: datetime | None = None,
                confidence: float = 1.0, observer: str | None = None, audience: str | None = None,
                purposes: Sequence[str] | None = None, subject_type: str | None = None,
                object_type: str | None = None, widening_reason: str | None = None, scope: str | None = None,
                principal: str | None = None, scopes: Sequence[str] | None = None) -> Call[AssertedFact]:
    """Assert a fact with evidence: each item {"offset": n, "quote": "..."} and optionally "start"/"end"
    UTF-8 byte offsets. A single-valued predicate's overlapping current value is closed, not overwritten.
    A fact reaches no more peers than the turns it cites (WiderThanEvidence otherwise) unless
    widening_reason says why."""
    principal, scopes = h.who(principal, scopes)
    return one("assert_fact", {
        "principal": principal, "scopes": scopes, "scope": scope or scopes[0], "subject": subject,
        "predicate": predicate, "object": object_, "evidence": Jsonb(list(evidence)),
        "statement": statement, "valid_from": valid_from, "valid_to": valid_to, "confidence": confidence,
        "observer": observer, "audience": audience, "purposes": list(purposes) if purposes is not None else None,
        "subject_type": subject_type, "object_type": object_type, "widening_reason": widening_reason}, AssertedFact)


def neighbourhood(h: Handle, seeds: Sequence[str], *, hops: int = 2, valid_at: datetime | None = None,
                  known_at: datetime | None = None, purpose: str = "converse", principal: str | None = None,
                  scopes: Sequence[str] | None = None) -> Call[list[Edge]]:
    """The facts around the seed entities, both directions, up to ``hops`` (at most 3)."""
    principal, scopes = h.who(principal, scopes)
    return rows("neighbourhood", {"principal": principal, "scopes": scopes, "seeds": list(seeds), "hops": hops,
                                  "valid_at": valid_at, "known_at": known_at, "purpose": purpose}, Edge)


def assert_facts(h: Handle, items: Sequence[Mapping[str, Any]], *, scope: str | None = None,
                 principal: str | None = None, scopes: Sequence[str] | None = None) -> Call[list[AssertedFact]]:
    """assert_fact() for a batch: dicts with subject, predicate, object, evidence (and the optional
    keyword arguments of assert_fact). In order, all-or-nothing; one result per item."""
    principal, scopes = h.who(principal, scopes)
    return rows("assert_facts", {"principal": principal, "scopes": scopes, "scope": scope or scopes[0],
                                 "items": Jsonb(json_items(items))}, AssertedFact, ordered_by="ordinal")


