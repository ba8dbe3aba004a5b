"""Duplicates: the database proposes pairs, a person decides (issue #15).

Vectors come from the real model through the real worker (logged in as the worker role); the pairs are
checked against the eligibility rule computed here, independently of the SQL.
"""

from __future__ import annotations

import itertools
import threading

import psycopg
import pytest

import pgrecall
from conftest import table_counts
from pgrecall import errors
from pgrecall.embedder import get_embedder, to_literal
from pgrecall.worker import Worker

PEANUTS = "Ben is severely allergic to peanuts"
PEANUTS_AGAIN = "Ben has a severe peanut allergy"


def said(mem, text, actor="ana", **kw):
    return mem.append(text, role="user", actor=actor, **kw)


def remembered(mem, text, *, actor="ana", purposes=("converse",), audience=None, scope="default", principal="bot",
               scopes=("default",)):
    offset = said(mem, text, actor=actor, scope=scope, scopes=list(scopes))
    return mem.remember(text, evidence=[offset], purposes=list(purposes), audience=audience, scope=scope,
                        principal=principal, scopes=list(scopes)).memory_id


@pytest.fixture
def embed(conninfo):
    """Runs the embedding worker (the real model) as the worker role until the queue is empty."""
    return lambda: Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker")).drain()


def pairs_of(mem, **kw):
    return [(p.a.id, p.b.id) for p in mem.duplicate_proposals(**kw).pairs]


def test_two_near_duplicates_are_proposed_side_by_side_with_their_evidence(acme, embed):
    a = remembered(acme, PEANUTS, actor="ben")
    other = remembered(acme, "Ana works night shifts as a nurse")
    b = remembered(acme, PEANUTS_AGAIN, actor="ana")
    embed()
    answer = acme.duplicate_proposals()
    assert [(p.a.id, p.b.id) for p in answer.pairs] == [(a, b)]  # the older one is a; the unrelated one pairs with none
    [pair] = answer.pairs
    assert pair.rank == 1 and 0.8 <= pair.cosine < 1
    assert (pair.a.body, pair.b.body) == (PEANUTS, PEANUTS_AGAIN)
    assert (pair.a.revision, pair.b.revision, pair.a.kind) == (1, 1, "note")
    assert pair.a.created_at <= pair.b.created_at
    [turn] = pair.a.provenance.observations
    assert (turn.actor, turn.source_role, turn.text) == ("ben", "user", PEANUTS) and turn.occurred_at
    assert pair.b.provenance.observations[0].actor == "ana"
    assert pair.b_may_replace_a and pair.a_may_replace_b
    meta = answer.meta
    assert (meta.in_window, meta.embedded, meta.pairs, meta.decided, meta.window) == (3, 3, 1, 0, 500)
    assert meta.threshold == 0.8 and meta.empty_reason is None
    assert other not in (a, b)


def test_memories_said_in_neighbouring_turns_are_compared_by_what_they_say(acme, embed, db):
    """The recall vector (input version 2, the default) embeds the turns around a memory's evidence: two
    memories stated one after the other then look alike, and a restatement made elsewhere does not. Proposals
    compare the memories' own texts (found on the demo conversation: a licence and a vet at 0.85)."""
    licence = remembered(acme, "Ben must renew his carpentry licence before September", actor="ben")
    vet = remembered(acme, "Pixel's vet in Porto is Dr. Costa")
    said(acme, "We had pasta for dinner and watched a film.")
    peanuts = remembered(acme, PEANUTS, actor="ben")
    said(acme, "The tram to the hospital was late again this morning.")
    peanuts_again = remembered(acme, PEANUTS_AGAIN)
    embed()
    assert db.execute("select input_version from acme.memory_embedding").fetchall() == [(2,)] * 4
    assert pairs_of(acme) == [(peanuts, peanuts_again)]
    assert licence and vet


