"""The seven operations' contracts (recall aside), through the driver as the app role."""

import pytest

from conftest import table_counts
from pgrecall import errors
from pgrecall.driver import AboutEntity


def said(mem, text, actor="ana", role="user", scope="default"):
    return mem.append(text, role=role, actor=actor, scope=scope)


def test_append_returns_contiguous_offsets_per_scope(acme):
    assert [said(acme, f"line {i}") for i in range(3)] == [1, 2, 3]
    assert acme.append("elsewhere", role="user", scope="other", scopes=["default", "other"]) == 1
    assert acme.watermark() == 3
    assert acme.watermark("other", scopes=["other"]) == 1


def test_remember_links_the_observation_that_stated_it(acme, db):
    off = said(acme, "I am vegetarian.")
    r = acme.remember("Ana is vegetarian", evidence=[off], purposes=["converse", "personalize"], about=["Ana"])
    assert r.created and r.reason is None
    rec = acme.read(r.memory_id, purpose="personalize")
    assert rec.body == "Ana is vegetarian" and rec.origin == "told" and rec.revision == 1
    assert rec.purposes == ["converse", "personalize"] and rec.audience is None and rec.created_by == "bot"
    assert [(o.offset, o.actor, o.source_role, o.text) for o in rec.provenance.observations] == [
        (off, "ana", "user", "I am vegetarian.")]
    assert rec.provenance.about == [AboutEntity("Ana", None)]
    links = db.execute("select link_type, target_observation_id is not null from acme.memory_link where memory_id = %s "
                       "order by link_type", (r.memory_id,)).fetchall()
    assert links == [("about", False), ("derived_from", True)]


@pytest.mark.parametrize("text,reason", [
    ("", "empty"),
    ("   \n\t ", "empty"),
    (None, "empty"),
    ("?!... --", "no_content"),
    ("Does Ana eat fish?", "question"),
])
def test_remember_of_empty_or_ambiguous_input_is_a_noop_with_a_reason(acme, db, text, reason):
    off = said(acme, "something was said")
    before = table_counts(db)
    r = acme.remember(text, evidence=[off], purposes=["converse"])
    assert (r.memory_id, r.status) == (None, "noop") and r.reason.startswith(reason)
    assert table_counts(db) == before


def test_a_statement_followed_by_a_question_is_remembered(acme):
    off = said(acme, "I adopted a cat last week! Have you ever had one?")
    assert acme.remember("Ana adopted a cat last week! Has Sage ever had one?", evidence=[off],
                         purposes=["converse"]).created
    for question in ("Is it a cat? Or a dog?", "Really?", '"Is that so?"'):
        r = acme.remember(question, evidence=[off], purposes=["converse"])
        assert r.status == "noop" and r.reason.startswith("question"), question


def test_remember_without_evidence_is_a_noop(acme, db):
    before = table_counts(db)
    r = acme.remember("Ana likes tea", evidence=[], purposes=["converse"])
    assert r.status == "noop" and r.reason.startswith("no_evidence")
    assert table_counts(db) == before


def test_remember_twice_returns_the_existing_memory(acme, db):
    off = said(acme, "I like tea")
    first = acme.remember("Ana likes tea", evidence=[off], purposes=["converse"])
    before = table_counts(db)
    again = acme.remember("  ana   LIKES tea ", evidence=[off], purposes=["converse"])
    assert (again.memory_id, again.status) == (first.memory_id, "noop") and again.reason.startswith("duplicate")
    assert table_counts(db) == before
    # for a different audience it is a different memory
    assert acme.remember("Ana likes tea", evidence=[off], purposes=["converse"], audience="ana").created


def test_read_of_missing_or_invisible_memory_is_the_same_error(acme):
    off = said(acme, "my PIN is 1234")
    private = acme.remember("Ana's PIN is 1234", evidence=[off], purposes=["act"], audience="ana").memory_id
    with pytest.raises(errors.MemoryNotFound):
        acme.read(999999, purpose="act")
    with pytest.raises(errors.MemoryNotFound):
        acme.read(private, purpose="act", principal="ben")
    with pytest.raises(errors.MemoryNotFound):
        acme.read(private, purpose="converse", principal="ana")
    assert acme.read(private, purpose="act", principal="ana").body == "Ana's PIN is 1234"


def test_derive_intersects_purposes_and_audience_and_cites_sources(acme, db):
    o1, o2 = said(acme, "I run on Sundays"), said(acme, "I swim on Mondays")
    a = acme.remember("Ana runs on Sundays", evidence=[o1], purposes=["converse", "personalize", "act"]).memory_id
    b = acme.remember("Ana swims on Mondays", evidence=[o2], purposes=["personalize", "converse"], audience="ana").memory_id
    d = acme.derive([a, b], "Ana exercises twice a week", principal="ana")
    rec = acme.read(d, purpose="converse", principal="ana")
    assert rec.origin == "derived" and rec.purposes == ["converse", "personalize"] and rec.audience == "ana"
    assert [m.id for m in rec.provenance.memories] == [a, b]
    with pytest.raises(errors.MemoryNotFound):
        acme.read(d, purpose="converse", principal="ben")
    deps = db.execute("select array_agg(o.log_offset order by o.log_offset) from acme.projection_dependency d "
                      "join acme.observation o on o.id = d.observation_id where d.kind = 'memory' and d.row_key = %s",
                      (str(d),)).fetchone()[0]
    assert deps == [o1, o2]


