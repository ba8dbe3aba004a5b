"""The derivation work queue: lane order under concurrent workers, leases, retries, dead letters, status."""

import random
import threading
import time

import pytest

import pgrecall
from conftest import run_together, table_counts, wait_until
from pgrecall import errors
from pgrecall.driver import QueueStatus, WorkingItem


def setting(db, key, value):
    db.execute("select pgrecall.set_tenant_setting('acme', %s, %s)", (key, value))


def session_with(acme, name, peers):
    s = acme.create_session(name)
    acme.add_session_peers(s, peers)
    return s


def test_lanes_keep_message_order_with_four_concurrent_workers(acme, db, conninfo):
    setting(db, "summary_every_messages", "5")
    sessions = []
    for i in range(2):
        s = session_with(acme, f"s{i}", [{"peer": "ana", "observe_others": True}, {"peer": "ben", "observe_others": True},
                                         "bot"])
        sessions.append(s)
    # interleaved messages of three senders in three sessions: lanes are global and local representations
    # and the summaries
    for n in range(24):
        for s in sessions:
            actor = ("ana", "ben", "bot")[n % 3]
            acme.add_messages(s, [{"actor": actor, "body": f"message {n} of {s}"}])
    total = db.execute("select count(*) from acme.work_task").fetchone()[0]
    lanes = db.execute("select count(distinct (session_id, task_type, sender_id, observer_id)) from acme.work_task"
                       ).fetchone()[0]
    assert total == 2 * (24 + 32 + 4) and lanes == 2 * (3 + 4 + 1)

    clock = iter(range(10**9))
    lock = threading.Lock()
    spans = []  # (lane, offset, start tick, end tick)
    in_flight, most_in_flight = set(), [0]
    barrier = threading.Barrier(4)

    def worker(name):
        with pgrecall.connect(conninfo.dsn(user="pgrecall_acme_worker"), tenant="acme") as mem:
            barrier.wait()
            idle = 0
            while idle < 3:
                claimed = mem.claim_tasks(name, limit=4)
                if not claimed:
                    idle += 1
                    time.sleep(0.02)
                    continue
                idle = 0
                random.shuffle(claimed)  # tasks of one claim are of different lanes: any order is fine
                for task in claimed:
                    lane = (task.session_id, task.task_type, task.sender, task.observer)
                    with lock:
                        start = next(clock)
                        in_flight.add(task.task_id)
                        most_in_flight[0] = max(most_in_flight[0], len(in_flight))
                    time.sleep(random.uniform(0, 0.004))
                    with lock:
                        end = next(clock)
                        in_flight.discard(task.task_id)
                        spans.append((lane, task.message_offset, start, end))
                    mem.complete_task(task, {"observations": []}, worker=name)

    run_together(worker, [f"w{i}" for i in range(4)], barrier)
    assert len(spans) == total and len({(s[0], s[1]) for s in spans}) == total  # each task exactly once
    by_lane = {}
    for lane, offset, start, end in sorted(spans, key=lambda s: s[2]):
        by_lane.setdefault(lane, []).append((offset, start, end))
    for lane, runs in by_lane.items():
        offsets = [r[0] for r in runs]
        assert offsets == sorted(offsets), lane  # processed in message order
        for (_, _, end), (_, start, _) in zip(runs, runs[1:]):
            assert start > end, lane  # never two of one lane at once
    assert most_in_flight[0] > 1  # different lanes did run in parallel
    assert db.execute("select count(*) from acme.work_task where status <> 'done'").fetchone()[0] == 0


def test_one_claim_takes_only_the_head_of_each_lane(acme, db, acme_worker):
    s = session_with(acme, "heads", ["ana", {"peer": "ben", "observe_others": True}])
    acme.add_messages(s, [{"actor": "ana", "body": f"m{i}"} for i in range(3)])
    claimed = acme_worker.claim_tasks("w", limit=100)
    assert sorted((t.observer or "", t.message_offset) for t in claimed) == [("", 1), ("ben", 1)]
    assert acme_worker.claim_tasks("w", limit=100) == []  # both lanes busy
    assert claimed[0].messages[0]["body"] == "m0" and claimed[0].messages[0]["actor"] == "ana"


def lease_ran_out(db, task_id):
    wait_until(lambda: db.execute("select lease_until < clock_timestamp() from acme.work_task where id = %s",
                                  (task_id,)).fetchone()[0], timeout=10, what=f"task {task_id}'s lease to run out")


def test_an_expired_lease_returns_the_task(acme, db, acme_worker):
    setting(db, "task_lease_seconds", "0.5")
    s = session_with(acme, "lease", ["ana"])
    acme.add_messages(s, [{"actor": "ana", "body": "first"}, {"actor": "ana", "body": "second"}])
    [a] = acme_worker.claim_tasks("a")
    assert acme_worker.claim_tasks("b") == []  # leased, and the second waits behind it
    lease_ran_out(db, a.task_id)
    [b] = acme_worker.claim_tasks("b")
    assert (b.task_id, b.attempts) == (a.task_id, 2) and b.lease_token != a.lease_token
    with pytest.raises(errors.LeaseLost) as info:
        acme_worker.complete_task(a, {"observations": []})
    assert "leased again" in str(info.value)
    assert acme_worker.complete_task(b, {"observations": []}) == "done"
    [c] = acme_worker.claim_tasks("a")
    assert c.message_offset == 2
    with pytest.raises(errors.LeaseLost):
        acme_worker.complete_task(b, {"observations": []})  # already done