def test_a_vector_stored_without_the_memorys_own_text_is_queued_again(acme, embed, acme_admin, conninfo, db):
    """An older worker (or a row embedded before migration 0018) stores no text vector: the memory is in the
    window but in no pair, and a rebuild queues it."""
    a = remembered(acme, PEANUTS)
    b = remembered(acme, PEANUTS_AGAIN)
    with conninfo.connect(user="pgrecall_acme_worker") as worker:
        jobs = worker.execute("select * from acme.claim_embedding_jobs('old', 10)").fetchall()
        assert [j[5] for j in jobs] == [PEANUTS, PEANUTS_AGAIN]  # the memories' own texts, for the new workers
        vectors = [to_literal(v) for v in get_embedder().embed([j[2] for j in jobs])]
        worker.execute("select acme.complete_embedding_jobs('old', %s, %s, %s, %s, %s)",
                       ([j[0] for j in jobs], [j[1] for j in jobs], vectors, jobs[0][3], jobs[0][4]))
    answer = acme.duplicate_proposals()
    assert answer.pairs == [] and answer.meta.empty_reason == "no_embeddings"
    assert answer.meta.missing_embeddings == 2
    acme_admin.rebuild_embeddings()
    assert {r[0] for r in db.execute("select memory_id from acme.embedding_job")} == {a, b}
    embed()
    assert pairs_of(acme) == [(a, b)]


def test_malformed_text_vectors_store_nothing(acme, conninfo, db):
    remembered(acme, PEANUTS)
    good = to_literal([0.05] * 384)
    with conninfo.connect(user="pgrecall_acme_worker") as worker:
        (jid, gen, _, model, version, _), = worker.execute("select * from acme.claim_embedding_jobs('w', 10)").fetchall()
        call = "select acme.complete_embedding_jobs('w', %s, %s, %s, %s, %s, %s)"
        for text_vectors, sqlstate in (([good, good], "PR107"), (["[1,2,3]"], "PR154")):  # length, dimensions
            with pytest.raises(psycopg.Error) as info:
                worker.execute(call, ([jid], [gen], [good], model, version, text_vectors))
            assert info.value.sqlstate == sqlstate
        assert db.execute("select count(*) from acme.memory_embedding").fetchone()[0] == 0
        assert worker.execute(call, ([jid], [gen], [good], model, version, [good])).fetchone()[0] == 1
    assert db.execute("select text_embedding is not null from acme.memory_embedding").fetchone()[0]


def test_an_empty_list_says_why(acme, embed, acme_admin):
    def reason():
        return acme.duplicate_proposals().meta.empty_reason

    assert reason() == "no_memories"
    a = remembered(acme, PEANUTS)
    assert reason() == "one_memory"
    unrelated = remembered(acme, "The car is a blue Renault Clio")
    assert reason() == "no_embeddings"
    assert acme.duplicate_proposals().meta.missing_embeddings == 2
    embed()
    answer = acme.duplicate_proposals()
    assert answer.meta.empty_reason == "below_threshold" and answer.pairs == []
    assert -1 <= answer.meta.closest < 0.8
    b = remembered(acme, PEANUTS_AGAIN)
    embed()
    assert pairs_of(acme) == [(a, b)]
    acme.decide_duplicate(a, b, "distinct", reason="two different allergy notes")
    assert reason() == "all_decided"
    assert unrelated


def test_the_tenant_settings_set_the_threshold_and_the_window(acme, embed, acme_admin):
    a = remembered(acme, PEANUTS)
    b = remembered(acme, PEANUTS_AGAIN)
    embed()
    cosine = acme.duplicate_proposals().pairs[0].cosine
    acme_admin.set_setting("duplicate_cosine", round(cosine + 0.01, 2))
    assert pairs_of(acme) == []
    acme_admin.set_setting("duplicate_cosine", round(cosine - 0.01, 2))
    assert pairs_of(acme) == [(a, b)]
    # a window of the two newest: a newer memory pushes a out of it
    acme_admin.set_setting("duplicate_window", 2)
    remembered(acme, "Pixel the beagle sees the vet every six months")
    embed()
    answer = acme.duplicate_proposals()
    assert answer.pairs == [] and answer.meta.in_window == 2


