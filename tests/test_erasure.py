"""Erasure with a receipt: everything derived goes, the residual is zero, others are untouched."""

from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgrecall import errors
from pgrecall.deriver import Deriver
from pgrecall.worker import Worker
from test_export import erased_counts, exported_counts


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
append_step = st.tuples(st.just("append"), st.sampled_from(SUBJECTS))
remember_step = st.tuples(st.just("remember"), st.integers(0, 50))
derive_step = st.tuples(st.just("derive"), st.lists(st.integers(0, 50), min_size=1, max_size=3))
# a correction of a memory, citing an observation (whose subject's token its text then carries) or nothing
cited_correct_step = st.tuples(st.just("correct"), st.integers(0, 50), st.integers(0, 50))
uncited_correct_step = st.tuples(st.just("correct"), st.integers(0, 50), st.none())
supersede_step = st.tuples(st.just("supersede"), st.integers(0, 50), st.integers(0, 50))
# the embedding worker runs (input version 2 embeds each memory with the turns around its evidence)
embed_step = st.tuples(st.just("embed"))
# words stored without an observation, each carrying its subject: a peer's name and metadata, a session's
# name and metadata, a turn log (its session's name), an entity's alias
words_step = st.tuples(st.sampled_from(["peer", "session", "turn", "alias"]), st.sampled_from(SUBJECTS),
                       st.integers(0, 50))
step = st.one_of(
    append_step, remember_step, derive_step, cited_correct_step, uncited_correct_step, supersede_step,
    st.tuples(st.just("assert_fact"), st.integers(0, 50), st.integers(0, 3)),
    # session messages queue derivation work; the deriver turns some into memories, facts and working documents
    st.tuples(st.just("message"), st.sampled_from(SUBJECTS)),
    st.tuples(st.just("derive_tasks"), st.integers(1, 8)),
    embed_step, words_step,
)
YEAR = lambda y, m=1: datetime(y, m, 1, tzinfo=UTC)
SAMPLE_TIMES = [YEAR(y, m) for y in range(2019, 2026) for m in (1, 7)]


def believed_town(assertions, at):
    """Where Ana lives at `at` if only these assertions (in order) had been made: the last one covering it."""
    covering = [town for since, town in assertions if since <= at]
    return covering[-1] if covering else None


# Chains of corrections need memories to correct: a workload mostly of corrections, citing the subjects'
# words in turn, with the writes they interleave with (derivations before and after, supersessions).
correction_heavy_step = st.one_of(append_step, remember_step, *[cited_correct_step] * 5, uncited_correct_step,
                                  derive_step, supersede_step, embed_step)


class RecordingWorker(Worker):
    """The embedding worker, remembering the text each stored vector was computed from."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.inputs = {}  # (queue, id): (text, vector)

    def _store(self, runner, queue, jobs, embedded):
        stored = super()._store(runner, queue, jobs, embedded)
        assert stored == len(jobs)  # one worker, nothing else writes meanwhile: every result is stored
        for job, vector in zip(jobs, embedded.inputs):
            self.inputs[(queue, job.id)] = (job.input, vector)
        return stored


def assert_vectors_free_of(db, worker, token, since):
    """Every stored vector was computed from text without the token, and so is the text that the worker
    would embed now for every surviving memory. Vectors this worker did not store were stored before
    ``since``, by an earlier example, from text that cannot hold this example's token."""
    stored = [("embedding", i, v, at) for i, v, at in db.execute(
        "select memory_id, embedding::text, embedded_at from acme.memory_embedding")]
    stored += [("passage_embedding", i, v, at) for i, v, at in db.execute(
        "select id, embedding::text, embedded_at from acme.passage where embedding is not null")]
    for queue, key, text, at in stored:
        if (queue, key) not in worker.inputs:
            assert at < since, (queue, key)
            continue
        vector = [float(x) for x in text.strip("[]").split(",")]
        source, computed = worker.inputs[(queue, key)]
        # Stored as halfvec (migration 0032): each number within half precision's rounding of the computed
        # one (2^-11 of it; 2^-10 allows the literal's own rounding), where another text's vector is ~10% off.
        assert max(abs(a - b) - abs(b) * 2 ** -10 for a, b in zip(vector, computed)) < 1e-6, (queue, key)
        assert token not in source.lower(), (queue, key, source)
    for version in (1, 2):
        inputs = db.execute("select memory_id, input from acme._embedding_inputs(array(select id from acme.memory), %s)",
                            (version,)).fetchall()
        assert [i for i in inputs if token in i[1].lower()] == []


