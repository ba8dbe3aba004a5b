"""The driver's row types against the catalog: every column a tenant function returns has an attribute of
the row type the driver reads it into (by name), so nothing the SQL returns is silently dropped, and no
result is read by position."""

from __future__ import annotations

import re
from pathlib import Path

from pgrecall.driver import _calls, _generated, admin, duplicates, embeddings, graph, memories, recall, sessions

# function -> (row type, columns the row type does not carry on purpose, attribute -> column renames)
ROW_TYPES = {
    "schema_info": (memories.SchemaInfo, set(), {}),
    "scopes": (memories.Scope, set(), {}),
    "append_observations": (memories.Appended, {"ordinal"}, {}),
    "remember": (memories.Remembered, set(), {}),
    "remember_many": (memories.Remembered, {"ordinal"}, {}),
    "remember_said": (memories.RememberedSaid, set(), {}),
    "read": (memories.MemoryRecord, set(), {}),
    "freshness": (memories.Freshness, set(), {}),
    "recall_answer": (recall.Recalled, set(), {}),
    "search_messages_answer": (recall.MessagesFound, set(), {}),
    "duplicate_proposals_answer": (duplicates.DuplicateProposals, set(), {}),
    "decide_duplicate": (duplicates.DuplicateDecision, set(), {}),
    "assert_fact": (graph.AssertedFact, set(), {}),
    "assert_facts": (graph.AssertedFact, {"ordinal"}, {}),
    "task_assert_fact": (graph.AssertedFact, set(), {}),
    "retract_fact": (graph.RetractedFact, set(), {}),
    "facts_as_of": (graph.FactRow, set(), {}),
    "store_put": (_generated.StorePutRow, set(), {}),
    "store_get": (_generated.StoreGetRow, set(), {}),
    "store_search": (_generated.StoreSearchRow, set(), {}),
    "store_list_namespaces": (_generated.StoreListNamespacesRow, set(), {}),
    "agent_session_items": (_generated.AgentSessionItemsRow, set(), {}),
    "agent_session_pop": (_generated.AgentSessionPopRow, set(), {}),
    "neighbourhood": (graph.Edge, set(), {}),
    "resolve_citation": (graph.Citation, set(), {}),
    "entities": (graph.Entity, set(), {}),
    "add_entity_alias": (graph.EntityAliases, set(), {}),
    "predicates": (graph.Predicate, set(), {}),
    "merge_entities": (graph.EntityMerge, set(), {}),
    "add_session_peers": (sessions.SessionPeerAdded, set(), {}),
    "session_peers": (sessions.SessionPeer, set(), {}),
    "add_messages": (sessions.MessageAdded, {"ordinal"}, {}),
    "log_turn": (sessions.Turn, set(), {}),
    "representation": (sessions.RepresentationItem, set(), {}),
    "get_representation": (sessions.WorkingRepresentation, set(), {}),
    "session_bundle": (sessions.SessionBundle, set(), {}),
    "session_peer_config": (sessions.SessionPeerConfig, set(), {}),
    "set_session_peer_config": (sessions.SessionPeerConfig, set(), {}),
    "peer_config": (sessions.PeerConfig, set(), {}),
    "set_peer_config": (sessions.PeerConfig, set(), {}),
    "claim_tasks": (sessions.Task, set(), {}),
    "task_remember": (memories.Remembered, {"ordinal"}, {}),
    "fail_task": (sessions.TaskFailure, set(), {}),
    "queue_status": (sessions.QueueStatus, set(), {}),
    "work_queue_status": (sessions.QueueCount, set(), {}),
    "embedding_status": (embeddings.EmbeddingStatus, set(), {}),
    "claim_embedding_jobs": (embeddings.MemoryEmbeddingJob, set(), {"id": "memory_id"}),
    "claim_passage_embedding_jobs": (embeddings.EmbeddingJob, set(), {"id": "passage_id"}),
    "erase": (admin.ErasureReceipt, set(), {}),
    "expire": (admin.ErasureReceipt, set(), {}),
    "export": (admin.ExportedRow, set(), {}),
    "erasure_requests": (admin.ErasureReceipt, set(), {}),
    "refresh_erasure_statistics": (admin.ErasureReceipt, set(), {}),
    "rewrite_erased": (admin.ErasureReceipt, set(), {}),
    "table_statistics": (admin.TableStatistics, set(), {}),
    "set_scope_passage_embedding": (embeddings.PassageEmbeddingChoice, set(), {}),
    "settings": (admin.Setting, set(), {}),
    "refresh_term_stats": (admin.TermStats, set(), {}),
}


def result_columns(db, function: str) -> list[str]:
    """The columns of a tenant function's rows: its OUT/TABLE parameters, or its composite type's attributes."""
    row = db.execute("""select coalesce(
                                 (select array_agg(n order by i) from unnest(p.proargnames, p.proargmodes)
                                                                   with ordinality a(n, m, i) where m in ('t', 'o')),
                                 (select array_agg(a.attname::text order by a.attnum) from pg_attribute a
                                   where a.attrelid = t.typrelid and a.attnum > 0 and not a.attisdropped))
                          from pg_proc p join pg_type t on t.oid = p.prorettype
                         where p.pronamespace = 'acme'::regnamespace and p.proname = %s""", (function,)).fetchone()
    return list(row[0] or [])


def test_every_result_column_has_an_attribute_of_its_row_type(db, make_tenant):
    make_tenant("acme")
    for function, (row_type, skipped, renamed) in ROW_TYPES.items():
        read = {renamed.get(attr, col) for col, attr in _calls._columns(row_type)}
        returned = set(result_columns(db, function))
        assert returned, function
        assert read == returned - skipped, (function, sorted(read ^ (returned - skipped)))