def test_derive_with_no_common_purpose_is_refused_and_writes_nothing(acme, db):
    o = said(acme, "facts")
    a = acme.remember("fact one", evidence=[o], purposes=["act"]).memory_id
    b = acme.remember("fact two", evidence=[o], purposes=["review"]).memory_id
    before = table_counts(db)
    with pytest.raises(errors.EmptyIntersection):
        acme.derive([a, b], "both facts")
    assert table_counts(db) == before


def test_derive_across_scopes_is_refused(acme, db):
    both = ["default", "other"]
    a = acme.remember("fact here", evidence=[said(acme, "x")], purposes=["converse"]).memory_id
    o = acme.append("y", role="user", scope="other", scopes=both)
    b = acme.remember("fact there", evidence=[o], purposes=["converse"], scope="other", scopes=both).memory_id
    before = table_counts(db)
    with pytest.raises(errors.EmptyIntersection):
        acme.derive([a, b], "both", scopes=both)
    assert table_counts(db) == before


def test_derive_from_an_invisible_source_is_not_found(acme, db):
    o = said(acme, "secret")
    private = acme.remember("ben's secret", evidence=[o], purposes=["converse"], audience="ben").memory_id
    public = acme.remember("a public note", evidence=[o], purposes=["converse"]).memory_id
    before = table_counts(db)
    with pytest.raises(errors.MemoryNotFound):
        acme.derive([public, private], "leak", principal="ana")
    assert table_counts(db) == before


def test_correct_keeps_the_old_text_in_history(acme):
    m = acme.remember("Ana lives in Lisbn", evidence=[said(acme, "I live in Lisbon")], purposes=["converse"]).memory_id
    assert acme.correct(m, "Ana lives in Lisbon", revision=1, reason="typo") == 2
    rec = acme.read(m, purpose="converse")
    assert rec.body == "Ana lives in Lisbon" and rec.revision == 2
    assert [(h.revision, h.body, h.reason, h.changed_by) for h in rec.revisions] == [
        (1, "Ana lives in Lisbn", "typo", "bot")]
    with pytest.raises(errors.RevisionConflict):
        acme.correct(m, "stale write", revision=1)
    assert acme.read(m, purpose="converse").body == "Ana lives in Lisbon"


def test_supersede_replaces_and_points_to_the_new_memory(acme, db):
    m = acme.remember("Ana lives in Lisbon", evidence=[said(acme, "I live in Lisbon")], purposes=["converse"],
                      about=["Ana"]).memory_id
    moved = said(acme, "I moved to Porto")
    new = acme.supersede(m, "Ana lives in Porto", revision=1, evidence=[moved])
    with pytest.raises(errors.MemoryNotFound):
        acme.read(m, purpose="converse")
    old = acme.read(m, purpose="converse", include_superseded=True)
    assert old.superseded_by == new and old.valid.upper is not None
    cur = acme.read(new, purpose="converse")
    assert cur.body == "Ana lives in Porto" and cur.provenance.about == [AboutEntity("Ana", None)]
    assert [o.offset for o in cur.provenance.observations] == [moved]
    with pytest.raises(errors.MemoryNotLive):
        acme.correct(m, "edit history", revision=old.revision)
    with pytest.raises(errors.RevisionConflict):
        acme.supersede(new, "Ana lives in Faro", revision=7, evidence=[moved])
    faro = acme.supersede(new, "Ana lives in Faro", revision=1, evidence=[moved], about=["Ana", "Faro"])
    assert [a.entity for a in acme.read(faro, purpose="converse").provenance.about] == ["Ana", "Faro"]


def test_forget_needs_a_reason_and_hides_the_memory(acme, db):
    m = acme.remember("Ana's old number", evidence=[said(acme, "call me")], purposes=["act"]).memory_id
    before = table_counts(db)
    for reason in (None, "", "   "):
        with pytest.raises(errors.InvalidArgument):
            acme.forget(m, reason=reason)
    assert table_counts(db) == before
    assert acme.forget(m, reason="the user asked") == 2
    with pytest.raises(errors.MemoryNotFound):
        acme.read(m, purpose="act")
    with pytest.raises(errors.MemoryNotFound):  # a forgotten memory is invisible to everyone
        acme.forget(m, reason="again")
    row = db.execute("select invalidation_reason from acme.memory where id = %s", (m,)).fetchone()
    assert row == ("the user asked",)


def test_history_rows_are_append_only(acme, db):
    said(acme, "hello")
    import psycopg

    with pytest.raises(psycopg.Error) as info:
        db.execute("update acme.observation set body = 'rewritten'")
    assert info.value.sqlstate == "PR110"