def random_workloads(examples: int):
    """A property test over that many random workloads, each with its erasure and the model check: slow by nature.

    The examples share the test's tenant (each uses tokens and subjects of its own), hence the health check."""
    def decorate(test):
        checks = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
        return pytest.mark.slow(settings(max_examples=examples, deadline=None, suppress_health_check=checks)(test))
    return decorate


@random_workloads(25)
@given(steps=st.lists(step, min_size=3, max_size=25), victim=st.sampled_from(SUBJECTS))
def test_random_workloads_then_erase_a_subject(acme, db, conninfo, steps, victim, acme_admin):
    workload_then_erase(acme, db, conninfo, steps, victim, acme_admin)


@random_workloads(40)
@given(steps=st.lists(correction_heavy_step, min_size=8, max_size=25), victim=st.sampled_from(SUBJECTS))
def test_random_corrections_then_erase_a_subject(acme, db, conninfo, steps, victim, acme_admin):
    workload_then_erase(acme, db, conninfo, steps, victim, acme_admin)


def workload_then_erase(acme, db, conninfo, steps, victim, acme_admin):
    """Run the steps, erase the victim subject, and check the result against a model of what should remain."""
    run = db.execute("select nextval(pg_get_serial_sequence('acme.erasure_request', 'id'))").fetchone()[0]
    token = {s: f"zq{run}x{s}" for s in SUBJECTS}       # a distinctive token per subject and example
    subject = {s: f"run{run}-{s}" for s in SUBJECTS}
    obs = []                                              # (offset, subject)
    memories = []                                         # (id, set of subjects its text came from)
    origin = {}                                           # id: subjects whose erasure deletes the memory
    texts = {}                                            # id: [(text, subject of the evidence a correction cited)]
    assertions = []                                       # (valid_from, town, subject), in order
    session, deriver = None, None
    worker = RecordingWorker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker"))
    started = db.execute("select clock_timestamp()").fetchone()[0]
    named = []                                            # entity names that exist (aliases are added to them)
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
        if kind == "embed":
            worker.drain(refresh_stats=False)
            continue
        if kind in ("peer", "session", "turn", "alias"):
            s, n = op[1], op[2]
            if kind == "peer":
                acme.add_peer(f"{token[s]}p{n}", "human", metadata={"note": f"{token[s]} metadata"},
                              data_subject_id=subject[s])
            elif kind == "session":
                acme.create_session(f"{token[s]} room {n}", metadata={"topic": f"{token[s]} topic"},
                                    data_subject_id=subject[s])
            elif kind == "turn":
                acme.log_turn(f"{token[s]} log", "ana", f"{token[s]} turn {n}", data_subject_id=subject[s])
            elif named:
                acme.add_entity_alias(named[n % len(named)], f"{token[s]} alias {n}", data_subject_id=subject[s])
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
            named.append(token[s])
            if r.created:
                memories.append((r.memory_id, {s}))
                origin[r.memory_id], texts[r.memory_id] = {s}, [(f"{token[s]} fact {len(memories) - 1}", None)]
        elif memories and kind == "derive":
            chosen = dict(memories[i % len(memories)] for i in op[1])
            live = [(m, subj) for m, subj in chosen.items()
                    if db.execute("select superseded_by is null from acme.memory where id = %s", (m,)).fetchone()[0]]
            if live:
                subjects = set().union(*(m[1] for m in live))
                text = " ".join(token[s] for s in sorted(subjects)) + f" summary {len(memories)}"
                derived = acme.derive([m[0] for m in live], text)
                memories.append((derived, subjects))
                # concluded from the sources' current text, corrections included
                origin[derived], texts[derived] = set(subjects), [(text, None)]
        elif memories and kind == "correct":
            mid, subjects = memories[op[1] % len(memories)]
            rev, live = db.execute("select revision, superseded_by is null from acme.memory where id = %s",
                                   (mid,)).fetchone()
            if live:
                cited = None if op[2] is None else obs[op[2] % len(obs)]
                if cited is not None:
                    subjects.add(cited[1])
                text = " ".join(token[s] for s in sorted(subjects)) + f" corrected {rev}"
                acme.correct(mid, text, revision=rev, evidence=None if cited is None else [cited[0]])
                texts[mid].append((text, None if cited is None else cited[1]))
        elif memories and kind == "supersede":
            mid, subjects = memories[op[1] % len(memories)]
            off, s = obs[op[2] % len(obs)]
            rev, live = db.execute("select revision, superseded_by is null from acme.memory where id = %s",
                                   (mid,)).fetchone()
            if live and db.execute("select origin = 'told' from acme.memory where id = %s", (mid,)).fetchone()[0]:
                new = acme.supersede(mid, f"{token[s]} replaced {len(memories)}", revision=rev, evidence=[off])
                memories.append((new, {s}))
                origin[new], texts[new] = {s}, [(f"{token[s]} replaced {len(memories) - 1}", None)]
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
    worker.drain(refresh_stats=False)  # the worker has caught up, as it usually has: every live memory has a vector
    analyze(db)  # the planner statistics hold the subjects' words, as they would after autovacuum
    exported = acme_admin.export({"data_subject": subject[victim]})
    receipt = acme_admin.erase({"data_subject": subject[victim]}, reason="property test", actor="dpo")

    assert set(receipt.residual.values()) == {0}, receipt
    # one plan decides both: the rows exported are the rows erased, and nothing is left to export
    assert exported_counts(exported) == erased_counts(receipt), (exported_counts(exported), receipt.rows_erased)
    assert acme_admin.export({"data_subject": subject[victim]}) == []
    assert rows_mentioning(db, token[victim]) == {}
    assert_vectors_free_of(db, worker, token[victim], started)
    # what `pgrecall erase` does after the commit
    assert acme_admin.refresh_erasure_statistics(receipt.id).statistics_refreshed_at is not None
    assert stats_mentioning(db, token[victim]) == []
    # the memories queued again by the erasure embed text without the words
    worker.drain(refresh_stats=False)
    assert_vectors_free_of(db, worker, token[victim], started)
    assert passages_of(victim) == 0 and all(passages_of(s) == passages_before[s] for s in others)
    for s in others:
        assert db.execute("select count(*) from acme.observation where data_subject_id = %s",
                          (subject[s],)).fetchone()[0] == before[s]
    texts_after = dict(db.execute("select id, body from acme.memory where id = any(%s)", (untouched,)).fetchall())
    assert texts_after == texts_before
    # a memory the victim's words made goes; one a correction citing them changed returns to its text from
    # before the first such correction (later corrections were built on it); any other keeps its text
    bodies = dict(db.execute("select id, body from acme.memory where id = any(%s)", (list(texts),)).fetchall())
    for mid, history in texts.items():
        if victim in origin[mid]:
            assert mid not in bodies, (mid, history)
            continue
        undone = next((i for i, (_, cited) in enumerate(history) if cited == victim), len(history))
        assert bodies.get(mid) == history[undone - 1][0], (mid, history)
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


