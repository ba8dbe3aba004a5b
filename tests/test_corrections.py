"""Corrections cite their evidence: it joins the memory's provenance and history, follows the role policy, and
erasing it undoes the correction."""

import pytest

from conftest import table_counts
from pgrecall import errors
from pgrecall.worker import Worker
from test_erasure import rows_mentioning
from test_memory_operations import said


def told(acme, text, evidence, about=("Ana",)):
    return acme.remember(text, evidence=evidence, purposes=["converse"], about=list(about)).memory_id


def test_the_evidence_joins_the_provenance_and_the_history(acme):
    first = said(acme, "My birthday is on March 3")
    m = told(acme, "Ana's birthday is on March 3", [first])
    fix = said(acme, "Correction: my birthday is March 13, not March 3")
    assert acme.correct(m, "Ana's birthday is on March 13", revision=1, evidence=[fix], reason="typo") == 2
    rec = acme.read(m, purpose="converse")
    # the proof points at the turn that corrected it, as well as at the one it came from
    assert [(o.offset, o.text, o.corrections) for o in rec.provenance.observations] == [
        (first, "My birthday is on March 3", []),
        (fix, "Correction: my birthday is March 13, not March 3", [2])]
    assert [(h.revision, h.body, h.reason, h.evidence) for h in rec.revisions] == [
        (1, "Ana's birthday is on March 3", "typo", [fix])]
    # a second correction citing the first turn again and a new one: no link twice, each revision recorded
    again = said(acme, "It's the 13th, really")
    assert acme.correct(m, "Ana's birthday is on March 13th", revision=2, evidence=[again, first, again]) == 3
    rec = acme.read(m, purpose="converse")
    assert [(o.offset, o.corrections) for o in rec.provenance.observations] == [
        (first, [3]), (fix, [2]), (again, [3])]
    assert [h.evidence for h in rec.revisions] == [[fix], [first, again]]
    # recall and the session bundle show the same provenance as read
    item = acme.recall("birthday", mode="lexical").items[0]
    assert item.memory_id == m and item.provenance == rec.provenance
    bundle = acme.session_bundle()
    assert [r.provenance for r in bundle.recent if r.id == m] == [rec.provenance]


def test_a_correction_without_evidence_cites_nothing(acme):
    m = told(acme, "Ana is vegeterian", [said(acme, "I am vegetarian")])
    assert acme.correct(m, "Ana is vegetarian", revision=1, evidence=[]) == 2
    rec = acme.read(m, purpose="converse")
    assert [o.corrections for o in rec.provenance.observations] == [[]]
    assert rec.revisions[0].evidence == []


def test_evidence_must_be_in_the_memorys_own_scope_and_a_refusal_writes_nothing(acme, db):
    m = told(acme, "Ana lives in Lisbon", [said(acme, "I live in Lisbon")])
    for i in range(3):
        acme.append(f"elsewhere {i}", role="user", actor="ana", scope="other", scopes=["default", "other"])
    before = table_counts(db)
    for evidence, scopes in (([7], ["default"]), ([3], ["default", "other"]), ([None], ["default"])):
        # offset 3 exists in scope other, which the caller may read, but the memory is in scope default
        with pytest.raises(errors.ObservationNotFound):
            acme.correct(m, "Ana lives in Porto", revision=1, evidence=evidence, scopes=scopes)
    assert table_counts(db) == before
    assert acme.read(m, purpose="converse").revision == 1


