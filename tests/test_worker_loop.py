"""The loop of the embedding worker and the deriver (pgrecall.loop): a lost connection is retried with
backoff and the loop goes on; a permanent error stops it. Connections are lost for real: the test
terminates the loop's backends with pg_terminate_backend (a role may signal its own sessions)."""

import logging
import threading
import time

import pytest

from pgrecall import errors, loop, names
from pgrecall.deriver import Deriver
from pgrecall.worker import Worker
from test_recall import put


def wait_for(condition, timeout=60.0):
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout, "never happened"
        time.sleep(0.1)


class Running:
    """run_forever on a thread, stopped at the end; what it raised, if anything, is kept."""

    def __init__(self, target):
        self.stopping = threading.Event()
        self.raised: list[BaseException] = []

        def body():
            try:
                target(poll_seconds=0.5, stop=self.stopping.is_set)
            except BaseException as exc:  # kept for the test to look at
                self.raised.append(exc)

        self.thread = threading.Thread(target=body, daemon=True)
        self.thread.start()

    def stop(self):
        self.stopping.set()
        self.thread.join(timeout=30)
        assert not self.thread.is_alive()


def terminate_sessions(conninfo, role):
    """Terminate every backend of role (but the one asking): what a server restart does to a client."""
    with conninfo.connect(user=role) as conn:
        return conn.execute("select count(*) filter (where pg_terminate_backend(a.pid)) from pg_stat_activity a "
                            "where a.usename = %s and a.pid <> pg_backend_pid()", (role,)).fetchone()[0]


def idle_sessions_of(db, role):
    """Sessions of role, or -1 while one of them is busy (a loop between two jobs opens and closes)."""
    states = [r[0] for r in db.execute("select state from pg_stat_activity where usename = %s", (role,)).fetchall()]
    return len(states) if all(state == "idle" for state in states) else -1


def embedded(db):
    return db.execute("select count(*) from acme.memory_embedding").fetchone()[0]


def test_backoff_doubles_up_to_its_ceiling_and_starts_again_after_a_success():
    b = loop.Backoff(first=0.5, most=4)
    assert [b.next() for _ in range(6)] == [0.5, 1, 2, 4, 4, 4]
    b.reset()
    assert b.next() == 0.5


def test_the_worker_loop_reconnects_after_its_backends_are_terminated(acme, conninfo, db, caplog):
    caplog.set_level(logging.WARNING, logger="pgrecall.loop")
    put(acme, "first memory, before the connection is lost")
    worker = Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker"))
    running = Running(worker.run_forever)
    try:
        wait_for(lambda: embedded(db) == 1)
        # Its working and its listening session, both at once; on a loaded machine the second may open a
        # moment later, and one may close between the look and the kill: then the loop has lost one
        # connection, which it must survive too, and the kill is tried again until both go together.
        wait_for(lambda: idle_sessions_of(db, "pgrecall_acme_worker") == 2
                 and terminate_sessions(conninfo, "pgrecall_acme_worker") == 2)
        put(acme, "second memory, after the connection was lost")
        wait_for(lambda: embedded(db) == 2)
        assert not running.raised and running.thread.is_alive()
    finally:
        running.stop()
    assert not running.raised
    assert any("connection lost" in r.getMessage() for r in caplog.records)


def test_the_deriver_loop_reconnects_after_its_backends_are_terminated(acme, conninfo, db):
    s = acme.create_session("loop")
    acme.add_session_peers(s, ["ana"])
    acme.add_messages(s, [{"actor": "ana", "body": "I live in Lisbon"}])
    deriver = Deriver("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker"))
    running = Running(deriver.run_forever)

    def done():
        return db.execute("select count(*) from acme.work_task where status = 'done'").fetchone()[0]

    try:
        wait_for(lambda: done() == 1)
        wait_for(lambda: idle_sessions_of(db, "pgrecall_acme_worker") == 2
                 and terminate_sessions(conninfo, "pgrecall_acme_worker") == 2)  # as in the worker's test
        acme.add_messages(s, [{"actor": "ana", "body": "I work at Acme"}])
        wait_for(lambda: done() == 2)
        assert not running.raised and running.thread.is_alive()
    finally:
        running.stop()
        deriver.close()
    assert db.execute("select count(*) from acme.work_task where status <> 'done'").fetchone()[0] == 0
    assert sorted(r.body for r in acme.representation("ana", principal="ana") if r.item == "memory") == \
        ["ana lives in Lisbon", "ana works at Acme"]