def test_table_functions_without_a_row_type_return_one_value(db, make_tenant):
    """A function the map above does not list returns a single value (read with psycopg's scalar_row)."""
    make_tenant("acme")
    unlisted = db.execute("""select p.proname from pg_proc p
                              where p.pronamespace = 'acme'::regnamespace and p.proname !~ '^_'
                                and (p.proretset or 'o' = any (coalesce(p.proargmodes, '{}')) or 't' = any (coalesce(p.proargmodes, '{}'))
                                     or (select typtype from pg_type where oid = p.prorettype) = 'c')""").fetchall()
    not_methods = {"recall", "search_messages", "duplicate_proposals"}  # the driver calls their *_answer forms
    assert {r[0] for r in unlisted} - ROW_TYPES.keys() == not_methods


def test_no_result_is_read_by_position():
    """dict(zip(names, row)) or row[3] mislabels silently when a column moves; rows are read by name."""
    package = Path(__file__).resolve().parents[1] / "python" / "pgrecall"
    for path in package.rglob("*.py"):
        text = path.read_text()
        assert "dict(zip(" not in text, path
        assert not re.search(r"fetchone\(\)\[[1-9]", text), path


def test_a_row_read_from_json_is_the_frozen_dataclass_the_class_itself_would_build():
    """Rows are built without the dataclass's __init__ (it is the driver's largest cost after the statement):
    what comes out must still be the same value, still frozen, with its defaults, nested JSON parsed, the
    caller's dict left as it was, and a missing field still refused."""
    import dataclasses
    from datetime import datetime

    import pytest

    observation = {"text": "Ana moved to Lisbon", "actor": "ana", "scope": "s", "offset": 3, "audience": None,
                   "withheld": False, "corrections": [], "occurred_at": "2026-12-04T02:56:38.485503+00:00",
                   "source_role": "user"}
    provenance = {"about": [], "memories": [], "observations": [observation], "hidden_sources": 0,
                  "widening_reason": None, "offsets": [3]}
    item = {"rank": 1, "memory_id": 7, "scope": "s", "kind": "note", "title": None, "body": "Ana lives in Lisbon",
            "score": 1.0, "lexical_rank": 1, "dense_rank": None, "cosine": None, "bm25": 2.5,
            "item": "memory", "fact_id": None, "fact_rank": None, "provenance": provenance, "fact_provenance": None}
    untouched = {**item, "provenance": {**provenance, "observations": [dict(observation)]}}
    built = _calls.from_json(recall.RecallItem, item)
    assert item == untouched  # the caller's dict is not filled in place

    by_class = recall.RecallItem(**{**item, "provenance": memories.Provenance(
        **{**provenance, "observations": [memories.ObservationRef(
            **{**observation, "occurred_at": datetime.fromisoformat(observation["occurred_at"])})]})})
    assert built == by_class
    assert (built.item, built.fact_id, built.fact_rank) == ("memory", None, None)
    assert isinstance(built.provenance.observations[0].occurred_at, datetime)
    # a field the JSON leaves out takes the dataclass's default (the generated rows have none; WorkingItem has)
    working = {"text": "moved", "offset": 3, "observation_id": 9, "at": observation["occurred_at"]}
    assert _calls.from_json(sessions.WorkingItem, working) == sessions.WorkingItem(
        "moved", 3, 9, datetime.fromisoformat(observation["occurred_at"]), None, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.rank = 2  # type: ignore[misc]
    assert dataclasses.replace(built, rank=2).rank == 2

    with pytest.raises(TypeError, match="body"):
        _calls.from_json(recall.RecallItem, {k: v for k, v in item.items() if k != "body"})


def test_a_query_embedding_is_the_same_vector_whatever_its_layout():
    """The quick check of a plain float32 array must read the same numbers numpy would: a big-endian array, a
    float64 one, a strided view and a list of floats are one vector; NaN or the wrong size is refused."""
    import numpy as np
    import pytest

    from pgrecall import errors

    numbers = np.linspace(-1, 1, 384, dtype=np.float32)
    expected = recall.as_vector(numbers.tolist()).to_list()
    for layout in (numbers, numbers.astype(">f4"), numbers.astype(np.float64), np.repeat(numbers, 2)[::2],
                   numbers[::-1][::-1], list(map(float, numbers))):
        assert recall.as_vector(layout).to_list() == expected, layout
    for bad in (np.append(numbers[:-1], np.float32("nan")), numbers[:-1], np.append(numbers[:-1], np.inf)):
        with pytest.raises(errors.InvalidArgument):
            recall.as_vector(bad)


def test_a_row_read_twice_from_the_same_json_reads_the_same():
    """A row's JSON is filled in place as it is read (the driver owns it); a caller's JSON read with from_json
    is not, so reading it again gives the same row."""
    observation = {"text": "Ana moved to Lisbon", "actor": "ana", "scope": "s", "offset": 3, "audience": None,
                   "withheld": False, "corrections": [], "occurred_at": "2026-12-04T02:56:38.485503+00:00",
                   "source_role": "user"}
    provenance = {"about": [], "memories": [], "observations": [observation], "hidden_sources": 0,
                  "widening_reason": None, "offsets": [3]}
    first = _calls.from_json(memories.Provenance, provenance)
    assert provenance["observations"][0] is observation and isinstance(observation["occurred_at"], str)
    assert _calls.from_json(memories.Provenance, provenance) == first
    owned = _calls.from_own_json(memories.Provenance, {**provenance, "observations": [dict(observation)]})
    assert owned == first and owned.memories == [] and owned.about == []