def test_an_assistants_words_alone_do_not_correct_a_persons_memory(acme, db):
    lisbon = said(acme, "I live in Lisbon")
    about_ana = told(acme, "Ana lives in Lisbon", [lisbon])
    # about no person, but what a user said
    pixel = told(acme, "Pixel eats fish", [said(acme, "Pixel eats fish")], about=["Pixel"])
    # what the assistant said, about a person (Ben, a human peer: any spelling of the name)
    promised = said(acme, "I will remind Ben about the dentist", actor="bot", role="assistant")
    about_ben = told(acme, "The assistant will remind Ben about the dentist", [promised], about=["BEN"])
    bot_says = said(acme, "Noted: Ana lives in Porto now, and Ben's dentist is on Friday", actor="bot",
                    role="assistant")
    before = table_counts(db)
    for m in (about_ana, pixel, about_ben):
        with pytest.raises(errors.RolePolicyViolation):
            acme.correct(m, "corrected on the assistant's word", revision=1, evidence=[bot_says])
    assert table_counts(db) == before
    # with the person's words among the evidence the correction stands
    moved = said(acme, "I moved to Porto")
    assert acme.correct(about_ana, "Ana lives in Porto", revision=1, evidence=[bot_says, moved]) == 2
    # the assistant's own note about no person may be corrected on its own words
    own = told(acme, "The assistant promised a recipe", [promised], about=[])
    assert acme.correct(own, "The assistant promised two recipes", revision=1, evidence=[bot_says]) == 2
    # a tool's result is not the assistant's word
    tool = said(acme, "calendar: Pixel's food order says fish", actor="bot", role="tool")
    assert acme.correct(pixel, "Pixel eats fish based food", revision=1, evidence=[tool]) == 2


def test_the_cli_corrects_citing_evidence(acme, conninfo):
    from test_install_paths import run_cli

    env = {"PGRECALL_DSN": conninfo.dsn(user="pgrecall_acme_app"), "PGRECALL_TENANT": "acme"}
    said(acme, "I drink green tea")
    acme.remember("Ana drinks green tea", evidence=[1], purposes=["converse"], about=["Ana"])
    fix = said(acme, "Actually, I drink black tea now")
    out = run_cli("correct", "--as", "ana", "1", "Ana drinks black tea", "--revision", "1", "--evidence", str(fix),
                  "--reason", "she said so", env=env).stdout
    assert "corrected memory 1 (revision 2), citing offset 2" in out
    shown = run_cli("read", "--as", "ana", "--purpose", "converse", "1", env=env).stdout
    assert "body:      Ana drinks black tea" in shown
    assert "from default#2 (ana, user): Actually, I drink black tea now [cited by the correction to revision 2]" in shown
    assert "revision 1 was: Ana drinks green tea (she said so; evidence default#2)" in shown
    stale = run_cli("correct", "--as", "ana", "1", "Ana drinks tea", "--revision", "1", env=env, check=False)
    assert stale.returncode == 5 and "is at revision 2, not 1" in stale.stderr  # EXIT_CONFLICT
    missing = run_cli("correct", "--as", "ana", "1", "Ana drinks tea", "--revision", "2", "--evidence", "9",
                      env=env, check=False)
    assert missing.returncode == 4 and "no observation at offset 9" in missing.stderr  # EXIT_NOT_FOUND


# -- erasure undoes corrections -------------------------------------------------------------

def subject_said(mem, text, subject, actor="ana"):
    return mem.append(text, role="user", actor=actor, data_subject_id=subject)


def erase_subject(admin, subject):
    """Erase one data subject's words; the receipt must show nothing of theirs left behind."""
    receipt = admin.erase({"data_subject": subject}, reason="asked", actor="dpo")
    assert set(receipt.residual.values()) == {0}, receipt
    return receipt


def corrected(acme, told_by, corrected_by):
    """A memory about Ana told from one turn and corrected citing another; each is (words, memory text, subject).

    Returns the two turns' offsets and the memory."""
    first = subject_said(acme, told_by[0], told_by[2])
    m = told(acme, told_by[1], [first])
    fix = subject_said(acme, corrected_by[0], corrected_by[2])
    acme.correct(m, corrected_by[1], revision=1, evidence=[fix])
    return first, fix, m


def only_in_the_log(found):
    """rows_mentioning() found the words in the log (the observation and its passage) and nowhere else."""
    return set(found) == {"observation"} | {t for t in found if t.startswith("passage")}