def test_a_permanent_error_stops_the_loop_at_once(acme, conninfo, db):
    put(acme, "a memory the app role may not claim")
    # the app role has no worker duty: every claim is refused, and waiting will not change that
    worker = Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_app"))
    started = time.monotonic()
    with pytest.raises(errors.NotPermitted):
        worker.run_forever(poll_seconds=0.1, stop=lambda: time.monotonic() - started > 30)
    assert time.monotonic() - started < 30
    # a tenant that embeds with another model: this worker cannot serve it
    db.execute("select acme.set_embedding_version('another-model', 2)")
    worker = Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker"))
    with pytest.raises(errors.ModelMismatch):
        worker.run_forever(poll_seconds=0.1, stop=lambda: time.monotonic() - started > 60)
    deriver = Deriver("acme", conninfo=conninfo.dsn(user="pgrecall_acme_app"))
    with pytest.raises(errors.NotPermitted):
        deriver.run_forever(poll_seconds=0.1, stop=lambda: time.monotonic() - started > 90)
    deriver.close()
    assert time.monotonic() - started < 60


def test_an_unreachable_server_is_retried_with_growing_delays_until_stopped(acme, conninfo, caplog):
    caplog.set_level(logging.WARNING, logger="pgrecall.loop")
    nowhere = conninfo.dsn(user="pgrecall_acme_worker").replace(f"port={conninfo.port}", "port=1")
    assert "port=1" in nowhere
    worker = Worker("acme", conninfo=nowhere)
    started = time.monotonic()
    worker.run_forever(poll_seconds=0.1, stop=lambda: time.monotonic() - started > 3.2)
    delays = [float(r.getMessage().rsplit("reconnecting in ", 1)[1].split()[0]) for r in caplog.records
              if "connection lost" in r.getMessage()]
    assert delays[:3] == [0.5, 1.0, 2.0]


class CountingRounds:
    """The loop's work: counts its rounds (each one a claim the database answers) and finds nothing to do."""

    def __init__(self):
        self.rounds: list[float] = []

    def __call__(self, conn):
        self.rounds.append(time.monotonic())
        conn.execute("select 1")
        return 0


def running_loop(conninfo, work, poll_seconds):
    stopping = threading.Event()
    thread = threading.Thread(target=loop.run, args=(conninfo.dsn(user="pgrecall_acme_worker"), "acme", "embed", work),
                              kwargs={"poll_seconds": poll_seconds, "stop": stopping.is_set}, daemon=True)
    thread.start()
    wait_for(lambda: work.rounds, timeout=30)
    return stopping, thread


def test_a_flood_of_notifications_costs_at_most_one_empty_poll_per_interval(acme, conninfo, capsys):
    """Finding 3: a NOTIFY on the worker's channel woke it for a round of claims each time; a role that may
    NOTIFY there (the tenant's own, now that no other can name the channel) must not make it poll on demand."""
    work = CountingRounds()
    stopping, thread = running_loop(conninfo, work, poll_seconds=1.0)
    try:
        with conninfo.connect(user="pgrecall_acme_worker") as flooder:
            channel = names.listen(flooder, "embed", "acme")
            started = time.monotonic()
            sent = 0
            while time.monotonic() - started < 4.0:
                flooder.execute(f'notify "{channel}"')
                sent += 1
                time.sleep(0.005)
            flooded = [t for t in work.rounds if t >= started]
    finally:
        stopping.set()
        thread.join(timeout=30)
    with capsys.disabled():
        print(f"\n{sent} notifications in 4 s, poll interval 1 s: {len(flooded)} rounds of claims")
    assert sent > 300
    # one round per interval of 1 s, and the first notification may cost one more
    assert len(flooded) <= 4 + 2, (len(flooded), sent)


def test_a_notification_still_wakes_an_idle_worker_at_once(acme, conninfo):
    """The other side of the bound: a notification after quiet polls is heeded at once, not at the next poll."""
    work = CountingRounds()
    stopping, thread = running_loop(conninfo, work, poll_seconds=20.0)
    try:
        time.sleep(0.5)
        before = len(work.rounds)
        with conninfo.connect(user="pgrecall_acme_worker") as notifier:
            channel = names.listen(notifier, "embed", "acme")
            sent = time.monotonic()
            notifier.execute(f'notify "{channel}"')
        wait_for(lambda: len(work.rounds) > before, timeout=10)
        assert work.rounds[before] - sent < 1.0
    finally:
        stopping.set()
        thread.join(timeout=60)