def test_a_name_carried_through_two_supersessions_goes_with_the_words_that_said_it(acme, db, acme_admin):
    named = said(acme, "I am zqcarried", "s-named")
    other = said(acme, "things changed", "s-other")
    first = acme.remember("zqcarried is a fact", evidence=[named], purposes=["converse"], about=["zqcarried"]).memory_id
    second = acme.supersede(first, "the fact changed", revision=1, evidence=[other])
    third = acme.supersede(second, "the fact changed again", revision=1, evidence=[other])
    receipt = acme_admin.erase({"data_subject": "s-named"}, reason="asked", actor="dpo")
    assert set(receipt.residual.values()) == {0}, receipt
    # the entity's name came from the erased words, however many supersessions carried it along
    assert rows_mentioning(db, "zqcarried") == {}
    assert acme.read(third, purpose="converse").provenance.about == []


# -- nothing left behind (issue #13) ---------------------------------------------------------

def stats_mentioning(db, token, tenant="acme"):
    """The planner statistics (pg_stats, expression indexes included) of the tenant that hold the token."""
    return db.execute("select tablename, attname from pg_stats s where schemaname = %s and lower(s::text) like %s "
                      "order by 1, 2", (tenant, f"%{token}%")).fetchall()


def analyze(db, tenant="acme"):
    for (table,) in db.execute("select c.relname from pg_class c where c.relnamespace = %s::regnamespace "
                               "and c.relkind in ('r', 'p') and not c.relispartition", (tenant,)).fetchall():
        db.execute(f'analyze {tenant}."{table}"')


