"""The term statistics' refresh folds in the memories written since the last one instead of recounting every
memory's terms (plpgsql/recall/term_stats.sql): whatever happened in between, the statistics it leaves are
a recount's, which recall's lexical ranking reads."""

import psycopg
import pytest

import pgrecall
from test_recall import put

RECOUNT = """
select u.lexeme, count(*)::integer, max(m.id) from acme.memory m cross join lateral unnest(m.tsv) u
 where m.superseded_by is null and m.invalidated_at is null group by u.lexeme order by u.lexeme"""
CORPUS = """
select count(*) filter (where live),
       coalesce(sum(length(tsv)) filter (where live)::float8 / nullif(count(*) filter (where live), 0), 0),
       coalesce(max(id), 0)
  from (select id, tsv, superseded_by is null and invalidated_at is null as live from acme.memory) m"""


def refresh(db):
    db.execute("select * from acme.refresh_term_stats()")


def assert_a_recounts(db):
    terms = db.execute("select term, df, witness_memory_id from acme.term_stat order by term").fetchall()
    assert terms == db.execute(RECOUNT).fetchall()
    documents, avg_length, max_id = db.execute(
        "select documents, avg_length, max_memory_id from acme.corpus_stat").fetchone()
    expected = db.execute(CORPUS).fetchone()
    assert (documents, max_id) == (expected[0], expected[2])
    assert avg_length == pytest.approx(expected[1], rel=1e-12)


def test_the_statistics_after_remember_correct_supersede_and_forget_are_a_recounts(acme, db):
    first = put(acme, "ana keeps bees on the roof")
    put(acme, "ben repairs old bicycles")
    refresh(db)
    assert_a_recounts(db)
    put(acme, "ana sells honey from the roof bees")  # words counted before, and new ones
    put(acme, "the bicycles need new tyres")
    refresh(db)
    assert_a_recounts(db)
    acme.correct(first, "ana keeps wasps on the balcony", revision=1)
    put(acme, "ben rides to the market on saturdays")
    refresh(db)
    assert_a_recounts(db)
    second = put(acme, "the market opens at dawn")
    replaced = acme.supersede(second, "the market opens at nine", revision=1,
                              evidence=[acme.append("it opens at nine now", role="user")])
    refresh(db)
    assert_a_recounts(db)
    acme.forget(replaced, reason="wrong")
    put(acme, "honey keeps for years")
    refresh(db)
    assert_a_recounts(db)
    put(acme, "wasps sting, bees sting once")
    refresh(db)
    assert_a_recounts(db)


def test_a_refresh_after_one_new_memory_writes_that_memorys_terms_not_every_term_again(acme, conninfo, db):
    """The refresh that recounted every memory's terms deleted and wrote every term each time."""
    for i in range(12):
        put(acme, f"note {i}: the {['red', 'green', 'blue'][i % 3]} van {i} delivers parcels to street {i}")
    refresh(db)
    terms = db.execute("select count(*) from acme.term_stat").fetchone()[0]
    new = put(acme, "a zebra delivers parcels")
    lexemes = db.execute("select length(tsv) from acme.memory where id = %s", (new,)).fetchone()[0]
    with conninfo.connect(user="pgrecall_acme_worker") as worker:  # one transaction: its own table counters
        worker.execute("select * from acme.refresh_term_stats()")
        inserted, updated, deleted = worker.execute(
            "select n_tup_ins, n_tup_upd, n_tup_del from pg_stat_xact_user_tables"
            " where schemaname = 'acme' and relname = 'term_stat'").fetchone()
        worker.commit()
    assert deleted == 0 and inserted + updated == lexemes < terms
    assert_a_recounts(db)


def test_a_memory_committed_after_a_refresh_that_missed_its_id_is_counted_by_the_next(acme, conninfo, db):
    """A transaction in flight at a refresh holds a lower id than one committed before it: the refresh
    sees the higher id and not the lower; the next counts the lower once it is there."""
    put(acme, "the ferry leaves at noon")
    refresh(db)
    with psycopg.connect(conninfo.dsn(user="pgrecall_acme_app"), autocommit=False) as open_tx:
        # in the other scope: the two transactions' appends do not wait for each other
        late = pgrecall.connect(tenant="acme", conn=open_tx, principal="bot", scopes=["other"])
        offset = late.append("the ferry is late on sundays", role="user", actor="ana", scope="other")
        late.remember("the ferry is late on sundays", evidence=[offset], purposes=["converse"], scope="other")
        put(acme, "the harbour closes at dusk")  # a higher id, committed first
        refresh(db)
        assert_a_recounts(db)  # the open transaction's memory is not there yet
        open_tx.commit()
    refresh(db)
    assert_a_recounts(db)
    assert db.execute("select df from acme.term_stat where term = 'sunday'").fetchone() == (1,)
