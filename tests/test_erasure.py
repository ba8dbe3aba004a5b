"""Erasure with a receipt: everything derived goes, the residual is zero, others are untouched."""

from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgrecall import errors
from pgrecall.deriver import Deriver
from pgrecall.worker import Worker


def tables(db, tenant="acme"):
    return [r[0] for r in db.execute("select tablename from pg_tables where schemaname = %s order by 1", (tenant,))]


def rows_mentioning(db, token, tenant="acme"):
    """Every row of every table whose text contains the token (history, queue and statistics included)."""
    found = {}
    for t in tables(db, tenant):
        n = db.execute(f"select count(*) from {tenant}.{t} x where lower(x::text) like %s", (f"%{token}%",)).fetchone()[0]
        if n:
            found[t] = n
    return found


def said(mem, text, subject, actor="ana"):
    return mem.append(text, role="user", actor=actor, data_subject_id=subject)


def test_erasing_a_subject_removes_everything_derived(acme, db, conninfo, acme_admin):
    a1 = said(acme, "I am zqalpha and I like sailing", "subj-a")
    b1 = said(acme, "I am zqbravo and I like chess", "subj-b")
    ma = acme.remember("zqalpha likes sailing", evidence=[a1], purposes=["converse"], about=["zqalpha"]).memory_id
    mb = acme.remember("zqbravo likes chess", evidence=[b1], purposes=["converse"], about=["zqbravo"]).memory_id
    both = acme.derive([ma, mb], "zqalpha and zqbravo like games")
    acme.correct(ma, "zqalpha likes sailing boats", revision=1)
    Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker")).drain()
    assert rows_mentioning(db, "zqalpha")

    receipt = acme_admin.erase({"data_subject": "subj-a"}, reason="request #1", actor="dpo")
    assert receipt.completed_at and receipt.observations_erased == 1
    assert set(receipt.residual.values()) == {0}
    assert receipt.rows_erased["memory"] == 2  # ma and the memory derived from it
    assert rows_mentioning(db, "zqalpha") == {}
    with pytest.raises(errors.MemoryNotFound):
        acme.read(both, purpose="converse")
    assert acme.read(mb, purpose="converse").body == "zqbravo likes chess"
    assert [i.memory_id for i in acme.recall("chess", mode="lexical").items] == [mb]
    stored = db.execute("select selector, reason, residual is not null from acme.erasure_request").fetchall()
    assert stored == [({"data_subject": "subj-a"}, "request #1", True)]


def test_erasing_the_evidence_of_a_supersession_restores_the_old_memory(acme, db, acme_admin):
    o1 = said(acme, "I live in Lisbon", "s1")
    old = acme.remember("Ana lives in Lisbon", evidence=[o1], purposes=["converse"]).memory_id
    o2 = said(acme, "I moved to zqporto", "s2")
    new = acme.supersede(old, "Ana lives in zqporto", revision=1, evidence=[o2])
    receipt = acme_admin.erase({"observation": {"scope": "default", "offset": o2}}, reason="wrongly recorded", actor="dpo")
    assert set(receipt.residual.values()) == {0}
    rec = acme.read(old, purpose="converse")
    assert rec.superseded_by is None and rec.valid.upper is None
    with pytest.raises(errors.MemoryNotFound):
        acme.read(new, purpose="converse", include_superseded=True)


def test_an_entity_stays_while_surviving_memories_name_it(acme, db, acme_admin):
    o1, o2 = said(acme, "Rita is my sister", "s1"), said(acme, "Rita lives in Porto", "s2")
    acme.remember("Ana's sister is Rita", evidence=[o1], purposes=["converse"], about=["Rita"])
    keep = acme.remember("Rita lives in Porto", evidence=[o2], purposes=["converse"], about=["Rita"]).memory_id
    acme_admin.erase({"data_subject": "s1"}, reason="asked", actor="dpo")
    assert db.execute("select count(*) from acme.entity where name = 'Rita'").fetchone()[0] == 1
    acme_admin.erase({"data_subject": "s2"}, reason="asked", actor="dpo")
    assert db.execute("select count(*) from acme.entity where name = 'Rita'").fetchone()[0] == 0
    assert keep


def test_erasing_a_peer_takes_their_words_and_private_memories(acme, db, acme_admin):
    o = said(acme, "zqsecret plans of ben", "x", actor="ben")
    acme.remember("ben has zqsecret plans", evidence=[o], purposes=["converse"])
    mine = said(acme, "a note for ben", "y", actor="ana")
    acme.remember("zqprivate note for ben only", evidence=[mine], purposes=["converse"], audience="ben")
    receipt = acme_admin.erase({"peer": "ben"}, reason="account deleted", actor="dpo")
    assert set(receipt.residual.values()) == {0}
    assert rows_mentioning(db, "zqsecret") == {} and rows_mentioning(db, "zqprivate") == {}
    assert db.execute("select count(*) from acme.peer where name = 'ben'").fetchone()[0] == 0


