"""The argument checks several operations share (plpgsql/shared/: value_checks.sql, references.sql,
closed_sets.sql, eligibility.sql): each caller still refuses what it refused, with the same SQLSTATE, and writes nothing."""

import pytest

from conftest import table_counts
from pgrecall import errors
from test_memory_operations import said


def quote(offset, text):
    return [{"offset": offset, "quote": text}]


@pytest.mark.parametrize("reason", [None, "", " \t\n"])
def test_a_missing_or_blank_reason_is_refused_by_forget_and_retract_fact(acme, db, reason):
    off = said(acme, "Ana works at Acme")
    memory = acme.remember("Ana works at Acme", evidence=[off], purposes=["converse"]).memory_id
    fact = acme.assert_fact("ana", "works_at", "Acme", evidence=quote(off, "works at Acme"))
    before = table_counts(db)
    with pytest.raises(errors.InvalidArgument) as forgot:
        acme.forget(memory, reason=reason)
    with pytest.raises(errors.InvalidArgument) as retracted:
        acme.retract_fact(fact.fact_id, reason=reason)
    assert forgot.value.sqlstate == retracted.value.sqlstate == "PR107"
    assert table_counts(db) == before


def test_a_reason_longer_than_allowed_is_refused_by_forget_and_retract_fact(acme, db):
    off = said(acme, "Ana works at Acme")
    memory = acme.remember("Ana works at Acme", evidence=[off], purposes=["converse"]).memory_id
    fact = acme.assert_fact("ana", "works_at", "Acme", evidence=quote(off, "works at Acme"))
    before = table_counts(db)
    with pytest.raises(errors.TextTooLong):
        acme.forget(memory, reason="x" * 2001)
    with pytest.raises(errors.TextTooLong):
        acme.retract_fact(fact.fact_id, reason="x" * 1001)
    assert table_counts(db) == before


@pytest.mark.parametrize("limit", [0, -1, 100000])
def test_a_limit_out_of_range_is_refused_by_recall_message_search_and_duplicate_proposals(acme, limit):
    with pytest.raises(errors.OutOfRange):
        acme.recall("anything", limit=limit)
    with pytest.raises(errors.OutOfRange):
        acme.search_messages("anything", limit=limit)
    with pytest.raises(errors.OutOfRange):
        acme.duplicate_proposals(limit=limit)


def test_a_blank_alias_subject_or_object_is_refused(acme, db):
    off = said(acme, "Ana works at Acme")
    acme.assert_fact("ana", "works_at", "Acme", evidence=quote(off, "works at Acme"))
    before = table_counts(db)
    with pytest.raises(errors.InvalidArgument) as alias:
        acme.add_entity_alias("ana", " \t")
    with pytest.raises(errors.InvalidArgument) as subject:
        acme.assert_fact("  ", "works_at", "Acme", evidence=quote(off, "works at Acme"))
    with pytest.raises(errors.InvalidArgument) as object_:
        acme.assert_fact("ana", "works_at", "\n", evidence=quote(off, "works at Acme"))
    assert {e.value.sqlstate for e in (alias, subject, object_)} == {"PR107"}
    assert table_counts(db) == before