def test_erasing_a_corrections_evidence_undoes_it(acme, db, acme_admin):
    first = subject_said(acme, "My birthday is on March 3", "s-orig")
    m = told(acme, "Ana's birthday is on March 3", [first])
    fix = subject_said(acme, "Correction: it is March zqthirteen", "s-fix")
    acme.correct(m, "Ana's birthday is on March zqthirteen", revision=1, evidence=[fix], reason="zqreason")
    receipt = erase_subject(acme_admin, "s-fix")
    erased = receipt.rows_erased
    assert (erased["memories_reverted"], erased["memory_correction_evidence"], erased["memory_revision"],
            erased["memory_link"], erased["memory"]) == (1, 1, 1, 1, 0)
    rec = acme.read(m, purpose="converse")
    # the text before the correction, at a new revision; the correction's record (its reason too) is gone
    assert (rec.body, rec.revision, rec.revisions) == ("Ana's birthday is on March 3", 3, [])
    assert [o.offset for o in rec.provenance.observations] == [first]
    assert rows_mentioning(db, "zqthirteen") == {} and rows_mentioning(db, "zqreason") == {}
    # revision numbers never repeat: a writer still holding revision 2 (the erased text) loses
    with pytest.raises(errors.RevisionConflict):
        acme.correct(m, "Ana's birthday is on March 30", revision=2)


def test_erasing_a_middle_corrections_evidence_undoes_it_and_every_later_one(acme, db, acme_admin):
    first = subject_said(acme, "My birthday is March 3", "s-0")
    m = told(acme, "Ana's birthday is March 3", [first])
    two = subject_said(acme, "It is March zqtwo", "s-1")
    acme.correct(m, "Ana's birthday is March zqtwo", revision=1, evidence=[two])
    three = subject_said(acme, "And the party is zqthree", "s-2")
    acme.correct(m, "Ana's birthday is March zqtwo; party zqthree", revision=2, evidence=[three])
    acme.correct(m, "Ana's birthday is March zqtwo; party zqthree, zqfour", revision=3)   # no evidence
    five = subject_said(acme, "Bring zqfive", "s-3")
    acme.correct(m, "Ana's birthday is March zqtwo; party zqthree, zqfour; zqfive", revision=4, evidence=[five])

    receipt = erase_subject(acme_admin, "s-2")
    # revisions 3, 4 and 5 were built on what offset `three` justified: back to revision 2's text
    rec = acme.read(m, purpose="converse")
    assert (rec.body, rec.revision) == ("Ana's birthday is March zqtwo", 6)
    assert [(h.revision, h.evidence) for h in rec.revisions] == [(1, [two])]
    assert [(o.offset, o.corrections) for o in rec.provenance.observations] == [(first, []), (two, [2])]
    assert receipt.rows_erased["memory_revision"] == 3 and receipt.rows_erased["memory_correction_evidence"] == 2
    for gone in ("zqthree", "zqfour", "zqfive"):
        assert rows_mentioning(db, gone) == {} or only_in_the_log(rows_mentioning(db, gone)), gone
    # a later correction's own evidence stays in the log and can be cited again
    assert acme.correct(m, "Ana's birthday is March zqtwo; bring zqfive", revision=6, evidence=[five]) == 7


def test_erasing_the_original_evidence_too_deletes_the_memory(acme, db, acme_admin):
    _, _, m = corrected(acme, ("I am zqorig", "Ana is zqorig", "s-both"), ("I mean zqfixed", "Ana is zqfixed", "s-both"))
    receipt = erase_subject(acme_admin, "s-both")
    assert receipt.rows_erased["memory"] == 1 and receipt.rows_erased["memories_reverted"] == 0
    with pytest.raises(errors.MemoryNotFound):
        acme.read(m, purpose="converse")
    assert rows_mentioning(db, "zqorig") == {} and rows_mentioning(db, "zqfixed") == {}


def test_erasing_only_the_original_evidence_deletes_the_memory_and_leaves_the_correcting_words(acme, db, acme_admin):
    _, _, m = corrected(acme, ("I am zqfirst", "Ana is zqfirst", "s-first"),
                        ("I mean zqsecond", "Ana is zqsecond", "s-second"))
    receipt = erase_subject(acme_admin, "s-first")
    assert receipt.rows_erased["memory_correction_evidence"] == 1
    with pytest.raises(errors.MemoryNotFound):
        acme.read(m, purpose="converse")
    assert only_in_the_log(rows_mentioning(db, "zqsecond"))