def stored_vector(db, memory_id):
    row = db.execute("select embedding::text from acme.memory_embedding where memory_id = %s", (memory_id,)).fetchone()
    return None if row is None else [float(x) for x in row[0].strip("[]").split(",")]


def test_erasing_a_turn_re_embeds_the_memory_whose_input_held_it(acme, db, conninfo, acme_admin):
    """Finding 1: input version 2 embeds the turns around a memory's evidence. Erasing Ana's turn must not
    leave Ben's memory with a vector computed from her words."""
    from pgrecall.embedder import get_embedder

    s = acme.create_session("neighbours")
    acme.add_session_peers(s, ["ana", "ben"])
    _, ben_turn, _ = acme.add_messages(s, [
        {"actor": "ana", "body": "my nickname is zqneighbour", "data_subject_id": "subj-ana"},
        {"actor": "ben", "body": "I row on the river every Sunday", "data_subject_id": "subj-ben"},
        {"actor": "ben", "body": "and I cook on Mondays", "data_subject_id": "subj-ben"}])
    # his own memory: the turns of ana and ben's session are theirs (#27)
    ben = acme.remember("Ben rows on Sundays", evidence=[ben_turn.offset], purposes=["converse"], audience="ben",
                        principal="ben").memory_id
    worker = Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker"))
    worker.drain()
    assert "zqneighbour" in db.execute("select acme._embedding_input(%s, 2)", (ben,)).fetchone()[0]
    before = stored_vector(db, ben)
    assert before is not None

    receipt = acme_admin.erase({"data_subject": "subj-ana"}, reason="request", actor="dpo")
    assert set(receipt.residual.values()) == {0}, receipt
    # gone in the erasing transaction, and queued again
    assert stored_vector(db, ben) is None
    assert db.execute("select count(*) from acme.embedding_job where memory_id = %s", (ben,)).fetchone()[0] == 1
    assert receipt.rows_erased["embedding_input"] == 1
    worker.drain()
    now = db.execute("select acme._embedding_input(%s, 2)", (ben,)).fetchone()[0]
    assert "zqneighbour" not in now
    expected = get_embedder().embed([now])[0]
    after = stored_vector(db, ben)
    assert max(abs(a - b) for a, b in zip(after, expected)) < 1e-4
    assert max(abs(a - b) for a, b in zip(after, before)) > 1e-3


