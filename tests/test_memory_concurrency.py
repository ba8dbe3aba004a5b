"""Concurrency with real connections: log offsets, and revision races."""

import threading

import pytest

import pgrecall
from conftest import run_together
from pgrecall import errors

WRITERS, APPENDS = 8, 500


@pytest.mark.slow
def test_offsets_stay_contiguous_under_concurrent_writers(acme, conninfo, db):
    barrier = threading.Barrier(WRITERS)
    results: dict[int, list[int]] = {}

    def writer(n):
        with pgrecall.connect(conninfo.dsn(user="pgrecall_acme_app"), tenant="acme", principal="ana",
                              scopes=["default"]) as mem:
            barrier.wait()
            results[n] = [mem.append(f"writer {n} line {i}", role="user") for i in range(APPENDS)]

    run_together(writer, range(WRITERS), barrier)
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


def _race(conninfo, first_call, second_call, first_role="app", second_role="app"):
    """Run first_call in an open transaction, start second_call (which blocks), then commit the first.

    Each side logs in as the role of its duty (erasure is the admin's)."""
    outcome = {}
    with conninfo.connect(user=f"pgrecall_acme_{first_role}", autocommit=False) as c1:
        m1 = pgrecall.connect(tenant="acme", conn=c1, principal="bot", scopes=["default"])
        outcome["first"] = first_call(m1)

        def second():
            try:
                with pgrecall.connect(conninfo.dsn(user=f"pgrecall_acme_{second_role}"), tenant="acme",
                                      principal="bot", scopes=["default"]) as m2:
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


def test_an_erasure_waits_for_a_correction_citing_the_erased_words_and_undoes_it(acme, db, conninfo, memory_id):
    fix = acme.append("I live in Lisbon, in Alfama", role="user", actor="ana", data_subject_id="s-fix")
    outcome = _race(conninfo,
                    lambda m: m.correct(memory_id, "Ana lives in Alfama, Lisbon", revision=1, evidence=[fix]),
                    lambda m: m.erase({"data_subject": "s-fix"}, reason="asked", actor="dpo"), second_role="admin")
    assert "second_error" not in outcome, outcome
    assert set(outcome["second"].residual.values()) == {0}
    assert outcome["second"].rows_erased["memories_reverted"] == 1
    assert acme.read(memory_id, purpose="converse").body == "Ana lives in Lisbon"


def test_a_correction_citing_words_being_erased_waits_and_finds_them_gone(acme, db, conninfo, memory_id):
    fix = acme.append("I live in Lisbon, in Alfama", role="user", actor="ana", data_subject_id="s-fix")
    outcome = _race(conninfo,
                    lambda m: m.erase({"data_subject": "s-fix"}, reason="asked", actor="dpo"),
                    lambda m: m.correct(memory_id, "Ana lives in Alfama, Lisbon", revision=1, evidence=[fix]),
                    first_role="admin")
    assert isinstance(outcome.get("second_error"), errors.ObservationNotFound), outcome
    rec = acme.read(memory_id, purpose="converse")
    assert (rec.body, rec.revision) == ("Ana lives in Lisbon", 1)
