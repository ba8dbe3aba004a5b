"""Issue #51, item 2: an append takes its scope's counter last. Its row and passages are written first, at
provisional offsets; only the counter, the real offsets and passage_stat are left for the tail, held to commit.
The log's promise stays: offsets per scope contiguous, none reused, a rolled-back append leaves no gap, and
nothing acknowledged is lost."""

import random
import threading
import time

import psycopg
import pytest

import pgrecall
from conftest import run_together

PROVISIONAL = 2**62


def _backend_waiting_on_a_lock(db, pid, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = db.execute("select wait_event_type from pg_stat_activity where pid = %s", (pid,)).fetchone()
        if row and row[0] == "Lock":
            return True
        time.sleep(0.02)
    return False


def test_an_append_waiting_for_the_counter_has_written_its_turn_and_passages_already(acme, conninfo, db):
    """While another transaction holds the scope's counter, a second append does all its writing (the row,
    its passages, their embedding jobs) and waits only for the counter; it then gets the next offset."""
    app = conninfo.dsn(user="pgrecall_acme_app")
    with psycopg.connect(app, autocommit=False) as first:
        m1 = pgrecall.connect(tenant="acme", conn=first, principal="ana", scopes=["default"])
        assert m1.append("the first turn holds the counter", role="user") == 1
        second = psycopg.connect(app, autocommit=True)
        pid = second.info.backend_pid
        outcome = {}

        def append_second():
            m2 = pgrecall.connect(tenant="acme", conn=second, principal="ana", scopes=["default"])
            outcome["offset"] = m2.append("the second turn waits only for the counter", role="user")

        t = threading.Thread(target=append_second)
        t.start()
        try:
            assert _backend_waiting_on_a_lock(db, pid), "the second append should wait for the first's counter"
            # What it waits for: the first transaction (the scope's row, locked to commit) ...
            waits_for = db.execute("select pg_blocking_pids(%s)", (pid,)).fetchone()[0]
            assert waits_for == [first.info.backend_pid]
            # ... having written already: it holds the write locks of the log, of the passages and of the
            # embedding queue, which only its own inserts took.
            written = {r[0] for r in db.execute(
                "select c.relname from pg_locks l join pg_class c on c.oid = l.relation"
                " where l.pid = %s and l.mode = 'RowExclusiveLock' and l.granted", (pid,))}
            assert {"observation", "passage", "passage_embedding_job"} <= written, written
        finally:
            first.commit()
            t.join(timeout=30)
            second.close()
    assert outcome["offset"] == 2
    rows = db.execute("select log_offset, body from acme.observation where scope = 'default' order by 1").fetchall()
    assert rows == [(1, "the first turn holds the counter"), (2, "the second turn waits only for the counter")]
    assert acme.watermark() == 2


def test_the_log_refuses_every_update_but_an_append_giving_its_offsets(acme, db):
    """The append-only rule has one exception, the append's own: a provisional offset replaced by a real one,
    nothing else changed. Any other change of a row of the log is refused, offsets included."""
    acme.append("hello", role="user")
    for change in ("set body = 'rewritten'", "set log_offset = 7", f"set log_offset = {PROVISIONAL + 1}",
                   "set log_offset = log_offset, body = body || '!'"):
        with pytest.raises(psycopg.Error) as info:
            db.execute(f"update acme.observation {change}")
        assert info.value.sqlstate == "PR110", change
    assert db.execute("select log_offset, body from acme.observation").fetchall() == [(1, "hello")]


def test_passages_of_an_append_are_counted_once(acme, db):
    """passage_stat (BM25's corpus size) is counted in the append's tail, not by the passage trigger: one
    append, a batch, a bulk batch (which takes the counter first, so the trigger counts it), and a long document
    cut into many passages all count exactly."""
    acme.append("a short turn", role="user")
    acme.append_many([{"body": "one of two", "source_role": "user"}, {"body": "two of two", "source_role": "user"}])
    acme.append_many([{"body": f"bulk turn {i} of forty", "source_role": "user"} for i in range(40)])
    acme.append("word " * 3000, role="document", kind="document")
    counted = db.execute("select passages, lexemes from acme.passage_stat where scope = 'default'").fetchone()
    actual = db.execute("select count(*), sum(length(tsv)) from acme.passage where scope = 'default'").fetchone()
    assert actual[0] > 4  # the document is more than one passage
    assert counted == actual


def test_appends_waiting_for_the_counter_queue_in_turn_on_a_lock_stripe(acme, conninfo, db):
    """Appends waiting for a scope's counter queue on the tenant's lock stripe for the scope, a row only ever
    locked, never updated, rather than on the scope's row: a commit then wakes the next in line only (32
    waiters on an updated row all woke at each commit, to find it updated again, and fought for two cores).
    They get their offsets in the order they came."""
    app = conninfo.dsn(user="pgrecall_acme_app")
    with psycopg.connect(app, autocommit=False) as first:
        m1 = pgrecall.connect(tenant="acme", conn=first, principal="ana", scopes=["default"])
        assert m1.append("the holder", role="user") == 1
        waiting = [psycopg.connect(app, autocommit=True) for _ in range(2)]
        outcome = {}

        def append(n):
            m = pgrecall.connect(tenant="acme", conn=waiting[n], principal="ana", scopes=["default"])
            outcome[n] = m.append(f"waiter {n}", role="user")

        threads = []
        try:
            for n in range(2):
                threads.append(threading.Thread(target=append, args=(n,)))
                threads[-1].start()
                assert _backend_waiting_on_a_lock(db, waiting[n].info.backend_pid)
            pids = [c.info.backend_pid for c in waiting]
            tuple_locks = db.execute(
                "select l.pid, c.relname, l.granted from pg_locks l join pg_class c on c.oid = l.relation"
                " where l.locktype = 'tuple' and l.pid = any (%s) order by l.granted desc", (pids,)).fetchall()
            # the first in line holds the stripe's tuple lock and waits for the holder; the next waits for it
            assert tuple_locks == [(pids[0], "lock_stripe", True), (pids[1], "lock_stripe", False)]
        finally:
            first.commit()
            for t in threads:
                t.join(timeout=30)
            for c in waiting:
                c.close()
    assert outcome == {0: 2, 1: 3}


def test_a_bulk_append_writes_each_turn_once_at_its_real_offset(acme, conninfo, db):
    """A batch of 32 turns or more takes the counter before it writes: no turn is written at a provisional
    offset and rewritten (a second version of every row of the log, in every index). The offsets are as a small
    batch gets them: contiguous, after the turns before, in the batch's order."""
    acme.append("before the bulk load", role="user")
    with psycopg.connect(conninfo.dsn(user="pgrecall_acme_app"), autocommit=False) as conn:
        mem = pgrecall.connect(tenant="acme", conn=conn, principal="ana", scopes=["default"])
        small = mem.append_many([{"body": f"small batch turn {i}", "source_role": "user"} for i in range(3)])
        rewritten_by_small = conn.execute(
            "select pg_stat_get_xact_tuples_updated('acme.observation'::regclass)").fetchone()[0]
        bulk = mem.append_many([{"body": f"bulk turn {i}", "source_role": "user"} for i in range(40)])
        rewritten = conn.execute(
            "select pg_stat_get_xact_tuples_updated('acme.observation'::regclass)").fetchone()[0]
        conn.commit()
    assert small == [2, 3, 4] and rewritten_by_small == 3  # a small batch still takes the counter last
    assert bulk == list(range(5, 45))
    assert rewritten == rewritten_by_small  # the bulk batch rewrote none of its turns
    stored = db.execute("select log_offset, body from acme.observation where log_offset >= 5 order by 1").fetchall()
    assert stored == [(5 + i, f"bulk turn {i}") for i in range(40)]


WRITERS, ROUNDS = 8, 60


@pytest.mark.slow
def test_concurrent_appends_some_rolled_back_leave_no_gap_and_lose_nothing(acme, conninfo, db):
    """Eight writers on one scope at once, each round in its own transaction: one append, a batch or a bulk
    batch, then a commit, or a rollback (a quarter of them, after the offsets were told). The committed rows hold
    offsets 1..watermark with no gap and no duplicate, each at the offset its writer was told, none of the
    rolled-back words is anywhere, no row is left at a provisional offset, and passage_stat counts what is there."""
    barrier = threading.Barrier(WRITERS)
    committed: dict[int, str] = {}
    rolled_back: list[str] = []
    lock = threading.Lock()

    def writer(n):
        rng = random.Random(n)
        with psycopg.connect(conninfo.dsn(user="pgrecall_acme_app"), autocommit=False) as conn:
            mem = pgrecall.connect(tenant="acme", conn=conn, principal="ana", scopes=["default"])
            barrier.wait()
            for i in range(ROUNDS):
                # a bulk batch (40 rows) takes the counter first, the others last
                bodies = [f"writer {n} round {i} row {j}" for j in range(rng.choice((1, 1, 2, 3, 40)))]
                if len(bodies) == 1:
                    offsets = [mem.append(bodies[0], role="user")]
                else:
                    offsets = mem.append_many([{"body": b, "source_role": "user"} for b in bodies])
                assert offsets == list(range(offsets[0], offsets[0] + len(bodies)))  # a batch is contiguous
                if rng.random() < 0.25:
                    conn.rollback()
                    with lock:
                        rolled_back.extend(bodies)
                else:
                    conn.commit()
                    with lock:
                        committed.update(zip(offsets, bodies, strict=True))

    run_together(writer, range(WRITERS), barrier)
    assert rolled_back and committed
    stored = dict(db.execute("select log_offset, body from acme.observation where scope = 'default'").fetchall())
    assert sorted(stored) == list(range(1, len(committed) + 1))  # contiguous from 1, nothing provisional left
    assert stored == committed  # every committed row at the offset it was told, nothing else
    assert acme.watermark() == len(committed)
    assert not db.execute("select 1 from acme.passage p where p.body = any (%s)", (rolled_back,)).fetchall()
    counted = db.execute("select passages, lexemes from acme.passage_stat where scope = 'default'").fetchone()
    actual = db.execute("select count(*), sum(length(tsv)) from acme.passage where scope = 'default'").fetchone()
    assert counted == actual