def test_words_stored_without_evidence_go_with_their_data_subject(acme, db, acme_admin):
    """Finding 2: peer metadata, session names and metadata, turn logs and entity aliases carry a data
    subject and are erased with it."""
    acme.add_peer("zqpeername", "human", metadata={"email": "zqpeermail@example.org"}, data_subject_id="subj-p")
    acme.add_peer("ben", "human", metadata={"note": "zqbenmeta"}, data_subject_id="subj-p")
    first = acme.create_session("zqsessionname", metadata={"topic": "zqsessionmeta"}, data_subject_id="subj-p")
    turn = acme.log_turn("zqturnlog", "ana", "zqturnbody hello", data_subject_id="subj-p")
    rita = said(acme, "Rita is my sister", "subj-other")
    acme.remember("Ana's sister is Rita", evidence=[rita], purposes=["converse"], about=["Rita"])
    acme.add_entity_alias("Rita", "zqalias", data_subject_id="subj-p")
    acme.add_entity_alias("Rita", "Rita Silva")  # no subject: stays
    tokens = ["zqpeername", "zqpeermail", "zqbenmeta", "zqsessionname", "zqsessionmeta", "zqturnlog", "zqturnbody",
              "zqalias"]
    assert all(rows_mentioning(db, t) for t in tokens)

    receipt = acme_admin.erase({"data_subject": "subj-p"}, reason="request", actor="dpo")
    assert set(receipt.residual.values()) == {0}, receipt
    assert receipt.observations_erased == 1
    assert {t: rows_mentioning(db, t) for t in tokens} == {t: {} for t in tokens}
    assert receipt.rows_erased["peer"] == 2 and receipt.rows_erased["session"] == 2
    assert receipt.rows_erased["entity_alias"] == 1
    # what the subject did not say stays; the names it gave can be used afresh
    assert db.execute("select aliases from acme.entity where name = 'Rita'").fetchone()[0] == ["rita silva"]
    assert acme.create_session("zqsessionname") != first
    assert acme.log_turn("zqturnlog", "ana", "hello again").session_id != turn.session_id
    assert acme.add_peer("zqpeername", "human") > 0


def test_the_data_subject_follows_the_peer(acme, db, acme_admin):
    """Issue #28 finding 5, the probe's case: a peer created with a data subject, then turns, sessions,
    aliases and metadata written by or about that peer, none of the calls repeating the subject. Erasing
    the subject leaves no copy of any of their words; what another subject said stays."""
    acme.add_peer("zqpeer", "human", metadata={"email": "zqmail@example.org"}, data_subject_id="u-42")
    acme.add_peer("ben", "human", data_subject_id="u-43")
    # nothing below names u-42 again
    acme.add_peer("zqpeer", "human", metadata={"phone": "zqphone"})
    own = acme.create_session("zqsession", metadata={"topic": "zqtopic"}, principal="zqpeer")
    acme.add_session_peers(own, ["zqpeer", "ben"])
    acme.add_messages(own, [{"actor": "zqpeer", "body": "I live in zqtown"},
                            {"actor": "ben", "body": "and I live in Faro"}])
    acme.log_turn("zqlog", "zqpeer", "zqturn hello")
    acme.log_turn("zqlog", "bot", "zqreply: hello to you")          # the assistant's turn in the peer's log
    off = acme.append("my nickname is zqnick", role="user", actor="zqpeer")
    acme.remember("zqpeer is called zqnick", evidence=[off], purposes=["converse"], about=["zqpeer"])
    acme.add_entity_alias("zqpeer", "zqalias")                        # about the peer, by the bot
    faro = acme.append("Faro is by the sea", role="user", actor="ben")
    acme.remember("Faro is by the sea", evidence=[faro], purposes=["converse"], about=["Faro"])
    acme.add_entity_alias("Faro", "zqfaro", principal="zqpeer")       # by the peer
    for_them = acme.create_session("zqbotsession", metadata={"for": "zqfor"})  # the bot's, for the peer
    acme.add_session_peers(for_them, ["zqpeer"])
    tokens = ["zqpeer", "zqmail", "zqphone", "zqsession", "zqtopic", "zqtown", "zqlog", "zqturn", "zqreply",
              "zqnick", "zqalias", "zqfaro", "zqbotsession", "zqfor"]
    assert {t: bool(rows_mentioning(db, t)) for t in tokens} == {t: True for t in tokens}

    receipt = acme_admin.erase({"data_subject": "u-42"}, reason="request #42", actor="dpo")
    assert set(receipt.residual.values()) == {0}, receipt
    left = {t: rows_mentioning(db, t) for t in tokens}
    assert left == {t: {} for t in tokens}
    # ben's words are his, not the peer's: they stay
    assert db.execute("select count(*) from acme.observation where body = 'and I live in Faro'").fetchone()[0] == 1


