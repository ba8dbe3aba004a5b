"""Queue leases end with the session that took them: a killed worker's jobs and tasks come back at the
next claim, not when the lease expires. The same rule for the three queues (memory embeddings, passage
embeddings, derivation tasks)."""

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psycopg
import pytest

import scaleout
from conftest import run_together
from test_recall import put

CLAIMS = {
    "embedding": "select count(*) from acme.claim_embedding_jobs(%s, 1000)",
    "passage_embedding": "select count(*) from acme.claim_passage_embedding_jobs(%s, 1000)",
    "task": "select count(*) from acme.claim_tasks(%s, 1000)",
}


def setting(db, key, value):
    db.execute("select pgrecall.set_tenant_setting('acme', %s, %s)", (key, value))


def queue_work(acme, queue):
    """One claimable job or task in the queue."""
    if queue == "embedding":
        put(acme, "Ana keeps bees on the roof")
    elif queue == "passage_embedding":
        acme.append("Ana keeps bees on the roof", role="user", actor="ana")
    else:
        s = acme.create_session("bees")
        acme.add_session_peers(s, ["ana"])
        acme.add_messages(s, [{"actor": "ana", "body": "I keep bees on the roof"}])


def claim(conn, queue, worker):
    return conn.execute(CLAIMS[queue], (worker,)).fetchone()[0]


def seconds_until(condition, timeout=30.0):
    """How long until condition() holds (a backend exits a moment after its client closes or dies)."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout, "never happened"
        time.sleep(0.05)
    return time.monotonic() - started


def claimable(db, queue):
    """How many jobs or tasks a claim would take now; the claim is rolled back, taking nothing."""
    with db.transaction():
        n = claim(db, queue, "probe")
        raise psycopg.Rollback()
    return n


@pytest.mark.parametrize("queue", list(CLAIMS))
def test_a_lease_lasts_while_its_session_lives_and_ends_with_it(acme, db, conninfo, queue):
    queue_work(acme, queue)
    first = conninfo.connect(user="pgrecall_acme_worker")
    assert claim(first, queue, "first") == 1
    # another role's session (the tester, not the worker role) sees the lease as held
    assert claim(db, queue, "second") == 0
    assert claim(first, queue, "first again") == 0  # and so does the session that holds it
    first.close()
    assert seconds_until(lambda: claim(db, queue, "second") == 1) < 5  # the lease had 300 seconds to run


@pytest.mark.parametrize("queue", list(CLAIMS))
def test_with_leases_end_with_session_off_only_expiry_ends_a_lease(acme, db, conninfo, queue):
    setting(db, "leases_end_with_session", "false")
    setting(db, "embedding_lease_seconds", "1")
    setting(db, "task_lease_seconds", "1")
    queue_work(acme, queue)
    with conninfo.connect(user="pgrecall_acme_worker") as first:
        assert claim(first, queue, "first") == 1
    assert claim(db, queue, "second") == 0
    time.sleep(1.1)
    assert claim(db, queue, "second") == 1


def test_a_task_whose_session_ended_on_its_last_attempt_is_dead_lettered(acme, db, conninfo):
    setting(db, "task_max_attempts", "1")
    queue_work(acme, "task")
    with conninfo.connect(user="pgrecall_acme_worker") as first:
        assert claim(first, "task", "first") == 1

    def dead_lettered():
        assert claim(db, "task", "second") == 0  # never handed out again
        return db.execute("select status from acme.work_task").fetchone()[0] == "dead"

    assert seconds_until(dead_lettered) < 5
    assert "session" in db.execute("select last_error from acme.work_task").fetchone()[0]


def test_a_lease_taken_before_the_upgrade_still_runs_to_its_expiry(acme, db, conninfo):
    queue_work(acme, "embedding")
    with conninfo.connect(user="pgrecall_acme_worker") as first:
        assert claim(first, "embedding", "first") == 1
    # a lease recorded without its session (taken by the functions of an earlier release)
    db.execute("update acme.embedding_job set lease_session = null")
    assert claim(db, "embedding", "second") == 0


_DYING_DERIVER = textwrap.dedent("""
    import sys, time
    from pgrecall.deriver import Deriver

    def hang(messages):
        print("claimed", flush=True)
        time.sleep(600)   # the LLM takes its time; the process is killed meanwhile
        return []

    Deriver("acme", conninfo=sys.argv[1], extract=hang).drain()
