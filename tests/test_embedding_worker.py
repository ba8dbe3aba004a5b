"""The embedding worker: queue, leases, crash recovery, rebuild, version changes."""

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import wait_until
from pgrecall.driver import EmbeddingStatus
from pgrecall.embedder import get_embedder, to_literal
from pgrecall.worker import Worker
from test_leases import claimable, seconds_until
from test_recall import put
from test_worker_loop import terminate_sessions


def status(mem):
    return mem.embedding_status()


def test_write_path_queues_and_correct_supersede_forget_remove_stale_vectors(acme, conninfo, db):
    a = put(acme, "the first memory")
    b = put(acme, "the second memory")
    assert status(acme).queued == 2
    Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker")).drain()
    assert status(acme) == EmbeddingStatus(queued=0, leased=0, current=2, stale=0, model="all-MiniLM-L6-v2",
                                           input_version=2, passages_queued=0, passages_current=2, passages_stale=0)
    acme.correct(a, "the first memory, corrected", revision=1)
    assert db.execute("select count(*) from acme.memory_embedding where memory_id = %s", (a,)).fetchone()[0] == 0
    assert status(acme).queued == 1
    new = acme.supersede(b, "the second memory, replaced", revision=1, evidence=[acme.append("x", role="user")])
    assert db.execute("select count(*) from acme.memory_embedding where memory_id = %s", (b,)).fetchone()[0] == 0
    Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker")).drain()
    embedded = {r[0] for r in db.execute("select memory_id from acme.memory_embedding")}
    assert embedded == {a, new}
    acme.forget(new, reason="gone")
    assert {r[0] for r in db.execute("select memory_id from acme.memory_embedding")} == {a}
    # the registry follows the vectors
    registered = {r[0] for r in db.execute("select row_key from acme.projection_dependency where kind = 'memory_embedding'")}
    assert registered == {str(a)}


def test_a_late_result_from_a_worker_whose_lease_expired_is_not_stored(acme, conninfo, db):
    m = put(acme, "a memory to embed")
    db.execute("select pgrecall.set_tenant_setting('acme', 'embedding_lease_seconds', '0.5')")
    with conninfo.connect(user="pgrecall_acme_worker") as app:
        first = app.execute("select * from acme.claim_embedding_jobs('worker-a', 10)").fetchall()
        assert [r[0] for r in first] == [m]
        assert app.execute("select count(*) from acme.claim_embedding_jobs('worker-b', 10)").fetchone()[0] == 0
        second = wait_until(lambda: app.execute("select * from acme.claim_embedding_jobs('worker-b', 10)").fetchall(),
                            timeout=10, what="worker-a's lease to run out")
        assert [r[0] for r in second] == [m]
        vec = to_literal(get_embedder().embed([first[0][2]])[0])
        stored_b = app.execute("select acme.complete_embedding_jobs('worker-b', %s, %s, %s, %s, %s)",
                               ([m], [second[0][1]], [vec], second[0][3], second[0][4])).fetchone()[0]
        stored_a = app.execute("select acme.complete_embedding_jobs('worker-a', %s, %s, %s, %s, %s)",
                               ([m], [first[0][1]], [vec], first[0][3], first[0][4])).fetchone()[0]
    assert (stored_b, stored_a) == (1, 0)
    assert db.execute("select count(*) from acme.memory_embedding").fetchone()[0] == 1
    assert db.execute("select count(*) from acme.embedding_job").fetchone()[0] == 0



@pytest.mark.parametrize("queue,kind", [("embedding", "memory"), ("passage_embedding", "passage")])
def test_malformed_or_outdated_results_store_nothing(acme, conninfo, db, queue, kind):
    """Both queues check a worker's results the same way: one array length, 384 dimensions, and results
    for a model the tenant no longer uses are dropped (0 stored), not an error."""
    put(acme, "a memory whose observation is a passage too")
    good = to_literal([0.05] * 384)
    with conninfo.connect(user="pgrecall_acme_worker", autocommit=True) as app:
        jobs = app.execute(f"select * from acme.claim_{queue}_jobs('w', 10)").fetchall()
        assert len(jobs) == 1
        (jid, gen, _, model, version, *_), = jobs  # memory jobs carry their own text too (text_input)
        call = f"select acme.complete_{queue}_jobs('w', %s, %s, %s, %s, %s)"
        with pytest.raises(Exception) as info:
            app.execute(call, ([jid], [gen, gen], [good], model, version))
        assert f"{kind} ids, generations and embeddings must be arrays of one length" in str(info.value)
        with pytest.raises(Exception) as info:
            app.execute(call, ([jid], [gen], ["[1,2,3]"], model, version))
        assert "an embedding has 3 dimensions, not 384" in str(info.value)
        assert app.execute(call, ([jid], [gen], [good], "another-model", version)).fetchone()[0] == 0
        assert app.execute(call, ([jid], [gen], [good], model, version)).fetchone()[0] == 1