def test_keep_both_is_not_proposed_again_until_either_memory_changes(acme, embed, db):
    a = remembered(acme, PEANUTS)
    b = remembered(acme, PEANUTS_AGAIN)
    embed()
    d = acme.decide_duplicate(a, b, "distinct", reason="one is from Ben, one from his mother", revision_a=1,
                              revision_b=1)
    assert (d.decision, d.retired_memory, d.retired_revision) == ("distinct", None, None)
    assert pairs_of(acme) == []
    row = db.execute("""select d.memory_low, d.memory_high, d.revision_low, d.revision_high, d.decision, p.name,
                               d.decided_role, d.reason, d.cosine is not null
                          from acme.duplicate_decision d join acme.peer p on p.id = d.decided_by""").fetchone()
    assert row == (a, b, 1, 1, "distinct", "bot", "pgrecall_acme_app", "one is from Ben, one from his mother", True)
    # both memories are untouched
    assert acme.read(a, purpose="converse").revision == 1 and acme.read(b, purpose="converse").revision == 1
    # the same pair seen again (a second click, or a second reviewer) is refused
    with pytest.raises(errors.DuplicateDecided):
        acme.decide_duplicate(b, a, "supersede", reason="changed my mind", revision_a=1, revision_b=1)
    # a correction is something new to look at: the pair comes back
    acme.correct(a, "Ben is severely allergic to peanuts and to cashews", revision=1)
    embed()
    assert pairs_of(acme) == [(a, b)]
    assert acme.duplicate_proposals().pairs[0].a.revision == 2


def test_supersede_leaves_one_current_memory_and_recall_returns_only_it(acme, embed, db):
    a = remembered(acme, PEANUTS)
    b = remembered(acme, PEANUTS_AGAIN)
    embed()
    d = acme.decide_duplicate(a, b, "supersede", reason="the same allergy, said twice", revision_a=1, revision_b=1)
    assert (d.decision, d.retired_memory, d.retired_revision) == ("supersede", a, 2)
    with pytest.raises(errors.MemoryNotFound):
        acme.read(a, purpose="converse")
    old = acme.read(a, purpose="converse", include_superseded=True)
    assert old.superseded_by == b and old.valid.upper is not None
    assert acme.read(b, purpose="converse").revision == 1
    embed()
    found = acme.recall("Is Ben allergic to peanuts?")
    assert [i.memory_id for i in found.items if i.item == "memory"] == [b]
    assert pairs_of(acme) == [] and acme.duplicate_proposals().meta.in_window == 1
    assert db.execute("select decision, retired_memory from acme.duplicate_decision").fetchall() == [("supersede", a)]


def test_forget_forgets_a_and_keeps_b(acme, embed):
    a = remembered(acme, PEANUTS)
    b = remembered(acme, PEANUTS_AGAIN)
    embed()
    d = acme.decide_duplicate(a, b, "forget", reason="said twice")
    assert (d.retired_memory, d.retired_revision) == (a, 2)
    with pytest.raises(errors.MemoryNotFound):
        acme.read(a, purpose="converse", include_superseded=True)
    assert acme.read(b, purpose="converse").body == PEANUTS_AGAIN
    assert pairs_of(acme) == []


def test_a_replacement_must_reach_everyone_the_replaced_memory_reaches(acme, embed, db):
    wide = remembered(acme, PEANUTS, purposes=("converse", "act"))
    private = remembered(acme, PEANUTS_AGAIN, audience="ana", principal="ana", purposes=("converse", "act"))
    embed()
    [pair] = acme.duplicate_proposals(principal="ana").pairs
    assert (pair.a.id, pair.b.id, pair.a.audience, pair.b.audience) == (wide, private, None, "ana")
    assert not pair.b_may_replace_a and pair.a_may_replace_b
    before = table_counts(db)
    with pytest.raises(errors.NarrowerReplacement):  # ben would lose the allergy
        acme.decide_duplicate(wide, private, "supersede", reason="same", principal="ana")
    assert table_counts(db) == before
    acme.decide_duplicate(private, wide, "supersede", reason="everyone should know", principal="ana")
    assert acme.read(wide, purpose="act", principal="ben").body == PEANUTS
    # fewer purposes is narrower too
    act_only = remembered(acme, "Ben must never be given peanuts", purposes=("act",))
    both = remembered(acme, "Ben must not be given any peanuts", purposes=("act", "converse"))
    embed()
    [pair] = [p for p in acme.duplicate_proposals().pairs if {p.a.id, p.b.id} == {act_only, both}]
    assert pair.b_may_replace_a and not pair.a_may_replace_b
    with pytest.raises(errors.NarrowerReplacement):
        acme.decide_duplicate(both, act_only, "supersede", reason="same")


# -- who sees which pair ---------------------------------------------------------------------------------------------

