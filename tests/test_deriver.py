"""The deriver loop and representations: first-person claims become memories of the right perspective,
a crash mid-task loses nothing, erasure reaches queued work and working representations, chat gathers."""

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import wait_until
from pgrecall import errors
from pgrecall.deriver import Deriver, first_person
from pgrecall.driver import QueueStatus


def setting(db, key, value):
    db.execute("select pgrecall.set_tenant_setting('acme', %s, %s)", (key, value))


def worker_dsn(conninfo):
    return conninfo.dsn(user="pgrecall_acme_worker")


def chat_session(acme):
    s = acme.create_session("chat")
    acme.add_session_peers(s, ["ana", {"peer": "ben", "observe_others": True}])
    acme.add_messages(s, [
        {"actor": "ana", "body": "Hi! I live in Lisbon."},
        {"actor": "ben", "body": "My name is Ben, nice to meet you"},
        {"actor": "ana", "body": "I work at Acme Corp, on the night shift."},
        {"actor": "ana", "body": "What a day. I live in a small flat, do you?"},
        {"actor": "ana", "body": "Did I say I live in Lisbon? I live in Lisbon."},
    ])
    return s


def bodies(rows, item="memory"):
    return sorted(r.body for r in rows if r.item == item)


def test_the_first_person_extractor_takes_only_explicit_statements():
    msgs = [{"offset": 1, "actor": "ana", "body": "Olá! My name is Ana Sousa and I work at São João, nights."},
            {"offset": 2, "actor": "ana", "body": "I live in a flat. Do I live in Porto? I don't live in Faro."},
            {"offset": 3, "actor": "ana", "body": "we live in Lisbon"}]
    claims = first_person(msgs)
    assert [(c.statement, c.quote) for c in claims] == [
        ("ana's name is Ana Sousa", "My name is Ana Sousa"), ("ana works at São João", "I work at São João")]
    body = msgs[0]["body"].encode()
    assert [body[c.start:c.end].decode() for c in claims] == [c.quote for c in claims]