def test_a_result_for_text_that_changed_meanwhile_is_not_stored(acme, conninfo, db):
    m = put(acme, "version one of the text")
    with conninfo.connect(user="pgrecall_acme_worker") as app:
        job = app.execute("select * from acme.claim_embedding_jobs('w', 10)").fetchone()
        acme.correct(m, "version two of the text", revision=1)
        vec = to_literal(get_embedder().embed([job[2]])[0])
        stored = app.execute("select acme.complete_embedding_jobs('w', %s, %s, %s, %s, %s)",
                             ([m], [job[1]], [vec], job[3], job[4])).fetchone()[0]
    assert stored == 0
    assert db.execute("select count(*) from acme.embedding_job where memory_id = %s", (m,)).fetchone()[0] == 1


def killed_mid_batch_then_resumed(db, conninfo, queue: str, batch: int, stored) -> str:
    """Start a CLI worker, SIGKILL it once it holds a whole batch of the queue's jobs, and return what a second
    worker (--once) printed. In between: nothing was stored (stored() is 0), the jobs are still leased for most
    of an hour, and within seconds they are claimable again, because the killed worker's session is gone."""
    # an hour's lease: so that nothing but the end of the killed worker's session frees its jobs
    db.execute("select pgrecall.set_tenant_setting('acme', 'embedding_lease_seconds', '3600')")
    jobs = {"embedding": "acme.embedding_job", "passage_embedding": "acme.passage_embedding_job"}[queue]
    env = {**os.environ, "PGRECALL_DSN": conninfo.dsn(user="pgrecall_acme_worker")}
    proc = subprocess.Popen([sys.executable, "-m", "pgrecall.cli", "worker", "--tenant", "acme", "--batch-size",
                             str(batch)], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)

    def leased():
        assert proc.poll() is None, proc.stderr.read()
        return db.execute(f"select count(*) from {jobs} where lease_until > now()").fetchone()[0]

    try:
        assert wait_until(leased, timeout=120, what="the worker's first claim") == batch, "it should hold the batch"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert stored() == 0  # killed before storing
    assert db.execute(f"select count(*) from {jobs} where lease_until > now() + interval '3000 seconds'"
                      ).fetchone()[0] == batch
    assert seconds_until(lambda: claimable(db, queue) == batch) < 5
    done = subprocess.run([sys.executable, "-m", "pgrecall.cli", "worker", "--tenant", "acme", "--once"], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow
def test_a_worker_killed_mid_batch_loses_nothing_and_its_jobs_come_back_at_once(acme, conninfo, db):
    texts = [f"memory number {i}: " + " ".join(f"word{(i * 7 + j) % 97}" for j in range(60)) for i in range(400)]
    # One observation is the evidence of all 400: its single passage keeps the embedding work on the memories.
    said = acme.append("the memories below were all told here", role="user", actor="ana")
    made = [acme.remember(t, evidence=[said], purposes=["converse"]).memory_id for t in texts]
    stored = lambda: db.execute("select count(*) from acme.memory_embedding").fetchone()[0]
    out = killed_mid_batch_then_resumed(db, conninfo, "embedding", batch=400, stored=stored)
    assert "embedded 400 memories" in out
    rows = db.execute("select memory_id, count(*) from acme.memory_embedding group by 1").fetchall()
    assert sorted(r[0] for r in rows) == made and all(r[1] == 1 for r in rows)
    assert db.execute("select count(*) from acme.embedding_job").fetchone()[0] == 0


def test_version_change_hides_stale_vectors_until_rebuilt(acme, conninfo, db):
    m = put(acme, "tea ceremony in Kyoto")
    off = acme.append("the ceremony lasted two hours", role="user", actor="ana")
    w = Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker"))
    w.drain()
    assert acme.recall("Japanese tea ceremony").dense_available
    with conninfo.connect(user="pgrecall_acme_admin") as app:
        app.execute("select acme.set_embedding_version('all-MiniLM-L6-v2', 1)")  # from the default, 2
    w.drain()
    with conninfo.connect(user="pgrecall_acme_admin") as app:
        queued = app.execute("select acme.set_embedding_version('all-MiniLM-L6-v2', 2)").fetchone()[0]
    assert queued == 3  # the memory and the passages of both observations
    r = acme.recall("Japanese tea ceremony")
    assert not r.dense_available and r.meta.dense_reason == "no embeddings yet"
    assert r.meta.missing_embeddings == 1 and status(acme).stale == 1
    assert [i.memory_id for i in r.items] == [m]  # lexical still answers
    w.drain()
    r = acme.recall("Japanese tea ceremony")
    assert r.dense_available and status(acme) == EmbeddingStatus(
        queued=0, leased=0, current=1, stale=0, model="all-MiniLM-L6-v2", input_version=2, passages_queued=0,
        passages_current=2, passages_stale=0)
    # version 2 embedded the memory with the turns around its evidence
    text = db.execute("select acme._embedding_input(%s, 2)", (m,)).fetchone()[0]
    assert "tea ceremony in Kyoto" in text and "the ceremony lasted two hours" in text
    assert off == 2


@pytest.mark.slow
def test_cli_rebuild_shows_progress_and_reembeds_everything(acme, conninfo, db):
    for i in range(5):
        put(acme, f"note {i} about gardening")
    # queueing is the admin's, embedding the worker's, the status the app's
    env = {"PGRECALL_ADMIN_DSN": conninfo.dsn(user="pgrecall_acme_admin"),
           "PGRECALL_WORKER_DSN": conninfo.dsn(user="pgrecall_acme_worker"),
           "PGRECALL_APP_DSN": conninfo.dsn(user="pgrecall_acme_app")}
    from test_install_paths import run_cli

    out = run_cli("embeddings", "rebuild", "--tenant", "acme", env=env)
    assert "embedded 5 memories" in out.stdout and "embedding" in out.stderr
    before = db.execute("select max(embedded_at) from acme.memory_embedding").fetchone()[0]
    out = run_cli("embeddings", "rebuild", "--tenant", "acme", "--all", env=env)
    assert "queued 10, embedded 5 memories and 5 passages" in out.stdout  # one passage per observation
    assert db.execute("select min(embedded_at) from acme.memory_embedding").fetchone()[0] > before
    out = run_cli("embeddings", "status", "--tenant", "acme", env=env).stdout
    assert "5 current, 0 stale, 0 queued" in out and "passages: 5 current, 0 stale, 0 queued" in out


def listening_and_idle(db, channel, last_call):
    """A worker or deriver has run LISTEN on channel, and its other connection finished a call of last_call."""
    return db.execute("""
        select exists (select 1 from pg_stat_activity where datname = current_database() and state = 'idle'
                          and query ilike '%%listen%%' || %(channel)s || '%%')
           and exists (select 1 from pg_stat_activity where datname = current_database() and state = 'idle'
                          and query like '%%' || %(call)s || '%%' and pid <> pg_backend_pid())""",
                      {"channel": channel, "call": last_call}).fetchone()[0]


def test_worker_wakes_on_notify(acme, conninfo, db):
    import threading

    w = Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker"))
    stop = threading.Event()
    t = threading.Thread(target=w.run_forever, kwargs={"poll_seconds": 60, "stop": stop.is_set})
    t.start()
    try:
        # Listening, and done with the work that was there: only a NOTIFY can wake it now.
        channel = db.execute("select channel from acme.notification_channel where kind = 'embed'").fetchone()[0]
        wait_until(lambda: listening_and_idle(db, channel, "term_stats"), what="the worker to wait")
        started = time.time()
        m = put(acme, "a memory that should be embedded promptly")
        while time.time() - started < 20:
            if db.execute("select count(*) from acme.memory_embedding where memory_id = %s", (m,)).fetchone()[0]:
                break
            time.sleep(0.05)
        assert time.time() - started < 20, "the NOTIFY did not wake the worker (poll is 60 s)"
    finally:
        stop.set()
        put(acme, "wake it so it can see the stop flag")
        t.join(timeout=30)


def test_switching_versions_back_and_forth_leaves_no_stale_jobs(acme, conninfo, db):
    put(acme, "a memory")
    Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker")).drain()
    with conninfo.connect(user="pgrecall_acme_admin") as app:
        assert app.execute("select acme.set_embedding_version('all-MiniLM-L6-v2', 1)").fetchone()[0] == 2
        app.execute("select acme.set_embedding_version('all-MiniLM-L6-v2', 2)")
    assert status(acme).queued == 0 and status(acme).current == 1
    assert status(acme).passages_queued == 0 and status(acme).passages_current == 1


def test_worker_refuses_to_stamp_a_model_it_does_not_run(acme, conninfo, db):
    from pgrecall import errors

    put(acme, "a memory")
    with conninfo.connect(user="pgrecall_acme_admin") as app:
        app.execute("select acme.set_embedding_version('some-other-model', 2)")
    with pytest.raises(errors.ModelMismatch):
        Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker")).drain()
    assert status(acme).queued == 1 and status(acme).leased == 0
    assert db.execute("select count(*) from acme.memory_embedding where model = 'some-other-model'").fetchone()[0] == 0


def test_a_workers_drains_share_one_session_and_outlive_its_termination(acme, conninfo, db):
    """A worker's drains, one after another (the bench drains after each batch), run in one backend: a new
    session per drain cost its login and every statement's plan again. The server ending that session between
    two drains (a restart, pg_terminate_backend) costs the next drain a new one, not an error; close() ends it."""
    def sessions():
        return [r[0] for r in db.execute("select pid from pg_stat_activity where usename = 'pgrecall_acme_worker'")]

    worker = Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker"))
    put(acme, "the first memory")
    worker.drain()
    first = sessions()
    put(acme, "the second memory")
    worker.drain()
    assert sessions() == first and len(first) == 1
    assert status(acme).current == 2

    assert terminate_sessions(conninfo, "pgrecall_acme_worker") == 1
    wait_until(lambda: not sessions(), what="the worker's backend to end")
    put(acme, "the third memory")
    worker.drain()
    assert status(acme).current == 3 and status(acme).queued == 0
    renewed = sessions()
    assert len(renewed) == 1 and renewed != first
    worker.close()
    wait_until(lambda: not sessions(), what="close() to end the session")
