"""What the catalog cannot say about the Python surface, in one place (issue #47 item 1).

``PUBLIC_ROWS``: the rows of functions that return a table, whose dataclass ``make driver`` writes under its
public name (``_generated.py``), with the columns that are never NULL (a function's output column carries no
NOT NULL in pg_catalog) and its docstring. The area modules re-export these classes; none is written by hand.
tests/test_driver_surface.py fails when a hand-written dataclass has exactly a generated one's fields.
"""

from __future__ import annotations

from typing import NamedTuple


class PublicRow(NamedTuple):
    name: str  # the public class name
    not_null: tuple[str, ...]  # its columns that are never NULL
    doc: str = ""


_ASSERTED = ("A fact asserted: ``outcome`` is inserted, superseded (closed contradicting facts) or confirmed\n"
             "    (already known).")

PUBLIC_ROWS: dict[str, PublicRow] = {
    # memories
    "SchemaInfoRow": PublicRow("SchemaInfo", ("tenant", "migrations", "function_files")),
    "ScopesRow": PublicRow("Scope", ("name", "created_at")),
    "FreshnessRow": PublicRow("Freshness", ("scope", "log_watermark", "embeddings_current_to", "embedding_jobs")),
    # sessions
    "AddSessionPeersRow": PublicRow("SessionPeerAdded", ("peer", "observe_others", "observed_by_others",
                                                         "joined_at")),
    "SessionPeersRow": PublicRow("SessionPeer", ("peer", "kind", "joined_at", "observe_others",
                                                 "observed_by_others")),
    "RepresentationRow": PublicRow(
        "RepresentationItem", ("item", "id", "scope", "kind", "body", "confidence", "created_at", "evidence"),
        "A memory or a currently believed fact about the target (``item``: memory or fact; ``kind``: the memory\n"
        "    kind or the predicate; ``evidence``: log offsets)."),
    "FailTaskRow": PublicRow("TaskFailure", ("status", "attempts"),
                             "A failed task: ``status`` is queued (again, with backoff) or dead."),
    "QueueStatusRow": PublicRow("QueueStatus", ("status", "remaining", "in_progress", "done", "dead"),
                                "A session's derivation queue: ``status`` is 'current' or 'pending'."),
    "WorkQueueStatusRow": PublicRow("QueueCount", ("task_type", "status", "tasks")),
    # the graph
    "AssertFactRow": PublicRow("AssertedFact", ("fact_id", "outcome", "closed_facts"), _ASSERTED),
    "TaskAssertFactRow": PublicRow("AssertedFact", ("fact_id", "outcome", "closed_facts"), _ASSERTED),
    "ResolveCitationRow": PublicRow(
        "Citation", ("evidence_id", "scope", "log_offset", "observation_id", "withheld"),
        "A fact's quote resolved back to its observation; ``withheld`` when the principal may not see that turn\n"
        "    (then only the evidence id, scope, offset and observation id are given)."),
    "EntitiesRow": PublicRow("Entity", ("entity_id", "scope", "name", "aliases", "facts"),
                             "An entity; ``facts``: how many facts about it the principal may see."),
    "AddEntityAliasRow": PublicRow("EntityAliases", ("entity_id", "name", "aliases")),
    "MergeEntitiesRow": PublicRow("EntityMerge", ("merge_id", "kept_id", "absorbed_id", "facts_moved",
                                                  "facts_closed")),
    "PredicatesRow": PublicRow("Predicate", ("name", "single_valued")),
    # the back office
    "SettingsRow": PublicRow("Setting", ("key",), "A tenant setting: its key, its value (JSON) and what it means."),
    "RefreshTermStatsRow": PublicRow("TermStats", ("documents", "terms")),
    "TableStatisticsRow": PublicRow(
        "TableStatistics", ("table_name", "live_rows", "dead_rows", "inserted", "updated", "deleted", "seq_scans",
                            "index_scans", "total_bytes"),
        "One of the tenant's tables as PostgreSQL's statistics see it (table_statistics(), admin role)."),
    "DecideDuplicateRow": PublicRow(
        "DuplicateDecision", ("decision_id", "decision"),
        "A decision on a proposed pair: ``decision`` is distinct, supersede or forget; ``retired_memory`` the memory\n"
        "    superseded or forgotten (a), None when both are kept, and ``retired_revision`` its revision now."),
    "EmbeddingStatusRow": PublicRow("EmbeddingStatus", ("queued", "leased", "current", "stale", "model",
                                                        "input_version", "passages_queued", "passages_current",
                                                        "passages_stale")),
    "SetScopePassageEmbeddingRow": PublicRow(
        "PassageEmbeddingChoice", ("scope", "policy", "queued", "dropped"),
        "A scope's passage embedding after a change: its own policy (or the tenant's, when it has none), and\n"
        "    how many passage jobs the change queued and dropped."),
}

# The hand-written dataclasses with a generated row's field names, each with what it adds to the generated one
# (the catalog's jsonb is ``Any`` there, a function's output columns all optional): anything else with a
# generated row's fields is that row under its public name (PUBLIC_ROWS). tests/test_driver_surface.py holds
# the driver to this list.
REFINED: dict[str, str] = {
    "memories.Remembered": "the created property (status == 'created'); RememberedSaid extends it",
    "memories.RememberedSaid": "a Remembered (its created property) with the log offset of the words said",
    "memories.MemoryRecord": "valid as a Range, provenance as Provenance, revisions as Revision rows (jsonb)",
    "sessions.WorkingRepresentation": "representation as WorkingItem rows by kind (jsonb)",
    "sessions.BundleMemory": "provenance as Provenance (jsonb)",
    "sessions.SessionBundle": "its memories and representation are the refined BundleMemory and WorkingRepresentation",
    "sessions.Task": "messages as a list of dicts (jsonb)",
    "graph.RetractedFact": "known as a Range",
    "graph.FactRow": "valid and known as Ranges, evidence as Evidence rows (jsonb)",
    "graph.Edge": "valid and known as Ranges",
    "admin.ErasureReceipt": "the clean property; selector, counts and LSNs typed (jsonb)",
    "admin.ExportedRow": "record as a dict (jsonb)",
    "recall.RecallItem": "provenance as Provenance or FactProvenance, by the item's kind (jsonb)",
    "recall.Recalled": "the dense_available property; its items are the refined RecallItem",
    "recall.MessagesFound": "the semantic_available property",
}