def test_derived_memories_carry_the_perspective_and_pass_eligibility(acme, db, conninfo):
    s = chat_session(acme)
    with Deriver("acme", conninfo=worker_dsn(conninfo)) as d:
        stats = d.drain()
    assert (stats.completed, stats.failed) == (5 + 4, 0)  # 5 global tasks, ben's view of ana's 4 messages
    assert stats.memories == 5  # ana: 2 global + 2 in ben's view; ben: 1 global; the repeat is a no-op
    assert bodies(acme.representation("ana", principal="ana")) == ["ana lives in Lisbon", "ana works at Acme Corp"]
    assert bodies(acme.representation("ben", principal="ben")) == ["ben's name is Ben"]
    local = acme.representation("ana", observer="ben", principal="ben")
    assert bodies(local) == ["ana lives in Lisbon", "ana works at Acme Corp"]
    assert all(r.observer == "ben" for r in local)
    assert sorted(r.evidence for r in local if r.item == "memory") == [[1], [3]]
    # the same claims as facts, with their quotes checked against the bytes; the repeat confirmed one
    assert bodies(acme.representation("ana", principal="ana"), "fact") == ["ana lives in Lisbon", "ana works at Acme Corp"]
    assert sorted((r.kind, r.evidence) for r in local if r.item == "fact") == [
        ("lives_in", [1, 5]), ("works_at", [3])]
    assert [(r.kind, r.body) for r in acme.representation("ben", principal="ben") if r.item == "fact"] == [
        ("has_name", "ben's name is Ben")]
    quotes = db.execute("select x.quote, x.byte_start, x.byte_end from acme.fact_evidence x join acme.fact f "
                        "on f.id = x.fact_id where f.predicate = 'works_at' and f.observer_peer_id is null").fetchall()
    assert quotes == [("I work at Acme Corp", 0, 19)]
    # ben's view is ben's: others do not see it, and ana formed no view of ben
    assert acme.representation("ana", observer="ben", principal="bot") == []
    # what ana said in a session of ana and ben is theirs: her global view is hers (#27), not the bot's,
    # which was not there; ben sees his own view of her
    assert acme.representation("ana", principal="bot") == []
    assert acme.representation("ben", observer="ana", principal="ana") == []
    # purposes are checked too
    assert acme.representation("ana", purpose="act", principal="ana") == []
    assert acme.queue_status("ana") == QueueStatus("current", remaining=0, in_progress=0, done=4, dead=0)
    assert acme.queue_status("ben", "ana").done == 4
    # every memory the representation returns is one the eligibility rule returns
    rows = acme.representation("ana", observer="ben", principal="ben")
    eligible = {r[0] for r in db.execute(
        "select m.id from acme._eligible_memories((select id from acme.peer where name = 'ben'), "
        "array['default'], 'converse', false, null) m")}
    assert {r.id for r in rows if r.item == "memory"} <= eligible
    eligible = {r[0] for r in db.execute(
        "select f.id from acme._eligible_facts((select id from acme.peer where name = 'ben'), "
        "array['default'], 'converse', now(), null) f")}
    assert {r.id for r in rows if r.item == "fact"} <= eligible
    # the working representations, as ben reads his (the bot, not in the session, reads none of it: #27)
    assert acme.get_representation(s, "ben").representation == {}
    ben_doc = acme.get_representation(s, "ben", principal="ben").representation
    assert [i.text for i in ben_doc["ana"]] == ["ana lives in Lisbon", "ana works at Acme Corp",
                                                   "ana lives in Lisbon"]
    assert ben_doc["ana"][2].memory_id is None  # the repeat wrote no memory, and confirmed the fact
    assert ben_doc["ana"][2].fact_id == ben_doc["ana"][0].fact_id
    assert acme.get_representation(s, "ana", "ana", principal="ana").representation["ana"][0].offset == 1
    assert acme.get_representation(s, "ben", "bot").representation == {"bot": []}
    with pytest.raises(errors.NotInSession):
        acme.get_representation(s, "bot")
    # the session-start bundle carries the principal's own working representation of the session
    bundle = acme.session_bundle(principal="ben", session=s)
    assert bundle.working_representation.representation == \
        acme.get_representation(s, "ben", principal="ben").representation
    assert acme.session_bundle(principal="ben").working_representation is None
    with pytest.raises(errors.NotInSession):
        acme.session_bundle(principal="bot", session=s)


