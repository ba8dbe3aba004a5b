"""Batches: append_observations and remember_many, validated whole, one implementation with the single calls."""

import psycopg
import pytest

from conftest import table_counts
from pgrecall import errors
from pgrecall.driver import AboutEntity


def test_append_many_returns_contiguous_offsets(acme):
    assert acme.append("first", role="user") == 1
    offsets = acme.append_many([{"body": f"line {i}", "source_role": "user", "actor": "ana"} for i in range(5)])
    assert offsets == [2, 3, 4, 5, 6]
    assert acme.watermark() == 6


def test_empty_batches_write_nothing_and_are_not_errors(acme, db):
    before = table_counts(db)
    assert acme.append_many([]) == [] and acme.remember_many([]) == []
    assert table_counts(db) == before


def test_append_many_with_one_bad_row_writes_nothing(acme, db):
    acme.append("first", role="user")
    before = table_counts(db)
    rows = [{"body": "ok", "source_role": "user"}, {"body": "bad", "source_role": "narrator"}]
    with pytest.raises(errors.InvalidArgument) as info:
        acme.append_many(rows)
    assert "(row 2)" in str(info.value)
    with pytest.raises(errors.UnknownPeer) as info:
        acme.append_many([{"body": "ok", "source_role": "user"},
                          {"body": "who?", "source_role": "user", "actor": "mallory"}])
    assert "unknown actor peer 'mallory' (row 2)" in str(info.value)   # not a complaint about a session
    assert table_counts(db) == before
    assert acme.append("next", role="user") == 2


def test_remember_many_mixes_created_noop_and_duplicates(acme, db):
    offs = acme.append_many([{"body": f"said {i}", "source_role": "user", "actor": "ana"} for i in range(3)])
    existing = acme.remember("Ana likes tea", evidence=[offs[0]], purposes=["converse"]).memory_id
    results = acme.remember_many([
        {"body": "Ana likes coffee", "evidence": [offs[1]], "purposes": ["converse"], "about": ["Ana", "ana"]},
        {"body": "ANA likes   coffee", "evidence": [offs[1]], "purposes": ["converse"]},
        {"body": "Ana likes tea", "evidence": [offs[0]], "purposes": ["converse"]},
        {"body": "Does Ana like milk?", "evidence": [offs[2]], "purposes": ["converse"]},
        {"body": "", "evidence": [offs[2]], "purposes": ["converse"]},
        {"body": "Ana likes milk", "evidence": [offs[2]], "purposes": ["act"], "audience": "ana", "kind": "fact"},
    ])
    assert [(r.status, (r.reason or "").split(":")[0]) for r in results] == [
        ("created", ""), ("noop", "duplicate"), ("noop", "duplicate"), ("noop", "question"), ("noop", "empty"),
        ("created", "")]
    assert results[1].memory_id == results[0].memory_id and results[2].memory_id == existing
    milk = acme.read(results[5].memory_id, purpose="act", principal="ana")
    assert milk.kind == "fact" and milk.audience == "ana"
    coffee = acme.read(results[0].memory_id, purpose="converse")
    assert coffee.provenance.about == [AboutEntity("Ana", None)]  # one entity, however it is spelled
    assert coffee.provenance.observations[0].offset == offs[1]


def test_remember_many_with_one_bad_item_writes_nothing(acme, db, conninfo):
    off = acme.append("said", role="user", actor="ana")
    before = table_counts(db)
    good = {"body": "Ana likes tea", "evidence": [off], "purposes": ["converse"]}
    cases = [
        ({"body": "x", "evidence": [off], "purposes": ["gossip"]}, errors.InvalidPurpose, "(item 3)"),
        ({"body": "x", "evidence": [off], "purposes": ["converse"], "audience": "mallory"}, errors.UnknownPeer, "(item 3)"),
        ({"body": "x", "evidence": [999], "purposes": ["converse"]}, errors.ObservationNotFound, "(item 3)"),
        ({"body": "x" * 20000, "evidence": [off], "purposes": ["converse"]}, errors.InvalidArgument, "(item 3)"),
    ]
    for bad, error, where in cases:
        with pytest.raises(error) as info:
            acme.remember_many([good, {**good, "body": "Ana likes cake"}, bad])
        assert where in str(info.value)
        assert table_counts(db) == before
    with conninfo.connect(user="pgrecall_acme_app") as app, pytest.raises(psycopg.Error) as info:
        app.execute("""select * from acme.remember_many('bot', array['default'], 'default', '{"not": "an array"}')""")
    assert info.value.sqlstate == "PR107"
    assert table_counts(db) == before


def test_misspelt_keys_and_wrong_types_are_refused(acme, db):
    off = acme.append("said", role="user", actor="ana")
    before = table_counts(db)
    with pytest.raises(errors.InvalidArgument) as info:
        acme.remember_many([{"body": "Ana's PIN", "evidence": [off], "purposes": ["act"], "audiance": "ana"}])
    assert "audiance" in str(info.value)
    with pytest.raises(errors.InvalidArgument):
        acme.remember_many([{"body": "x", "evidence": "first", "purposes": ["act"]}])
    with pytest.raises(errors.InvalidArgument) as info:
        acme.append_many([{"body": "x", "source_role": "user", "data_subject": "u-1"}])
    assert "data_subject" in str(info.value)
    with pytest.raises(errors.InvalidArgument):
        acme.append_many([{"body": "x", "source_role": "user", "session_id": "seven"}])
    assert table_counts(db) == before


def test_remember_many_ids_follow_item_order(acme):
    offs = acme.append_many([{"body": f"said {i}", "source_role": "user"} for i in range(5)])
    results = acme.remember_many([{"body": f"fact number {i}", "evidence": [o], "purposes": ["converse"]}
                                  for i, o in enumerate(offs)])
    ids = [r.memory_id for r in results]
    assert ids == sorted(ids)
