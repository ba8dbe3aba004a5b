"""What the catalog cannot say about the Python surface, in one place (issue #47 item 1): the public names of
generated rows (PUBLIC_ROWS), the hand-written dataclasses that refine a generated row (REFINED), how some
generated builders depart from the generator's rule (SHAPES) and the methods whose call builder is hand-written
(HANDWRITTEN), each with its reason.

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
    "memories.MemoryRecord": "valid as a Range, revisions as Revision rows (jsonb)",
    "sessions.WorkingRepresentation": "representation as WorkingItem rows by kind (jsonb)",
    "sessions.SessionBundle": "its representation is the refined WorkingRepresentation",
    "sessions.Task": "messages as a list of dicts (jsonb)",
    "graph.RetractedFact": "known as a Range",
    "graph.FactRow": "valid and known as Ranges",
    "graph.Edge": "valid and known as Ranges",
    "admin.ErasureReceipt": "the clean property; selector, counts and LSNs typed (jsonb)",
    "admin.ExportedRow": "record as a dict (jsonb)",
    "recall.Recalled": "the dense_available property",
    "recall.MessagesFound": "the semantic_available property",
}

class Shape(NamedTuple):
    """How ``make driver`` writes one function's builder where the generator's rule (the required arguments by
    position, the rest by name with the function's defaults, every row a list) is not the method a caller
    expects. The catalog says the rest: the arguments, their defaults, the row and the docstring."""

    reason: str
    one_row: bool = False  # the function returns a table of one row: the method returns that row
    positional: tuple[str, ...] = ()  # arguments with a default that may be passed by position too, in order
    keyword_only: tuple[str, ...] = ()  # required arguments passed by name only
    handle_scope: bool = False  # ``scope`` may be left out: the first of the call's authorised scopes
    row: str = ""  # "module.Class": the hand-written dataclass (REFINED) its rows are read into


SHAPES: dict[str, Shape] = {
    "schema_info": Shape("one row", one_row=True),
    "add_scope": Shape("description may be passed by position", positional=("description",)),
    "add_peer": Shape("kind and metadata may be passed by position", positional=("kind", "metadata")),
    "pin": Shape("pinned may be passed by position", positional=("pinned",)),
    "freshness": Shape("one row; the scope defaults to the handle's, by position", one_row=True,
                       positional=("scope",), handle_scope=True),
    "decide_duplicate": Shape("one row; the reason by name (it says why, apart from the decision)", one_row=True,
                              keyword_only=("reason",)),
    "entities": Shape("name may be passed by position", positional=("name",)),
    "add_entity_alias": Shape("one row; the scope defaults to the handle's", one_row=True, handle_scope=True),
    "merge_entities": Shape("one row; the scope defaults to the handle's", one_row=True, handle_scope=True),
    "create_session": Shape("the scope defaults to the handle's; name by position", positional=("name",),
                            handle_scope=True),
    "queue_status": Shape("one row; target may be passed by position", one_row=True, positional=("target",)),
    "embedding_status": Shape("one row", one_row=True),
    "rebuild_embeddings": Shape("everything may be passed by position", positional=("everything",)),
    "set_scope_passage_embedding": Shape("one row", one_row=True),
    "refresh_term_stats": Shape("one row", one_row=True),
    "retract_fact": Shape("one row, known as a Range; the reason by name", one_row=True, keyword_only=("reason",),
                          row="graph.RetractedFact"),
    "facts_as_of": Shape("predicate by position; the refined FactRow", positional=("predicate",),
                         row="graph.FactRow"),
    "get_representation": Shape("target by position; the refined WorkingRepresentation", positional=("target",),
                                row="sessions.WorkingRepresentation"),
    "session_bundle": Shape("the refined SessionBundle", row="sessions.SessionBundle"),
    "expire": Shape("the refined ErasureReceipt", row="admin.ErasureReceipt"),
    "refresh_erasure_statistics": Shape("the refined ErasureReceipt", row="admin.ErasureReceipt"),
    "rewrite_erased": Shape("the refined ErasureReceipt", row="admin.ErasureReceipt"),
    "erasure_requests": Shape("limit by position; the refined ErasureReceipt", positional=("limit",),
                              row="admin.ErasureReceipt"),
}

# The methods whose call builder is written by hand (the others are _generated's builders, unchanged), each with
# what it adds to the generated one. tests/test_driver_surface.py fails when a hand-written builder is not here,
# or one listed here no longer is. "One row": the function returns a table of one row, the method that row.
HANDWRITTEN: dict[str, str] = {
    # setup and the log
    "list_scopes": "a rename of scopes() (Memory.scopes is the handle's authorised set)",
    "append": "a rename of append_observation: the text first, the scope the handle's, the payload as jsonb",
    "append_many": "a rename of append_observations: datetimes in the rows sent as ISO text, offsets in order",
    "watermark": "a rename of log_watermark; the scope defaults to the handle's",
    # memories
    "remember": "the embedder's part (the memory's vector, stamped with the tenant's model); said= appends the "
                "words too (remember_said); the scope defaults to the handle's",
    "remember_many": "the embedder's part (each item's vector); datetimes in the items as ISO text",
    "read": "purpose keyword-only, include_superseded False; the refined MemoryRecord",
    "derive": "sources and text by the names a caller uses, about as a list",
    "correct": "the refined arguments of a correction (revision, evidence), one id back",
    "supersede": "the refined arguments of a supersession (revision, evidence), one id back",
    "forget": "revision= for expected_revision",
    "duplicate_proposals": "the pairs and the metadata of one call (duplicate_proposals_answer); limit 20",
    "wait_for": "timeout in seconds (checked, at most 600) for timeout_ms; the scope defaults to the handle's",
    # recall and message search
    "recall": "the embedder's part (the question's vector), a re-rank hook; recall_answer's rows and metadata",
    "search_messages": "the embedder's part; search_messages_answer's rows and metadata",
    # the graph
    "assert_fact": "object_ for object, evidence as jsonb; the scope defaults to the handle's; one row",
    "assert_facts": "datetimes in the items as ISO text, results in order; the scope defaults to the handle's",
    "neighbourhood": "the refined Edge; hops=None is refused as NULL (a generated builder leaves a None to the "
                     "function's default)",
    # peers, sessions, representations, the work queue
    "set_peer_config": "observed_globally as a keyword for the jsonb config",
    "add_session_peers": "peers any iterable of names or dicts, sent as a list",
    "add_messages": "datetimes in the messages as ISO text, results in order",
    "log_turn": "text and role for body and source_role; audience checked as peer names; one row",
    "chat": "a dialectic over recall and the representations, with the caller's LLM (several steps)",
    "claim_tasks": "limit 10; the refined Task",
    "task_remember": "takes the claimed Task (its id and lease), results in order",
    "task_assert_fact": "takes the claimed Task; object_ for object; one row",
    "complete_task": "takes the claimed Task; result as jsonb",
    "fail_task": "takes the claimed Task; one row",
    "work_queue_status": "the rows as a dict by task type and status",
    # the back office
    "erase": "the selector first, the actor and reason keyword-only; the refined ErasureReceipt",
    "export": "the refined ExportedRow",
    "vacuum_erased": "VACUUMs the tables a receipt names (several statements, outside a transaction)",
    "settings": "the rows as a dict of key: value",
    "setting_descriptions": "settings() rows with what each does (no function of its own)",
    "set_setting": "the value back as JSON",
}