# Near-paraphrases of one statement; with the threshold lowered to 0.5 every two of them are similar, so which
# pairs a principal is shown depends on the eligibility rule alone.
VARIANTS = [
    "Ben is severely allergic to peanuts",
    "Ben has a severe peanut allergy",
    "Ben is allergic to peanuts",
    "Ben has a serious allergy to peanuts",
    "Ben is seriously allergic to peanuts",
    "Ben's peanut allergy is severe",
    "Ben cannot eat peanuts: a severe allergy",
    "Peanuts are dangerous for Ben, he is allergic",
]
# (audience, purposes, scope, state)
ROWS = [
    (None, ("converse",), "default", "live"),
    ("ana", ("converse",), "default", "live"),
    (None, ("act",), "default", "live"),
    (None, ("act", "converse"), "default", "live"),
    ("ben", ("converse", "personalize"), "default", "live"),
    (None, ("converse",), "other", "live"),
    (None, ("converse",), "default", "forgotten"),
    ("ana", ("personalize",), "default", "live"),
]


def visible(row, principal, authorised):
    """The design's rule, written out: in the authorised scopes, for this principal's audience, live."""
    audience, _, scope, state = row
    return scope in authorised and audience in (None, principal) and state == "live"


def test_a_principal_sees_a_pair_only_if_it_may_see_both_for_a_common_purpose(acme, embed, acme_admin):
    acme_admin.set_setting("duplicate_cosine", 0.5)
    both = ["default", "other"]
    ids = []
    for text, row in zip(VARIANTS, ROWS):
        audience, purposes, scope, state = row
        mid = remembered(acme, text, purposes=purposes, audience=audience, scope=scope, scopes=both,
                         principal=audience or "bot")
        if state == "forgotten":
            acme.forget(mid, reason="matrix", scopes=both)
        ids.append(mid)
    embed()
    checked = 0
    for principal, authorised in itertools.product(["ana", "ben", "bot"], [("default",), ("default", "other")]):
        want = {(ids[i], ids[j]) for i, j in itertools.combinations(range(len(ROWS)), 2)
                if visible(ROWS[i], principal, authorised) and visible(ROWS[j], principal, authorised)
                and set(ROWS[i][1]) & set(ROWS[j][1])}
        got = set(pairs_of(acme, principal=principal, scopes=list(authorised), limit=1000))
        assert got == want, (principal, authorised)
        checked += len(want)
    assert checked > 10
    # ana may see rows 0 and 1 (converse) but not row 4 (ben's): deciding about it is "not found"
    with pytest.raises(errors.MemoryNotFound):
        acme.decide_duplicate(ids[0], ids[4], "distinct", reason="x", principal="ana")
    # rows 0 (converse) and 2 (act) are both visible to ana, for no common purpose
    with pytest.raises(errors.NotAPair):
        acme.decide_duplicate(ids[0], ids[2], "distinct", reason="x", principal="ana")


# -- two reviewers at once -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("first, second", [("supersede", "distinct"), ("distinct", "forget"),
                                           ("forget", "supersede")])
def test_two_reviewers_deciding_one_pair_at_once_one_wins_cleanly(acme, embed, conninfo, db, first, second):
    a = remembered(acme, PEANUTS)
    b = remembered(acme, PEANUTS_AGAIN)
    embed()
    call = "select * from acme.decide_duplicate('{who}', array['default'], %s, %s, %s, %s, %s, %s)"
    with conninfo.connect(user="pgrecall_acme_app", autocommit=False) as one, \
            conninfo.connect(user="pgrecall_acme_app") as two:
        one.execute(call.format(who="ana"), (a, b, first, "first reviewer", 1, 1))  # holds its locks, uncommitted
        outcome = {}

        def second_reviewer():
            try:
                # the other way round: locks are taken in id order, so this waits instead of deadlocking
                two.execute(call.format(who="ben"), (b, a, second, "second reviewer", 1, 1))
                outcome["result"] = "decided"
            except psycopg.Error as exc:
                outcome["result"] = exc.sqlstate

        thread = threading.Thread(target=second_reviewer)
        thread.start()
        thread.join(1.0)
        assert thread.is_alive(), "the second reviewer should wait for the first"
        one.commit()
        thread.join(10)
    assert outcome["result"] == "PR180"
    rows = db.execute("select decision, p.name from acme.duplicate_decision d join acme.peer p on p.id = d.decided_by"
                      ).fetchall()
    assert rows == [(first, "ana")]
    live = {r[0] for r in db.execute("select id from acme.memory where superseded_by is null and invalidated_at is null")}
    assert live == ({a, b} if first == "distinct" else {b})