""")


def test_a_deriver_killed_with_sigkill_leaves_its_task_to_the_next_deriver_at_once(acme, db, conninfo):
    setting(db, "task_lease_seconds", "3600")  # so that nothing but the end of its session frees the task
    s = acme.create_session("kill")
    acme.add_session_peers(s, ["ana"])
    acme.add_messages(s, [{"actor": "ana", "body": "I live in Lisbon"}, {"actor": "ana", "body": "I work at Acme"}])
    worker_dsn = conninfo.dsn(user="pgrecall_acme_worker")
    src = str(Path(__file__).resolve().parents[1] / "python")
    proc = subprocess.Popen([sys.executable, "-c", _DYING_DERIVER, worker_dsn], env={**os.environ, "PYTHONPATH": src},
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "claimed", proc.stderr.read()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert db.execute("select status, coalesce(lease_until > now() + interval '3000 seconds', false) "
                      "from acme.work_task order by message_offset").fetchall() == [("leased", True), ("pending", False)]
    assert seconds_until(lambda: claimable(db, "task") == 1) < 5
    env = {**os.environ, "PGRECALL_DSN": worker_dsn}
    done = subprocess.run([sys.executable, "-m", "pgrecall.cli", "deriver", "--tenant", "acme", "--once"],
                          env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert "2 tasks completed" in done.stdout
    assert db.execute("select status, attempts from acme.work_task order by message_offset").fetchall() == \
        [("done", 2), ("done", 1)]
    assert sorted(r.body for r in acme.representation("ana", principal="ana") if r.item == "memory") == \
        ["ana lives in Lisbon", "ana works at Acme"]


FIRST_CLAIMS = {
    "embedding": "select memory_id from acme.claim_embedding_jobs(%s, 2)",
    "passage_embedding": "select passage_id from acme.claim_passage_embedding_jobs(%s, 2)",
}


@pytest.mark.parametrize("queue", list(FIRST_CLAIMS))
def test_a_live_session_keeps_the_lease_it_took_while_others_made_their_first_claim(acme, db, conninfo, queue):
    """Workers that start together: a claim must not take a job that another, living, session leased a moment
    after this claim looked at which sessions hold leases (each job is claimed once while every worker lives)."""
    import threading

    for round_ in range(5):
        db.execute(f"delete from acme.{queue}_job")
        for i in range(8):
            put(acme, f"job {i} of round {round_} for four workers starting at once")
        barrier, claimed = threading.Barrier(4), []
        done = threading.Barrier(4)  # every session stays alive until all have claimed

        def work(name, barrier=barrier, claimed=claimed, done=done):
            with conninfo.connect(user="pgrecall_acme_worker") as conn:
                barrier.wait()
                while rows := conn.execute(FIRST_CLAIMS[queue], (name,)).fetchall():
                    claimed.extend(r[0] for r in rows)
                done.wait()

        run_together(work, [f"w{n}" for n in range(4)], barrier)
        assert sorted(claimed) == sorted(set(claimed)) and len(claimed) == 8, claimed


def test_the_lease_engine_runs_no_sql_assembled_from_text(acme, db):
    """Issue #47: every lease function, and every function that calls one, runs static statements (planned once
    and kept, as Citus plans any function's statement): no EXECUTE, and the lease functions build no text with
    format() (a queue is named by its function, not by a string)."""
    functions = db.execute(
        "select p.proname, p.prosrc from pg_proc p where p.pronamespace = 'acme'::regnamespace").fetchall()
    bodies = {name: scaleout.strip_comments(body) for name, body in functions}
    lease = {name for name in bodies if name.startswith("_lease_")}
    callers = {name for name, code in bodies.items() if re.search(r"\b_lease_\w*\s*\(", code)}
    for name in sorted(lease | callers):
        assert not re.search(r"\bexecute\b", bodies[name], re.I), f"{name} runs dynamic SQL"
    for name in sorted(lease):
        assert not re.search(r"\bformat\s*\(", bodies[name], re.I), f"{name} assembles text"
    source = scaleout.strip_comments((Path(__file__).resolve().parents[1] / "plpgsql" / "queues" / "leases.sql").read_text())
    assert not re.search(r"\bexecute\b|\bformat\s*\(", source, re.I)
    assert {"_lease_claim_embedding", "_lease_claim_passage_embedding", "_lease_claim_task"} <= lease
    assert {"claim_embedding_jobs", "claim_passage_embedding_jobs", "claim_tasks", "fail_task"} <= callers


def test_the_lease_rule_is_inlined_into_the_statement_that_uses_it(acme, db):
    """The rule is written once (_lease_over, _lease_over_now) and spelled by the planner into each statement,
    not called per row: a call per leased row tripled a claim past 2000 leased jobs."""
    def plan(condition):
        return "\n".join(r[0] for r in db.execute(
            "explain (verbose, costs off) select q.memory_id from acme.embedding_job q where " + condition))

    over = plan("acme._lease_over(q.lease_until, q.lease_session, '{1,2}'::integer[])")
    assert "_lease_over" not in over and "clock_timestamp()" in over and "lease_session" in over, over
    now = plan("acme._lease_over_now(q.lease_until, q.lease_session)")
    assert "_lease_over_now" not in now and "_lease_holder_alive" in now, now