def test_failures_retry_with_backoff_then_dead_letter(acme, db, acme_worker):
    setting(db, "task_backoff_seconds", "30")
    setting(db, "task_max_attempts", "2")
    s = session_with(acme, "retry", ["ana"])
    acme.add_messages(s, [{"actor": "ana", "body": "poison"}, {"actor": "ana", "body": "fine"}])
    [t] = acme_worker.claim_tasks("w")
    r = acme_worker.fail_task(t, "model timed out")
    assert (r.status, r.attempts) == ("pending", 1)
    wait = db.execute("select extract(epoch from available_at - clock_timestamp()) from acme.work_task where id = %s",
                      (t.task_id,)).fetchone()[0]
    assert 25 < wait <= 30
    assert acme_worker.claim_tasks("w") == []  # waiting for the retry, and the lane waits with it
    db.execute("update acme.work_task set available_at = now() where id = %s", (t.task_id,))
    [t2] = acme_worker.claim_tasks("w")
    assert (t2.task_id, t2.attempts) == (t.task_id, 2)
    assert acme_worker.fail_task(t2, "model timed out again").status == "dead"
    assert db.execute("select last_error from acme.work_task where id = %s", (t.task_id,)).fetchone()[0] == \
        "model timed out again"
    # a dead letter does not block its lane: the next message is processed
    [t3] = acme_worker.claim_tasks("w")
    assert t3.message_offset == 2
    assert acme.queue_status("ana") == QueueStatus("pending", remaining=1, in_progress=1, done=0, dead=1)


def test_a_lease_that_expires_on_the_last_attempt_is_dead_lettered(acme, db, acme_worker):
    setting(db, "task_lease_seconds", "0.2")
    setting(db, "task_max_attempts", "1")
    s = session_with(acme, "crashy", ["ana"])
    acme.add_messages(s, [{"actor": "ana", "body": "x"}])
    [t] = acme_worker.claim_tasks("w")
    lease_ran_out(db, t.task_id)
    assert acme_worker.claim_tasks("w") == []
    assert db.execute("select status, last_error from acme.work_task where id = %s", (t.task_id,)).fetchone() == \
        ("dead", "lease expired on attempt 1")


def test_status_counts_are_exact(acme, db, acme_worker):
    s = session_with(acme, "status", [{"peer": "ana", "observe_others": True}, {"peer": "ben", "observe_others": True}])
    acme.add_messages(s, [{"actor": "ben", "body": f"b{i}"} for i in range(4)])
    acme.add_messages(s, [{"actor": "ana", "body": f"a{i}"} for i in range(3)])
    assert acme.queue_status("ben") == QueueStatus("pending", remaining=4, in_progress=0, done=0, dead=0)
    assert acme.queue_status("ana", "ben") == QueueStatus("pending", remaining=4, in_progress=0, done=0, dead=0)
    assert acme.queue_status("ben", "ana").remaining == 3
    assert acme.queue_status("bot").status == "current"  # nothing queued for bot
    done = 0
    while True:
        claimed = [t for t in acme_worker.claim_tasks("w", limit=10) if t.sender == "ben" and t.observer is None]
        if not claimed:
            break
        acme_worker.complete_task(claimed[0], {"observations": []})
        done += 1
        assert acme.queue_status("ben") == QueueStatus("pending" if done < 4 else "current", remaining=4 - done,
                                                       in_progress=0, done=done, dead=0)
        # the other lanes' heads were claimed too: give them back untouched
        db.execute("update acme.work_task set status = 'pending', lease_token = null, lease_until = null "
                   "where status = 'leased'")
    assert acme.queue_status("ben", session=s).status == "current"
    assert acme.queue_status("ben", session=s + 1).done == 0
    # the last claim leased the heads of the three other lanes
    assert acme.work_queue_status() == {"representation": {"done": 4, "leased": 3, "pending": 7}}
    assert acme.queue_status("ana", "ben") == QueueStatus("pending", remaining=4, in_progress=1, done=0, dead=0)


def test_complete_checks_the_result_and_changes_nothing_when_refused(acme, db, acme_worker):
    s = session_with(acme, "checks", ["ana"])
    [m1, m2] = acme.add_messages(s, [{"actor": "ana", "body": "I live in Lisbon"}, {"actor": "ana", "body": "I am"}])
    # the session is ana's alone: what cites its turns is hers (#27)
    hers = {"principal": "ana", "audience": "ana"}
    other = acme.remember("unrelated", evidence=[m2.offset], purposes=["converse"], **hers).memory_id
    [t] = acme_worker.claim_tasks("w")
    before = table_counts(db)
    for bad in ([], {"observations": "x"}, {"observations": [{"text": ""}]}, {"observations": [{"memory_id": 1}]},
                {"observations": [{"text": "ana lives in Lisbon", "memory_id": other}]}):
        with pytest.raises(errors.InvalidArgument):
            acme_worker.complete_task(t, bad)
    assert table_counts(db) == before
    with pytest.raises(errors.UnknownTask):
        acme_worker.complete_task(pgrecall.driver.Task(**{**t.__dict__, "task_id": 10**9}), {})
    with pytest.raises(errors.InvalidArgument):
        acme_worker.claim_tasks("w", task_types=["embedding"])
    mine = acme.remember("ana lives in Lisbon", evidence=[m1.offset], purposes=["converse"], about=["ana"],
                         **hers).memory_id
    assert acme_worker.complete_task(t, {"observations": [{"text": "ana lives in Lisbon", "memory_id": mine}]}) == "done"
    assert acme.get_representation(s, "ana").representation == {}  # the bot was not there
    doc = acme.get_representation(s, "ana", principal="ana")
    [item] = doc.representation["ana"]
    assert doc.representation == {"ana": [WorkingItem(text="ana lives in Lisbon", memory_id=mine, offset=1,
                                                      observation_id=item.observation_id, at=item.at)]}
