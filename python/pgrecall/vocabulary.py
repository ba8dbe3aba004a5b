"""The closed sets of words a caller passes (purposes, kinds, roles), as Python reads them.

The catalog defines each once (the tenant's ``_closed_set()``, plpgsql/shared/closed_sets.sql), and the functions
that check input read it there. These constants are Python's copy, for argparse choices and MCP schemas that
must exist before any connection; tests/test_vocabulary.py fails when a copy and the catalog disagree.
"""

from __future__ import annotations

PURPOSES: tuple[str, ...] = ("converse", "act", "personalize", "review")
MEMORY_KINDS: tuple[str, ...] = ("note", "fact", "decision", "summary")
OBSERVATION_KINDS: tuple[str, ...] = ("message", "document", "tool_result", "event", "note")
SOURCE_ROLES: tuple[str, ...] = ("user", "assistant", "system", "tool", "document")
PEER_KINDS: tuple[str, ...] = ("human", "agent", "other")
CLASSIFICATIONS: tuple[str, ...] = ("public", "internal", "confidential", "restricted")
LAWFUL_BASES: tuple[str, ...] = ("consent", "contract", "legal_obligation", "vital_interests", "public_task",
                                 "legitimate_interests")

# The catalog's name of each set: _closed_set(name).
CLOSED_SETS: dict[str, tuple[str, ...]] = {
    "purpose": PURPOSES,
    "memory kind": MEMORY_KINDS,
    "observation kind": OBSERVATION_KINDS,
    "source_role": SOURCE_ROLES,
    "peer kind": PEER_KINDS,
    "classification": CLASSIFICATIONS,
    "lawful_basis": LAWFUL_BASES,
}