def test_a_superseded_or_forgotten_memory_returns_to_its_earlier_text(acme, db, acme_admin):
    _, fix, m = corrected(acme, ("I live in Lisbon", "Ana lives in Lisbon", "s-1"),
                          ("In zqalfama, Lisbon", "Ana lives in zqalfama, Lisbon", "s-fix"))
    moved = subject_said(acme, "I moved to Porto", "s-2")
    successor = acme.supersede(m, "Ana lives in Porto", revision=2, evidence=[moved])
    note = told(acme, "Ana likes the river", [subject_said(acme, "I like the river", "s-3")])
    acme.correct(note, "Ana likes the river in zqalfama", revision=1, evidence=[fix])
    acme.forget(note, reason="asked")

    receipt = erase_subject(acme_admin, "s-fix")
    assert receipt.rows_erased["memories_reverted"] == 2
    old = acme.read(m, purpose="converse", include_superseded=True)
    assert (old.body, old.superseded_by, old.revision) == ("Ana lives in Lisbon", successor, 4)
    assert acme.read(successor, purpose="converse").body == "Ana lives in Porto"
    assert db.execute("select body, invalidated_at is not null from acme.memory where id = %s",
                      (note,)).fetchone() == ("Ana likes the river", True)
    assert rows_mentioning(db, "zqalfama") == {}


def test_what_was_built_on_the_corrected_text_goes_and_what_came_before_stays(acme, db, acme_admin):
    m = told(acme, "Ana cooks pasta", [subject_said(acme, "I cook pasta", "s-1")])
    veg = told(acme, "Ana is vegetarian", [subject_said(acme, "I am vegetarian", "s-2")])
    before = acme.derive([m, veg], "Ana cooks vegetarian pasta")
    fix = subject_said(acme, "zqrisotto, not pasta", "s-fix")
    acme.correct(m, "Ana cooks zqrisotto", revision=1, evidence=[fix])
    after = acme.derive([m, veg], "Ana cooks vegetarian zqrisotto")
    erase_subject(acme_admin, "s-fix")
    with pytest.raises(errors.MemoryNotFound):
        acme.read(after, purpose="converse")
    assert acme.read(before, purpose="converse").body == "Ana cooks vegetarian pasta"
    assert acme.read(m, purpose="converse").body == "Ana cooks pasta"
    assert rows_mentioning(db, "zqrisotto") == {}


def test_an_undone_correction_is_embedded_again_and_leaves_the_term_statistics(acme, db, conninfo, acme_admin):
    worker = Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker"))
    m = told(acme, "Ana's birthday is on March third", [subject_said(acme, "My birthday is March third", "s-1")])
    born = told(acme, "Ana was born in March in Lisbon", [subject_said(acme, "I was born in Lisbon in March", "s-2")])
    fix = subject_said(acme, "It is the zqthirteenth", "s-fix")
    acme.correct(m, "Ana's birthday is on March zqthirteenth", revision=1, evidence=[fix])
    worker.drain()
    db.execute("select * from acme.refresh_term_stats()")
    stats = lambda: dict(db.execute("select term, df from acme.term_stat").fetchall())
    assert stats()["zqthirteenth"] == 1 and "third" not in stats() and stats()["march"] == 2
    # the vector of the corrected text came from the correction's evidence too
    fix_id = db.execute("select id from acme.observation where log_offset = %s", (fix,)).fetchone()[0]
    assert db.execute("select count(*) from acme.projection_dependency where kind = 'memory_embedding' "
                      "and row_key = %s and observation_id = %s", (str(m), fix_id)).fetchone()[0] == 1

    erase_subject(acme_admin, "s-fix")
    assert "zqthirteenth" not in stats() and stats()["third"] == 1 and stats()["march"] == 2
    # the restored text waits for a new vector, and gets one; so does the memory whose embedded text (input
    # version 2: its evidence with the turns around it) held the erased turn, the one after its evidence
    assert db.execute("select count(*) from acme.memory_embedding where memory_id = %s", (m,)).fetchone()[0] == 0
    assert [r[0] for r in db.execute("select memory_id from acme.embedding_job order by 1")] == sorted([m, born])
    assert Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker")).drain().stored == 2
    assert db.execute("select count(*) from acme.memory_embedding where memory_id = %s", (m,)).fetchone()[0] == 1
    assert rows_mentioning(db, "zqthirteenth") == {}