def test_a_peer_named_like_an_erased_one_cannot_block_erasure(acme, db, acme_admin):
    """Finding 3: erase() renamed the peer to 'erased-peer-<id>', a name anyone could take first (23505)."""
    victim = acme.add_peer("victim", "human")
    squatter = acme.add_peer(f"erased-peer-{victim}", "other")
    acme.append("zqvictim words", role="user", actor="victim")
    receipt = acme_admin.erase({"peer": "victim"}, reason="account closed", actor="dpo")
    assert set(receipt.residual.values()) == {0}, receipt
    assert rows_mentioning(db, "zqvictim") == {}
    renamed = db.execute("select name from acme.peer where id = %s", (victim,)).fetchone()[0]
    assert db.execute("select name from acme.peer where id = %s", (squatter,)).fetchone()[0] == f"erased-peer-{victim}"
    # no caller can take the erased peer's new name, in any case or form, so erasing another peer never collides
    with pytest.raises(errors.InvalidName):
        acme.add_peer(renamed, "other")
    with pytest.raises(errors.InvalidName):
        acme.add_peer(renamed.upper(), "other")
    acme.add_peer("second", "human")
    acme_admin.erase({"peer": "second"}, reason="closed", actor="dpo")


def test_statistics_lose_the_erased_words_when_the_cli_erases(acme, db, conninfo, acme_admin):
    """Finding 4: pg_stats kept the subject's words until the next ANALYZE; `pgrecall erase` refreshes them
    after the commit, and says so (as does the receipt)."""
    from test_install_paths import run_cli

    for i in range(3):
        o = said(acme, f"zqstats words {i}", "stats-subject")
        acme.remember(f"zqstats memory {i}", evidence=[o], purposes=["converse"], about=[f"zqstats{i}"])
    said(acme, "other words", "someone-else")
    analyze(db)
    assert stats_mentioning(db, "zqstats")

    env = {"PGRECALL_DSN": conninfo.dsn(user="pgrecall_acme_admin")}
    out = run_cli("erase", "--tenant", "acme", "--subject", "stats-subject", "--reason", "ticket 10", env=env).stdout
    assert "statistics refreshed" in out, out
    assert stats_mentioning(db, "zqstats") == []
    receipt = acme_admin.erasure_requests(1)[0]
    assert receipt.statistics_refreshed_at is not None and "observation" in receipt.tables_touched


def test_erase_from_sql_says_statistics_are_stale_until_refreshed(acme, db, acme_admin):
    o = said(acme, "zqsqlstats words", "sql-subject")
    acme.remember("zqsqlstats memory", evidence=[o], purposes=["converse"])
    said(acme, "other words", "someone-else")
    analyze(db)
    receipt = acme_admin.erase({"data_subject": "sql-subject"}, reason="request", actor="dpo")
    assert receipt.statistics_refreshed_at is None
    refreshed = acme_admin.refresh_erasure_statistics(receipt.id)
    assert refreshed.statistics_refreshed_at is not None
    assert stats_mentioning(db, "zqsqlstats") == []
    with pytest.raises(errors.UnknownErasureRequest):
        acme_admin.refresh_erasure_statistics(receipt.id + 100)


