"""Concurrency with real connections: log offsets, and revision races."""

import threading

import pytest

import pgrecall
from pgrecall import errors

WRITERS, APPENDS = 8, 500


def test_offsets_stay_contiguous_under_concurrent_writers(acme, conninfo, db):
    barrier = threading.Barrier(WRITERS)
    results: dict[int, list[int]] = {}
    failures = []

    def writer(n):
        try:
            with pgrecall.connect(conninfo.dsn(user="pgrecall_acme_app"), tenant="acme", principal="ana",
                                  scopes=["default"]) as mem:
                barrier.wait()
                results[n] = [mem.append(f"writer {n} line {i}", role="user") for i in range(APPENDS)]
        except Exception as exc:  # asserted below
            failures.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    for offsets in results.values():
        assert offsets == sorted(offsets)  # each writer sees its own appends in order
    everything = sorted(o for offsets in results.values() for o in offsets)
    total = WRITERS * APPENDS
    assert everything == list(range(1, total + 1))  # no gaps, no duplicates
    stored = [r[0] for r in db.execute("select log_offset from acme.observation where scope = 'default' order by 1")]
    assert stored == everything
    assert acme.watermark() == total


def test_a_rolled_back_append_leaves_no_gap(acme, conninfo):
    with conninfo.connect(user="pgrecall_acme_app", autocommit=False) as conn:
        mem = pgrecall.connect(tenant="acme", conn=conn, principal="ana", scopes=["default"])
        assert mem.append("first", role="user") == 1
        conn.rollback()
    assert acme.append("second", role="user") == 1
    assert acme.watermark() == 1


def _race(conninfo, first_call, second_call):
    """Run first_call in an open transaction, start second_call (which blocks), then commit the first."""
    outcome = {}
    with conninfo.connect(user="pgrecall_acme_app", autocommit=False) as c1:
        m1 = pgrecall.connect(tenant="acme", conn=c1, principal="bot", scopes=["default"])
        outcome["first"] = first_call(m1)

        def second():
            try:
                with pgrecall.connect(conninfo.dsn(user="pgrecall_acme_app"), tenant="acme", principal="bot",
                                      scopes=["default"]) as m2:
                    outcome["second"] = second_call(m2)
            except Exception as exc:  # asserted by the caller
                outcome["second_error"] = exc

        t = threading.Thread(target=second)
        t.start()
        t.join(timeout=1.0)
        assert t.is_alive(), "the second writer should wait for the first one's row lock"
        c1.commit()
        t.join(timeout=30)
    return outcome


@pytest.fixture
def memory_id(acme):
    off = acme.append("I live in Lisbon", role="user", actor="ana")
    return acme.remember("Ana lives in Lisbon", evidence=[off], purposes=["converse"]).memory_id


def test_two_corrections_racing_exactly_one_wins(acme, conninfo, db, memory_id):
    outcome = _race(conninfo,
                    lambda m: m.correct(memory_id, "Ana lives in Lisbon, Portugal", revision=1),
                    lambda m: m.correct(memory_id, "Ana lives in Lisboa", revision=1))
    assert outcome["first"] == 2
    assert isinstance(outcome.get("second_error"), errors.RevisionConflict)
    rec = acme.read(memory_id, purpose="converse")
    assert rec.body == "Ana lives in Lisbon, Portugal" and rec.revision == 2
    assert [h.body for h in rec.revisions] == ["Ana lives in Lisbon"]


def test_supersede_racing_a_correction_writes_nothing_for_the_loser(acme, conninfo, db, memory_id):
    moved = acme.append("I moved to Porto", role="user", actor="ana")
    memories_before = db.execute("select count(*) from acme.memory").fetchone()[0]
    outcome = _race(conninfo,
                    lambda m: m.correct(memory_id, "Ana lives in Lisbon (Alfama)", revision=1),
                    lambda m: m.supersede(memory_id, "Ana lives in Porto", revision=1, evidence=[moved]))
    assert isinstance(outcome.get("second_error"), errors.RevisionConflict)
    assert db.execute("select count(*) from acme.memory").fetchone()[0] == memories_before
    assert db.execute("select superseded_by from acme.memory where id = %s", (memory_id,)).fetchone()[0] is None
