"""A call that loses a deadlock runs again (CI of stop 58: on Citus, `pgrecall tenant move` lost a distributed
deadlock to the tenant's writers and failed with 40P01; a writer can be the one cancelled as well).

PostgreSQL rolls the loser back whole. When the call was a statement of its own (autocommit, as
pgrecall.connect() opens, or a pool's connection lent outside a transaction), the driver runs it again, and
the caller sees one success with the turn stored once. Inside the caller's own transaction the error is the
caller's: their earlier statements were rolled back too.
"""

from __future__ import annotations

import asyncio
import threading

import psycopg
import pytest

import pgrecall
from conftest import wait_until
from pgrecall import errors

TEXT = "I keep my spare key under the blue flowerpot"


def _deadlock_an_append(superuser_dsn: str, append) -> dict:
    """Make the append lose a deadlock once: a session holds the scope's append stripe (the append waits on
    it at its tail, holding its inserted rows), then asks for a lock the append's rows block. The append's
    backend checks for deadlock first (this session's deadlock_timeout is a minute), so it is the loser."""
    outcome: dict = {}
    with psycopg.connect(superuser_dsn) as other:
        other.execute("set deadlock_timeout = '60s'")
        other.execute("select 1 from acme.lock_stripe where stripe = (hashtextextended('log offset:default', 0)"
                      " & 4095)::integer for no key update")

        def appending():
            try:
                outcome["offset"] = append()
            except BaseException as exc:
                outcome["error"] = exc

        thread = threading.Thread(target=appending)
        thread.start()
        with psycopg.connect(superuser_dsn, autocommit=True) as watcher:
            wait_until(lambda: watcher.execute(
                "select count(*) from pg_stat_activity where wait_event_type = 'Lock'"
                " and query like '%append_observation%'").fetchone()[0] == 1,
                what="the append to wait on the scope's stripe")
        # Waits for the append's transaction until the append, losing the deadlock, is rolled back.
        other.execute("lock table acme.observation in share mode")
        outcome["other_waited_it_out"] = True
        other.commit()
        thread.join(30)
    return outcome


def _stored(db, text: str) -> int:
    return db.execute("select count(*) from acme.observation where body = %s", (text,)).fetchone()[0]


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_an_append_that_loses_a_deadlock_runs_again_and_is_stored_once(acme, conninfo, db, superuser_dsn, driver):
    dsn = conninfo.dsn(user="pgrecall_acme_app")
    if driver == "sync":
        with pgrecall.connect(dsn, tenant="acme", principal="bot", scopes=["default"]) as mem:
            outcome = _deadlock_an_append(superuser_dsn, lambda: mem.append(TEXT, role="user", actor="ana"))
    else:
        async def append_async():
            async with await pgrecall.connect_async(dsn, tenant="acme", principal="bot", scopes=["default"]) as amem:
                return await amem.append(TEXT, role="user", actor="ana")

        outcome = _deadlock_an_append(superuser_dsn, lambda: asyncio.run(append_async()))
    assert outcome.get("other_waited_it_out")
    assert "error" not in outcome, outcome.get("error")
    assert isinstance(outcome["offset"], int)
    assert _stored(db, TEXT) == 1
    assert db.execute("select body from acme.observation where scope = 'default' and log_offset = %s",
                      (outcome["offset"],)).fetchone()[0] == TEXT


def test_inside_the_callers_transaction_the_lost_deadlock_is_the_callers(acme, conninfo, db, superuser_dsn):
    dsn = conninfo.dsn(user="pgrecall_acme_app")
    with psycopg.connect(dsn) as conn:  # not autocommit: the caller's transaction holds the append
        mem = pgrecall.connect(conn=conn, tenant="acme", principal="bot", scopes=["default"])
        outcome = _deadlock_an_append(superuser_dsn, lambda: mem.append(TEXT, role="user", actor="ana"))
        assert outcome.get("other_waited_it_out")
        lost = outcome.get("error")
        assert isinstance(lost, errors.LostRace) and isinstance(lost, RuntimeError), lost
        assert lost.__cause__.sqlstate == "40P01" and "deadlock detected" in str(lost)
        conn.rollback()
    assert _stored(db, TEXT) == 0


def test_a_move_cancelled_by_a_deadlock_is_run_again(db, superuser_dsn, capsys):
    """`pgrecall tenant move` and `rebalance` run citus_schema_move, which a distributed deadlock with the
    tenant's writers can cancel (the move then rolled back whole). The CLI's runner of those two statements
    tries again; shown here on a statement of its own that loses a plain deadlock once."""
    from pgrecall.cli.tenant import _run_again_when_cancelled

    with psycopg.connect(superuser_dsn) as other, psycopg.connect(superuser_dsn, autocommit=True) as cli_conn:
        other.execute("set deadlock_timeout = '60s'")
        other.execute("select pg_advisory_xact_lock(4702)")
        outcome: dict = {}

        def moving():
            try:
                outcome["row"] = _run_again_when_cancelled(
                    cli_conn, "select 'moved' from pg_advisory_xact_lock(4701) a, pg_advisory_xact_lock(4702) b", (),
                    "the move of acme")
            except BaseException as exc:
                outcome["error"] = exc

        thread = threading.Thread(target=moving)
        thread.start()
        with psycopg.connect(superuser_dsn, autocommit=True) as watcher:
            wait_until(lambda: watcher.execute(
                "select count(*) from pg_locks where locktype = 'advisory' and not granted").fetchone()[0] == 1,
                what=f"the statement to wait for the second lock ({outcome})")
        other.execute("select pg_advisory_xact_lock(4701)")  # the cycle: the statement's backend loses it
        other.commit()
        thread.join(60)
    assert "error" not in outcome, outcome.get("error")
    assert outcome["row"] == ("moved",)
    assert "the move of acme lost a deadlock" in capsys.readouterr().err


def test_a_move_that_finds_the_last_attempts_copy_not_yet_cleaned_up_is_run_again(db, superuser_dsn, capsys):
    """After a move lost a deadlock, Citus's cleaner drops the copy it left on the target in its own time; the
    next attempt, started before, refuses with XX000 "shard move failed as the orphaned shard ... leftover from
    the previous move could not be cleaned up" (make test-citus under load: the move exited 1). Nothing was
    moved, so the runner tries again after a pause; any other internal error is raised at once. Shown on a
    statement that raises that error on its first attempt."""
    from pgrecall.cli.tenant import _run_again_when_cancelled

    with psycopg.connect(superuser_dsn, autocommit=True) as cli_conn:
        cli_conn.execute("create temporary sequence attempts")
        cli_conn.execute("""
            create function pg_temp.move_once(p_message text) returns text language plpgsql as $$
            begin
                if nextval('attempts') = 1 then
                    raise exception using errcode = 'XX000', message = p_message;
                end if;
                return 'moved';
            end $$""")
        orphan = ("shard move failed as the orphaned shard acme.corpus_stat_102412 leftover from the previous move "
                  "could not be cleaned up")
        row = _run_again_when_cancelled(cli_conn, "select pg_temp.move_once(%s)", (orphan,), "the move of acme")
        assert row == ("moved",)
        assert "the move of acme found the copy its previous attempt left not yet cleaned up" in capsys.readouterr().err
        cli_conn.execute("select setval('attempts', 1, false)")
        with pytest.raises(psycopg.errors.InternalError, match="something else"):
            _run_again_when_cancelled(cli_conn, "select pg_temp.move_once(%s)", ("something else",), "the move")