def test_bad_selectors_and_reasons_erase_nothing(acme, db, acme_admin):
    said(acme, "something", "s1")
    before = db.execute("select count(*) from acme.observation").fetchone()[0]
    for selector, reason, error in [
        ({"data_subject": "s1"}, "", errors.InvalidArgument),
        ({"data_subject": "s1", "peer": "ana"}, "why", errors.InvalidArgument),
        ({"colour": "blue"}, "why", errors.InvalidArgument),
        ({"peer": "mallory"}, "why", errors.UnknownPeer),
        ({"scope": "nowhere"}, "why", errors.ScopeNotAuthorised),
        ({"observation": {"scope": "default", "offset": 99}}, "why", errors.ObservationNotFound),
        ({"expired_before": "2030-01-01"}, "why", errors.InvalidArgument),
    ]:
        with pytest.raises(error):
            acme_admin.erase(selector, reason=reason, actor="dpo")
    for actor in ("", "   ", "x" * 201):  # the receipt must say who ran it
        with pytest.raises(errors.InvalidArgument):
            acme_admin.erase({"data_subject": "s1"}, reason="why", actor=actor)
    assert db.execute("select count(*) from acme.observation").fetchone()[0] == before
    assert db.execute("select count(*) from acme.erasure_request").fetchone()[0] == 0


def test_expiry_is_off_until_the_gate_is_on(acme, db):
    acme.append("old news zqold", role="user", retention_until="2020-01-01T00:00:00Z")
    keep = acme.append("still fresh", role="user", retention_until="2999-01-01T00:00:00Z")
    with db.cursor() as cur:
        assert cur.execute("select * from acme.expire()").fetchall() == []
    assert rows_mentioning(db, "zqold")
    db.execute("select pgrecall.set_tenant_setting('acme', 'expiry_gate', 'true')")
    receipts = db.execute("select observations_erased, residual from acme.expire()").fetchall()
    assert len(receipts) == 1 and receipts[0][0] == 1 and set(receipts[0][1].values()) == {0}
    assert rows_mentioning(db, "zqold") == {}
    assert db.execute("select count(*) from acme.observation where log_offset = %s", (keep,)).fetchone()[0] == 1


# -- the property ---------------------------------------------------------------------------

SUBJECTS = ["a", "b", "c"]
step = st.one_of(
    st.tuples(st.just("append"), st.sampled_from(SUBJECTS)),
    st.tuples(st.just("remember"), st.integers(0, 50)),
    st.tuples(st.just("derive"), st.lists(st.integers(0, 50), min_size=1, max_size=3)),
    st.tuples(st.just("correct"), st.integers(0, 50)),
    st.tuples(st.just("supersede"), st.integers(0, 50), st.integers(0, 50)),
    st.tuples(st.just("assert_fact"), st.integers(0, 50), st.integers(0, 3)),
    # session messages queue derivation work; the deriver turns some into memories, facts and working documents
    st.tuples(st.just("message"), st.sampled_from(SUBJECTS)),
    st.tuples(st.just("derive_tasks"), st.integers(1, 8)),
)
YEAR = lambda y, m=1: datetime(y, m, 1, tzinfo=UTC)
SAMPLE_TIMES = [YEAR(y, m) for y in range(2019, 2026) for m in (1, 7)]