def test_cli_vacuums_the_touched_tables_when_asked(acme, db, conninfo):
    from test_install_paths import run_cli

    said(acme, "zqvacuum words", "vacuum-subject")
    env = {"PGRECALL_DSN": conninfo.dsn(user="pgrecall_acme_admin")}
    out = run_cli("erase", "--tenant", "acme", "--subject", "vacuum-subject", "--reason", "ticket 11", "--vacuum",
                  env=env).stdout
    assert "vacuumed" in out and "statistics refreshed" in out, out
    vacuumed = dict(db.execute("select relname, last_vacuum is not null from pg_stat_all_tables "
                               "where schemaname = 'acme' and relname in ('observation', 'projection_dependency')"))
    assert vacuumed == {"observation": True, "projection_dependency": True}


def test_a_merged_away_name_goes_with_the_words_that_said_it(acme, db, acme_admin):
    """The entity a merge absorbed leaves its name as an alias of the survivor; when the absorbed entity goes
    (nothing surviving names it), the alias goes with it."""
    kenji = said(acme, "I know Kenji", "u-1")
    sato = said(acme, "zqsato is my friend", "u-2")
    acme.remember("Ana knows Kenji", evidence=[kenji], purposes=["converse"], about=["Kenji"])
    acme.remember("Ana's friend is zqsato", evidence=[sato], purposes=["converse"], about=["zqsato"])
    acme_admin.merge_entities("Kenji", "zqsato")
    assert db.execute("select aliases from acme.entity where name = 'Kenji'").fetchone()[0] == ["zqsato"]
    receipt = acme_admin.erase({"data_subject": "u-2"}, reason="request", actor="dpo")
    assert set(receipt.residual.values()) == {0}, receipt
    assert receipt.rows_erased["entity_alias"] == 1
    assert rows_mentioning(db, "zqsato") == {}
    assert db.execute("select aliases from acme.entity where name = 'Kenji'").fetchone()[0] == []


def test_erasing_a_scope_clears_its_sessions_names(acme, db, acme_admin):
    acme.create_session("zqscopesession", metadata={"topic": "zqscopetopic"}, scope="other", scopes=["other"])
    acme.log_turn("zqscopelog", "ana", "hello", scope="other", scopes=["other"])
    kept = acme.create_session("zqkeptsession")  # scope default
    receipt = acme_admin.erase({"scope": "other"}, reason="project closed", actor="dpo")
    assert set(receipt.residual.values()) == {0}, receipt
    assert receipt.rows_erased["session"] == 2
    assert rows_mentioning(db, "zqscope") == {}
    assert acme.create_session("zqkeptsession") == kept


def test_a_vector_in_flight_from_an_erased_turn_is_not_stored(acme, db, conninfo, acme_admin):
    """A worker that claimed a neighbour's job before the erasure (its input holds the erased turn) and
    completes after it stores nothing: the erasure moved the job to a new generation."""
    first = said(acme, "zqflight is my middle name", "subj-flight")
    second = said(acme, "I like long walks", "subj-stays", actor="ben")
    mine = acme.remember("Ben likes long walks", evidence=[second], purposes=["converse"]).memory_id
    acme.remember("Ana's middle name", evidence=[first], purposes=["converse"])
    with conninfo.connect(user="pgrecall_acme_worker") as worker:
        jobs = {r[0]: r for r in worker.execute("select * from acme.claim_embedding_jobs('w1', 10)")}
        assert "zqflight" in jobs[mine][2]
        acme_admin.erase({"data_subject": "subj-flight"}, reason="request", actor="dpo")
        vector = "[" + ",".join(["0.05"] * 384) + "]"
        stored = worker.execute("select acme.complete_embedding_jobs('w1', %s, %s, %s, %s, %s)",
                                ([mine], [jobs[mine][1]], [vector], jobs[mine][3], jobs[mine][4])).fetchone()[0]
    assert stored == 0
    assert stored_vector(db, mine) is None
    assert "zqflight" not in db.execute("select input from acme.claim_embedding_jobs('w2', 10) "
                                        "where memory_id = %s", (mine,)).fetchone()[0]
