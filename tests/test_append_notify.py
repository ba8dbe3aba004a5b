"""Issue #51, item 2: an append or a remember sends no notification when embedding work waits already.

PostgreSQL serialises the commits of the transactions that notified, database-wide: a lock taken at commit
and held through the commit's WAL flush. Under load every append queued behind the commits of the others
(and of every remember) for that lock. A write that queues embedding work now notifies only when no job
waits unleased; the worker that takes the waiting work looks again after its round, once the transactions
then in flight have ended, so the work of one that did not notify is not left for the next poll."""

import select
import threading
import time

import psycopg

import pgrecall
from conftest import wait_until
from pgrecall import names
from pgrecall.worker import Worker
from test_recall import put


def _notified(listener, wait=0.3):
    """Whether a notification reached the listener within ``wait`` seconds (all of them read)."""
    ready, _, _ = select.select([listener.fileno()], [], [], wait)
    return ready and any(True for _ in listener.notifies(timeout=0))


def _jobs_waiting(db):
    return db.execute("select (select count(*) from acme.passage_embedding_job where leased_by is null)"
                      " + (select count(*) from acme.embedding_job where leased_by is null)").fetchone()[0]


def test_a_write_notifies_only_when_no_embedding_work_waits_unleased(acme, conninfo, db):
    with conninfo.connect(user="pgrecall_acme_worker") as listener:
        names.listen(listener, "embed", "acme")
        listener.execute("select 1")
        assert _jobs_waiting(db) == 0
        acme.append("the first turn finds the queue empty", role="user")
        assert _notified(listener), "the first job queued must wake the worker"
        acme.append("a second turn while the first waits", role="user")
        assert not _notified(listener), "work waits already: a worker will come for it"
        put(acme, "a memory while the turns wait")
        assert not _notified(listener), "work waits already: a worker will come for it"
        # Every job leased: a worker holds them, and may be done before it could see a new one.
        with conninfo.connect(user="pgrecall_acme_worker") as w:
            w.execute("select count(*) from acme.claim_passage_embedding_jobs('w', 100)")
            w.execute("select count(*) from acme.claim_embedding_jobs('w', 100)")
        assert _jobs_waiting(db) == 0
        acme.append("a turn while every job is leased", role="user")
        assert _notified(listener), "no job waits unleased: the write must notify"
        put(acme, "a memory while one turn waits")
        assert not _notified(listener)


def test_the_worker_takes_the_jobs_of_a_transaction_that_did_not_notify(acme, conninfo, db):
    """The race: a transaction queues a job and does not notify, because a job waits; a worker takes that job,
    finds nothing more, and would sleep until its poll (60 s here) with the transaction's job committed after
    its last look. It looks again once the transactions in flight at the end of its round have ended."""
    acme.append("a turn that waits for the worker", role="user")
    app = conninfo.dsn(user="pgrecall_acme_app")
    with psycopg.connect(app, autocommit=False) as open_tx, \
            conninfo.connect(user="pgrecall_acme_worker") as listener:
        names.listen(listener, "embed", "acme")
        listener.execute("select 1")
        late = pgrecall.connect(tenant="acme", conn=open_tx, principal="bot", scopes=["default"])
        offset = late.append("a turn queued while another waited, committed after the worker's round", role="user")
        worker = Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker"))
        stop = threading.Event()
        t = threading.Thread(target=worker.run_forever, kwargs={"poll_seconds": 60, "stop": stop.is_set})
        t.start()
        try:
            wait_until(lambda: db.execute("select count(*) from acme.passage_embedding_job").fetchone()[0] == 0,
                       timeout=60, what="the worker to embed the waiting turn")
            open_tx.commit()
            assert not _notified(listener, wait=0), "the late transaction sent no notification"
            started = time.monotonic()
            wait_until(lambda: db.execute(
                "select count(*) from acme.passage p join acme.observation o on o.id = p.observation_id"
                " where o.scope = 'default' and o.log_offset = %s and p.embedding is not null",
                (offset,)).fetchone()[0] > 0, timeout=15, what="the late turn to be embedded (the poll is 60 s)")
            assert time.monotonic() - started < 15
        finally:
            stop.set()
            acme.append("wake it so it can see the stop flag", role="user")
            t.join(timeout=60)