def believed_town(assertions, at):
    """Where Ana lives at `at` if only these assertions (in order) had been made: the last one covering it."""
    covering = [town for since, town in assertions if since <= at]
    return covering[-1] if covering else None


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(steps=st.lists(step, min_size=3, max_size=25), victim=st.sampled_from(SUBJECTS))
def test_random_workloads_then_erase_a_subject(acme, db, conninfo, steps, victim, acme_admin):
    run = db.execute("select nextval(pg_get_serial_sequence('acme.erasure_request', 'id'))").fetchone()[0]
    token = {s: f"zq{run}x{s}" for s in SUBJECTS}       # a distinctive token per subject and example
    subject = {s: f"run{run}-{s}" for s in SUBJECTS}
    obs = []                                              # (offset, subject)
    memories = []                                         # (id, set of subjects its text came from)
    assertions = []                                       # (valid_from, town, subject), in order
    session, deriver = None, None
    # work left queued by earlier examples would take this example's derive steps
    db.execute("update acme.work_task set status = 'dead', finished_at = now(), lease_token = null, "
               "lease_until = null where status in ('pending', 'leased')")
    for op in steps:
        kind = op[0]
        if kind == "message":
            if session is None:
                session = acme.create_session(f"property {run}")
                acme.add_session_peers(session, ["ana", {"peer": "ben", "observe_others": True}])
            s = op[1]
            acme.add_messages(session, [{"actor": "ana", "body": f"I live in Town{token[s]} now.",
                                         "data_subject_id": subject[s]}])
            continue
        if kind == "derive_tasks":
            if deriver is None:
                deriver = Deriver("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker"), batch=op[1])
            deriver.run_once()
            continue
        if kind == "append" or not obs:
            s = op[1] if kind == "append" else SUBJECTS[0]
            obs.append((said(acme, f"{token[s]} said something {len(obs)}", subject[s]), s))
            continue
        if kind == "remember":
            off, s = obs[op[1] % len(obs)]
            r = acme.remember(f"{token[s]} fact {len(memories)}", evidence=[off], purposes=["converse"],
                              about=[token[s]])
            if r.created:
                memories.append((r.memory_id, {s}))
        elif memories and kind == "derive":
            chosen = dict(memories[i % len(memories)] for i in op[1])
            live = [(m, subj) for m, subj in chosen.items()
                    if db.execute("select superseded_by is null from acme.memory where id = %s", (m,)).fetchone()[0]]
            if live:
                subjects = set().union(*(m[1] for m in live))
                text = " ".join(token[s] for s in sorted(subjects)) + f" summary {len(memories)}"
                memories.append((acme.derive([m[0] for m in live], text), subjects))
        elif memories and kind == "correct":
            mid, subjects = memories[op[1] % len(memories)]
            rev, live = db.execute("select revision, superseded_by is null from acme.memory where id = %s",
                                   (mid,)).fetchone()
            if live:
                acme.correct(mid, " ".join(token[s] for s in sorted(subjects)) + f" corrected {rev}", revision=rev)
        elif memories and kind == "supersede":
            mid, subjects = memories[op[1] % len(memories)]
            off, s = obs[op[2] % len(obs)]
            rev, live = db.execute("select revision, superseded_by is null from acme.memory where id = %s",
                                   (mid,)).fetchone()
            if live and db.execute("select origin = 'told' from acme.memory where id = %s", (mid,)).fetchone()[0]:
                new = acme.supersede(mid, f"{token[s]} replaced {len(memories)}", revision=rev, evidence=[off])
                memories.append((new, {s}))
        elif kind == "assert_fact":
            # subjects' statements about one single-valued fact: they close and split each other
            off, s = obs[op[1] % len(obs)]
            since = YEAR(2020 + op[2])
            acme.assert_fact(f"person{run}", "lives_in", f"{token[s]} town", evidence=[{"offset": off, "quote": token[s]}],
                             valid_from=since)
            assertions.append((since, f"{token[s]} town", s))
    others = [s for s in SUBJECTS if s != victim]
    before = {s: db.execute("select count(*) from acme.observation where data_subject_id = %s",
                            (subject[s],)).fetchone()[0] for s in others}
    passages_of = lambda s: db.execute("select count(*) from acme.passage where body like %s",
                                       (f"{token[s]} said%",)).fetchone()[0]
    passages_before = {s: passages_of(s) for s in SUBJECTS}
    assert passages_before[victim] == sum(1 for _, s in obs if s == victim)  # one passage per short observation
    untouched = [m for m, subjects in memories if victim not in subjects]
    texts_before = dict(db.execute("select id, body from acme.memory where id = any(%s)", (untouched,)).fetchall())

    if steps[0][0] == "append":  # half the examples erase with term statistics in place
        db.execute("select * from acme.refresh_term_stats()")
    if deriver is not None:
        deriver.close()
    receipt = acme_admin.erase({"data_subject": subject[victim]}, reason="property test", actor="dpo")

    assert set(receipt.residual.values()) == {0}, receipt
    assert rows_mentioning(db, token[victim]) == {}
    assert passages_of(victim) == 0 and all(passages_of(s) == passages_before[s] for s in others)
    for s in others:
        assert db.execute("select count(*) from acme.observation where data_subject_id = %s",
                          (subject[s],)).fetchone()[0] == before[s]
    texts_after = dict(db.execute("select id, body from acme.memory where id = any(%s)", (untouched,)).fetchall())
    assert texts_after == texts_before
    # facts are rebuilt from what survives: as if the victim had never spoken
    if assertions:
        surviving = [(since, town) for since, town, s in assertions if s != victim]
        for at in SAMPLE_TIMES:
            try:
                now_believed = [f.object for f in acme.facts_as_of(f"person{run}", "lives_in", valid_at=at)]
            except errors.UnknownEntity:
                now_believed = []
            expected = believed_town(surviving, at)
            assert now_believed == ([expected] if expected else []), (at, assertions)