def test_a_memory_whose_earlier_text_is_gone_goes(acme, db, acme_admin):
    """The rule's last case, which the registry never produces on its own (the kept text and the correction
    are registered together): here the kept text is deleted by hand, as a damaged history would be."""
    m = told(acme, "Ana is zqkept", [subject_said(acme, "I am zqkept", "s-1")])
    derived = acme.derive([m], "Ana is zqkept, in short")
    fix = subject_said(acme, "I am zqfix", "s-fix")
    acme.correct(m, "Ana is zqfix", revision=1, evidence=[fix])
    db.execute("delete from acme.memory_revision where memory_id = %s", (m,))
    erase_subject(acme_admin, "s-fix")
    for gone in (m, derived):
        with pytest.raises(errors.MemoryNotFound):
            acme.read(gone, purpose="converse")
    assert rows_mentioning(db, "zqfix") == {}


def test_a_term_that_only_the_undone_text_and_a_deleted_memory_used_leaves_the_statistics(acme, db, acme_admin):
    """Found by the property test: the deleted memory must not vouch for the term the undone text dropped."""
    theirs = subject_said(acme, "I am zqshared", "s-gone")
    mine = told(acme, "Ben is zqown", [subject_said(acme, "Ben is zqown", "s-kept", actor="ben")], about=["Ben"])
    told(acme, "Ana is zqshared", [theirs])
    acme.correct(mine, "Ben is zqown, like zqshared", revision=1, evidence=[theirs])
    db.execute("select * from acme.refresh_term_stats()")
    erase_subject(acme_admin, "s-gone")
    assert db.execute("select count(*) from acme.term_stat where term = 'zqshared'").fetchone()[0] == 0
    assert acme.read(mine, purpose="converse").body == "Ben is zqown"


def test_a_term_counted_for_a_memory_forgotten_since_the_snapshot_leaves_with_the_undone_text(acme, db, acme_admin):
    mine = told(acme, "Ana likes tea", [subject_said(acme, "I like tea", "s-1")])
    fix = subject_said(acme, "Green zqmatcha tea", "s-fix")
    acme.correct(mine, "Ana likes zqmatcha tea", revision=1, evidence=[fix])
    other = told(acme, "Ben tried zqmatcha once", [subject_said(acme, "I tried zqmatcha", "s-2", actor="ben")],
                 about=["Ben"])
    db.execute("select * from acme.refresh_term_stats()")
    acme.forget(other, reason="asked")   # the statistics still count it
    erase_subject(acme_admin, "s-fix")
    assert db.execute("select count(*) from acme.term_stat where term = 'zqmatcha'").fetchone()[0] == 0


def test_the_history_is_a_declared_type_in_sql_and_python(acme, db):
    """read()'s revisions are memory_text_revision[] (migration 0048), not a JSON array: SQL reads a field of an
    earlier text by name, and Python gets the generated dataclass, its time a datetime and its evidence offsets."""
    from datetime import datetime

    from pgrecall.driver import MemoryTextRevision

    first = said(acme, "My birthday is on March 3")
    m = told(acme, "Ana's birthday is on March 3", [first])
    fix = said(acme, "Correction: my birthday is March 13, not March 3")
    acme.correct(m, "Ana's birthday is on March 13", revision=1, evidence=[fix], reason="typo")
    row = db.execute("""select (r.revisions[1]).body, (r.revisions[1]).evidence, (r.revisions[1]).changed_by,
                               pg_typeof(r.revisions)::text
                          from acme.read('bot', '{default}', %s, 'converse') r""", (m,)).fetchone()
    assert row == ("Ana's birthday is on March 3", [fix], "bot", "acme.memory_text_revision[]")
    [earlier] = acme.read(m, purpose="converse").revisions
    assert isinstance(earlier, MemoryTextRevision) and isinstance(earlier.changed_at, datetime)
    assert (earlier.revision, earlier.kind, earlier.confidence, earlier.evidence) == (1, "note", 1.0, [fix])