def test_a_reviewer_who_saw_an_older_revision_gets_a_revision_conflict(acme, embed, db):
    a = remembered(acme, PEANUTS)
    b = remembered(acme, PEANUTS_AGAIN)
    embed()
    acme.correct(b, "Ben has a severe peanut allergy (an EpiPen is in his bag)", revision=1)
    before = table_counts(db)
    with pytest.raises(errors.RevisionConflict):
        acme.decide_duplicate(a, b, "supersede", reason="same", revision_a=1, revision_b=1)
    assert table_counts(db) == before


def test_bad_decisions_are_refused_and_write_nothing(acme, embed, db):
    a = remembered(acme, PEANUTS)
    b = remembered(acme, PEANUTS_AGAIN)
    embed()
    before = table_counts(db)
    for kwargs in ({"decision": "merge", "reason": "x"}, {"decision": None, "reason": "x"},
                   {"decision": "distinct", "reason": "  "}, {"decision": "distinct", "reason": None},
                   {"decision": "distinct", "reason": "x" * 2001}):
        with pytest.raises(errors.InvalidArgument):
            acme.decide_duplicate(a, b, kwargs["decision"], reason=kwargs["reason"])
    with pytest.raises(errors.InvalidArgument):
        acme.decide_duplicate(a, a, "distinct", reason="x")
    with pytest.raises(errors.InvalidArgument):
        acme.decide_duplicate(a, 0, "distinct", reason="x")
    with pytest.raises(errors.MemoryNotFound):
        acme.decide_duplicate(a, 99999, "distinct", reason="x")
    for limit in (0, 1001, None):
        with pytest.raises(errors.InvalidArgument):
            acme.duplicate_proposals(limit=limit)
    with pytest.raises(errors.ScopeNotAuthorised):
        acme.duplicate_proposals(scopes=["nope"])
    with pytest.raises(errors.UnknownPeer):
        acme.duplicate_proposals(principal="mallory")
    assert table_counts(db) == before


# -- erasure ---------------------------------------------------------------------------------------------------------

def test_erasing_a_memorys_source_erases_the_decisions_about_it(acme, embed, acme_admin, db):
    a = remembered(acme, PEANUTS, actor="ben")
    b = remembered(acme, PEANUTS_AGAIN, actor="ana")
    embed()
    acme.decide_duplicate(a, b, "distinct", reason="Ben's words and Ana's words")
    offset = acme.read(b, purpose="converse").provenance.observations[0].offset
    receipt = acme_admin.erase({"observation": {"scope": "default", "offset": offset}}, reason="asked", actor="dpo")
    assert receipt.rows_erased["duplicate_decision"] == 1 and set(receipt.residual.values()) == {0}
    assert db.execute("select count(*) from acme.duplicate_decision").fetchone()[0] == 0


def test_erasing_a_peer_erases_decisions_about_its_private_memories(acme, embed, acme_admin, db):
    """A memory private to ana, stated by ben, is doomed by erasing ana though no erased observation is its
    source: the decision that names it must go first (it references the memory)."""
    wide = remembered(acme, PEANUTS, actor="ben")
    private = remembered(acme, PEANUTS_AGAIN, actor="ben", audience="ana", principal="ana")
    said(acme, "hello", actor="ana")
    embed()
    acme.decide_duplicate(wide, private, "distinct", reason="ana keeps her own note", principal="ana")
    receipt = acme_admin.erase({"peer": "ana"}, reason="ana left", actor="dpo")
    assert set(receipt.residual.values()) == {0}
    assert db.execute("select count(*) from acme.duplicate_decision").fetchone()[0] == 0
    assert db.execute("select count(*) from acme.memory where id = %s", (private,)).fetchone()[0] == 0
    assert acme.read(wide, purpose="converse").body == PEANUTS


def test_only_the_app_role_reviews(acme, conninfo):
    for role in ("worker", "admin"):
        with pgrecall.connect(conninfo.dsn(user=f"pgrecall_acme_{role}"), tenant="acme", principal="bot",
                              scopes=["default"]) as mem:
            with pytest.raises(errors.NotPermitted):
                mem.duplicate_proposals()
            with pytest.raises(errors.NotPermitted):
                mem.decide_duplicate(1, 2, "distinct", reason="x")