def test_cli_prints_the_receipt(acme, conninfo, db):
    from test_install_paths import run_cli

    said(acme, "zqcli private words", "cli-subject")
    env = {"PGRECALL_DSN": conninfo.dsn(user="pgrecall_acme_admin")}
    out = run_cli("erase", "--tenant", "acme", "--subject", "cli-subject", "--reason", "ticket 9", env=env).stdout
    assert "1 observations erased" in out and "residual is zero" in out
    assert rows_mentioning(db, "zqcli") == {}
    # the table lines up, and a selector that matches nothing says so rather than claiming success
    rows = [line for line in out.splitlines() if line.startswith("  ") and line.split()[-1].isdigit()]
    assert len({len(line) for line in rows}) == 1, out
    none = run_cli("erase", "--tenant", "acme", "--subject", "nobody-at-all", "--reason", "x", env=env).stdout
    assert "nothing matched the selector" in none and "residual is zero" not in none
    bad = run_cli("erase", "--tenant", "acme", "--observation", "nonsense", "--reason", "x", env=env, check=False)
    assert bad.returncode == 1 and "SCOPE:OFFSET" in bad.stderr


def test_terms_of_a_memory_forgotten_after_the_snapshot_are_erased_too(acme, db, acme_admin):
    o = said(acme, "zqforgot words here", "s-f")
    m = acme.remember("zqforgot is a memory", evidence=[o], purposes=["converse"]).memory_id
    said(acme, "other words", "s-g")
    db.execute("select * from acme.refresh_term_stats()")
    acme.forget(m, reason="later")
    receipt = acme_admin.erase({"data_subject": "s-f"}, reason="asked", actor="dpo")
    assert set(receipt.residual.values()) == {0} and "term_stat" in receipt.residual
    assert rows_mentioning(db, "zqforgot") == {}


def test_erasing_the_evidence_of_a_new_value_brings_the_old_one_back(acme, db, acme_admin):
    lisbon = said(acme, "I live in Lisbon", "u-1")
    porto = said(acme, "I moved to Porto", "u-2")
    acme.assert_fact("ana", "lives_in", "Lisbon", evidence=[{"offset": lisbon, "quote": "I live in Lisbon"}],
                     valid_from=datetime(2020, 1, 1, tzinfo=UTC))
    acme.assert_fact("ana", "lives_in", "Porto", evidence=[{"offset": porto, "quote": "I moved to Porto"}],
                     valid_from=datetime(2024, 1, 1, tzinfo=UTC))
    receipt = acme_admin.erase({"data_subject": "u-2"}, reason="request 7", actor="dpo")
    assert set(receipt.residual.values()) == {0}
    assert receipt.rows_erased["fact"] == 2  # the Porto fact and the Lisbon piece it split off
    assert receipt.rows_erased["facts_reinstated"] == 1
    current = acme.facts_as_of("ana", "lives_in", valid_at=datetime(2025, 1, 1, tzinfo=UTC))
    assert [(f.object, f.valid.lower, f.valid.upper) for f in current] == \
        [("Lisbon", datetime(2020, 1, 1, tzinfo=UTC), None)]
    assert current[0].evidence[0].quote == "I live in Lisbon"
    # Porto was named only by the erased words: the entity is gone too
    assert rows_mentioning(db, "porto") == {}


def test_erasing_a_peer_after_a_merge_leaves_no_entity_and_takes_their_private_facts(acme, db, acme_admin):
    o = said(acme, "I know Kenji. Kenji Sato is my friend. I am allergic to peanuts", "u-1")
    acme.assert_fact("ana", "knows", "Kenji", evidence=[{"offset": o, "quote": "I know Kenji"}])
    acme.assert_fact("ana", "friend_of", "Kenji Sato", evidence=[{"offset": o, "quote": "Kenji Sato is my friend"}])
    acme_admin.merge_entities("Kenji", "Kenji Sato")
    other = said(acme, "Ben likes tea", "u-2", actor="ben")
    acme.assert_fact("ben", "likes", "tea", evidence=[{"offset": other, "quote": "Ben likes tea"}], audience="ana")
    receipt = acme_admin.erase({"peer": "ana"}, reason="account closed", actor="dpo")
    assert set(receipt.residual.values()) == {0}, receipt
    assert rows_mentioning(db, "kenji") == {}
    # ben's words survive, but the fact only ana could see goes with her
    assert db.execute("select count(*) from acme.fact").fetchone()[0] == 0
    assert db.execute("select count(*) from acme.observation where body = 'Ben likes tea'").fetchone()[0] == 1