def test_a_deriver_that_crashes_mid_task_loses_nothing(acme, db, conninfo, tmp_path):
    setting(db, "task_lease_seconds", "1")
    s = acme.create_session("crash")
    acme.add_session_peers(s, ["ana"])
    acme.add_messages(s, [{"actor": "ana", "body": "I live in Lisbon"}, {"actor": "ana", "body": "My name is Ana"},
                          {"actor": "ana", "body": "I work at Acme"}])
    script = tmp_path / "crash.py"
    script.write_text(textwrap.dedent("""
        import os, sys
        from pgrecall.deriver import Deriver
        from pgrecall.driver import Memory

        complete = Memory.complete_task
        calls = []

        def dying_complete(self, task, result, **kw):
            calls.append(task.task_id)
            if len(calls) == 2:
                os._exit(9)  # the memory of this task is written, not committed, and the process dies
            return complete(self, task, result, **kw)

        Memory.complete_task = dying_complete
        Deriver("acme", conninfo=sys.argv[1], batch=1).drain()
    """))
    src = str(Path(__file__).resolve().parents[1] / "python")
    proc = subprocess.run([sys.executable, str(script), worker_dsn(conninfo)], env={"PYTHONPATH": src},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 9, proc.stderr
    status = db.execute("select message_offset, status from acme.work_task order by message_offset").fetchall()
    assert status == [(1, "done"), (2, "leased"), (3, "pending")]
    assert bodies(acme.representation("ana", principal="ana")) == ["ana lives in Lisbon"]  # the second write died with it
    wait_until(lambda: db.execute("select bool_and(lease_until < clock_timestamp()) from acme.work_task "
                                  "where status = 'leased'").fetchone()[0],
               timeout=10, what="the dead deriver's lease to run out")
    with Deriver("acme", conninfo=worker_dsn(conninfo)) as d:
        stats = d.drain()
    assert (stats.completed, stats.failed) == (2, 0)
    assert bodies(acme.representation("ana", principal="ana")) == ["ana lives in Lisbon", "ana works at Acme", "ana's name is Ana"]
    assert db.execute("select count(*) from acme.memory").fetchone()[0] == 3
    assert bodies(acme.representation("ana", principal="ana"), "fact") == ["ana lives in Lisbon", "ana works at Acme",
                                                           "ana's name is Ana"]
    assert db.execute("select count(*) from acme.fact").fetchone()[0] == 3
    assert db.execute("select array_agg(attempts order by message_offset) from acme.work_task").fetchone()[0] == \
        [1, 2, 1]


def test_an_extractor_that_raises_gives_the_task_back(acme, db, conninfo):
    setting(db, "task_backoff_seconds", "0")
    s = acme.create_session("flaky")
    acme.add_session_peers(s, ["ana"])
    acme.add_messages(s, [{"actor": "ana", "body": "I live in Lisbon"}])
    calls = []

    def flaky(messages):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("model overloaded")
        return first_person(messages)

    with Deriver("acme", conninfo=worker_dsn(conninfo), extract=flaky) as d:
        first = d.run_once()
        assert (first.failed, first.completed) == (1, 0) and "model overloaded" in first.errors[0]
        assert db.execute("select status, attempts, last_error from acme.work_task").fetchone() == \
            ("pending", 1, "RuntimeError: model overloaded")
        assert d.drain().completed == 1
    assert bodies(acme.representation("ana", principal="ana")) == ["ana lives in Lisbon"]


def test_summaries_every_n_messages(acme, db, conninfo):
    setting(db, "summary_every_messages", "2")
    s = acme.create_session("summaries")
    acme.add_session_peers(s, ["ana", "bot"])
    acme.add_messages(s, [{"actor": "ana", "body": "hello"}, {"actor": "bot", "body": "hi"},
                          {"actor": "ana", "body": "bye"}])
    with Deriver("acme", conninfo=worker_dsn(conninfo), task_types=["summary"],
                 summarize=lambda ms: " / ".join(m["body"] for m in ms)) as d:
        assert d.drain().completed == 1
    row = db.execute("select m.body, m.kind, array_agg(o.log_offset order by o.log_offset) from acme.memory m "
                     "join acme.memory_link l on l.memory_id = m.id join acme.observation o on o.id = l.target_observation_id "
                     "group by m.id").fetchall()
    assert row == [("hello / hi", "summary", [1, 2])]
    assert acme.work_queue_status()["representation"] == {"pending": 3}


def test_erasure_reaches_queued_work_and_working_representations(acme, db, conninfo, acme_admin):
    s = chat_session(acme)
    with Deriver("acme", conninfo=worker_dsn(conninfo)) as d:
        d.drain()
    acme.add_messages(s, [{"actor": "ana", "body": "I work at Initech"}])  # queued, not derived
    receipt = acme_admin.erase({"observation": {"scope": "default", "offset": 1}}, reason="test", actor="dpo")
    assert set(receipt.residual.values()) == {0}
    assert receipt.rows_erased["work_task"] == 2 and receipt.rows_erased["working_representation"] == 2
    assert bodies(acme.representation("ana", principal="ana")) == ["ana works at Acme Corp"]
    assert bodies(acme.representation("ana", principal="ana"), "fact") == ["ana works at Acme Corp"]  # Lisbon cited offset 1
    ben_doc = acme.get_representation(s, "ben", principal="ben").representation
    assert 1 not in [i.offset for i in ben_doc["ana"]] and len(ben_doc["ana"]) == 2
    assert ben_doc["ana"][1].fact_id is None  # the item of offset 5 survives; the fact it confirmed is gone
    # the observer goes: its view, its queued work and its working document (the peer row stays, renamed)
    ben = db.execute("select id from acme.peer where name = 'ben'").fetchone()[0]
    receipt = acme_admin.erase({"peer": "ben"}, reason="test", actor="dpo")
    assert set(receipt.residual.values()) == {0}
    assert db.execute("select count(*) from acme.memory m join acme.peer p on p.id = m.observer_peer_id").fetchone()[0] == 0
    assert db.execute("select count(*) from acme.fact where observer_peer_id is not null").fetchone()[0] == 0
    assert db.execute("select count(*) from acme.work_task where observer_id is not null").fetchone()[0] == 0
    assert db.execute("select working_representation from acme.session_peer where peer_id = %s",
                      (ben,)).fetchone()[0] == {}
    # the subject of a message goes with it, queued or not
    acme_admin.erase({"peer": "ana"}, reason="test", actor="dpo")
    assert db.execute("select count(*) from acme.work_task").fetchone()[0] == 0
    assert db.execute("select count(*) from acme.session_peer where working_representation <> '{}'").fetchone()[0] == 0


def test_chat_gathers_the_representation_and_recall_evidence(acme, conninfo):
    s = chat_session(acme)
    with Deriver("acme", conninfo=worker_dsn(conninfo)) as d:
        d.drain()
    c = acme.chat("ben", "ana", "Where does ana live?", session=s)
    assert c.answer is None and c.observer == "ben"
    assert bodies(c.representation) == ["ana lives in Lisbon", "ana works at Acme Corp"]
    assert c.evidence and c.evidence[0].body == "ana lives in Lisbon"
    assert [i.text for i in c.working.representation["ana"]][0] == "ana lives in Lisbon"
    assert "Question: Where does ana live?" in c.prompt and "- ana lives in Lisbon" in c.prompt
    prompts = []
    answered = acme.chat("ben", "ana", "Where does ana live?", llm=lambda p: prompts.append(p) or "In Lisbon.")
    assert answered.answer == "In Lisbon." and prompts == [answered.prompt]
    # a principal who may not see ben's view gets only what it may see
    bot = acme.chat(None, "ana", "Where does ana live?", principal="bot")
    assert all(r.observer is None for r in bot.representation)
    assert {e.memory_id for e in bot.evidence}.isdisjoint(r.id for r in c.representation if r.item == "memory")


def test_a_waiting_deriver_is_woken_by_new_messages(acme, conninfo, db):
    import threading

    s = acme.create_session("wake")
    acme.add_session_peers(s, ["ana"])
    stop = threading.Event()
    d = Deriver("acme", conninfo=worker_dsn(conninfo))
    t = threading.Thread(target=d.run_forever, kwargs={"poll_seconds": 60, "stop": stop.is_set})
    t.start()
    try:
        # Listening, and its first look at the queue found nothing: only the notification can wake it
        # within the minute.
        channel = db.execute("select channel from acme.notification_channel where kind = 'derive'").fetchone()[0]
        wait_until(lambda: db.execute("""
            select exists (select 1 from pg_stat_activity where datname = current_database() and state = 'idle'
                              and query ilike '%%listen%%' || %s || '%%')
               and exists (select 1 from pg_stat_activity where datname = current_database() and state = 'idle'
                              and query like '%%claim_tasks%%')""", (channel,)).fetchone()[0],
                   what="the deriver to wait")
        acme.add_messages(s, [{"actor": "ana", "body": "I work at Acme"}])
        deadline = time.time() + 10
        while acme.queue_status("ana").status != "current" and time.time() < deadline:
            time.sleep(0.05)
        assert acme.queue_status("ana").done == 1
    finally:
        stop.set()
        acme.add_messages(s, [{"actor": "ana", "body": "bye"}])  # wakes it to see the stop
        t.join(timeout=10)
        d.close()
    assert not t.is_alive()


def test_cli_deriver_once(acme, conninfo):
    from test_install_paths import run_cli

    s = acme.create_session("cli")
    acme.add_session_peers(s, ["ana"])
    acme.add_messages(s, [{"actor": "ana", "body": "I live in Lisbon"}, {"actor": "ana", "body": "hello"}])
    out = run_cli("deriver", "--tenant", "acme", "--once", env={"PGRECALL_DSN": conninfo.dsn()}).stdout
    assert "2 tasks completed, 1 memories written, 0 failed" in out
