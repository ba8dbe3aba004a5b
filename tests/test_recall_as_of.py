"""Recall as of a past moment (recall's p_as_of, plpgsql/recall/as_of.sql): the memory as it stood then.

A story with known moments: memories written, then corrected, superseded, forgotten, erased and added to,
and facts asserted and retracted. As of each moment, every mode answers with exactly the memories of that
moment, in the text they had; today's rules still decide who may see what, and what was erased stays
erased."""

import time

import pytest

from pgrecall import errors
from test_recall import embed_all, embedder  # noqa: F401 (a fixture)

EVERY = "quokka"  # a word every memory of the story holds, so that one lexical query finds them all


def moment(db):
    """A moment strictly between two writes of the story."""
    time.sleep(0.02)
    t = db.execute("select clock_timestamp()").fetchone()[0]
    time.sleep(0.02)
    return t


def said(mem, text, actor="ana"):
    return mem.append(f"{actor}: {text}", role="user", actor=actor)


def put(mem, text, *, audience=None, actor="ana", offsets=None):
    offset = said(mem, text, actor)
    r = mem.remember(f"{EVERY} note: {text}", evidence=[offset], purposes=["converse"], audience=audience)
    assert r.created, r
    if offsets is not None:
        offsets.append(offset)
    return r.memory_id


def state(mem, as_of, *, mode="lexical", query=EVERY, embedder=None, limit=50):
    vector = embedder.embed([query])[0] if embedder is not None else None
    got = mem.recall(query, mode=mode, as_of=as_of, limit=limit, embed=False, query_embedding=vector)
    return {i.memory_id: i.body for i in got.items if i.item == "memory"}, got


@pytest.fixture
def story(acme, acme_admin, conninfo, db):
    """The moments t0 (before anything), t1 (first version), t2 (after the changes), t3 (after an erasure)."""
    m = {}
    t0 = moment(db)
    m["cat"] = put(acme, "the office cat is named Pixel")
    m["tea"] = put(acme, "Ana drinks green tea every morning")
    m["wifi"] = put(acme, "the guest wifi password is hunter2")
    m["ben"] = put(acme, "Ben keeps his bike in the basement", audience="ben", actor="ben")
    erased_offsets = []
    m["erased"] = put(acme, "Ana's old phone number ends in 4711", offsets=erased_offsets)
    tea_fact = acme.assert_fact("Ana", "likes", "green tea", evidence=[{"offset": said(acme, "I like green tea"),
                                                                       "quote": "green tea"}])
    embed_all(conninfo)
    t1 = moment(db)
    rev = acme.read(m["tea"], purpose="converse").revision
    acme.correct(m["tea"], f"{EVERY} note: Ana drinks black coffee every morning", revision=rev,
                 evidence=[said(acme, "I switched to black coffee")])
    cat = acme.read(m["cat"], purpose="converse")
    m["cat2"] = acme.supersede(m["cat"], f"{EVERY} note: the office cat is named Mochi now",
                               revision=cat.revision, evidence=[said(acme, "we renamed the cat Mochi")])
    acme.forget(m["wifi"], reason="rotated")
    acme.retract_fact(tea_fact.fact_id, reason="she switched")
    m["mug"] = put(acme, "Ana's mug is blue")
    embed_all(conninfo)
    t2 = moment(db)
    return {"m": m, "t0": t0, "t1": t1, "t2": t2, "erased_offset": erased_offsets[0]}


TEXT = {
    "cat": f"{EVERY} note: the office cat is named Pixel",
    "tea": f"{EVERY} note: Ana drinks green tea every morning",
    "wifi": f"{EVERY} note: the guest wifi password is hunter2",
    "erased": f"{EVERY} note: Ana's old phone number ends in 4711",
    "cat2": f"{EVERY} note: the office cat is named Mochi now",
    "tea_now": f"{EVERY} note: Ana drinks black coffee every morning",
    "mug": f"{EVERY} note: Ana's mug is blue",
}


def test_each_moment_answers_with_exactly_its_memories_in_their_text_then(acme, story):
    m = story["m"]
    assert state(acme, story["t0"])[0] == {}
    then = {m["cat"]: TEXT["cat"], m["tea"]: TEXT["tea"], m["wifi"]: TEXT["wifi"], m["erased"]: TEXT["erased"]}
    assert state(acme, story["t1"])[0] == then
    now = {m["tea"]: TEXT["tea_now"], m["cat2"]: TEXT["cat2"], m["mug"]: TEXT["mug"], m["erased"]: TEXT["erased"]}
    assert state(acme, story["t2"])[0] == now
    assert state(acme, None)[0] == now
    # ben's memory was there all along, for ben only: as-of is history, not a way around who may see it
    assert m["ben"] not in state(acme, story["t1"])[0]
    as_ben = acme.recall(EVERY, mode="lexical", as_of=story["t1"], limit=50, embed=False, principal="ben")
    assert m["ben"] in [i.memory_id for i in as_ben.items]


def test_lexical_finds_a_corrected_memory_by_the_text_it_had_then_and_not_by_its_text_now(acme, story):
    m = story["m"]
    green_then, _ = state(acme, story["t1"], query="green tea")
    assert green_then == {m["tea"]: TEXT["tea"]}
    assert state(acme, story["t1"], query="black coffee")[0] == {}
    assert state(acme, None, query="black coffee")[0] == {m["tea"]: TEXT["tea_now"]}
    assert state(acme, None, query="green tea")[0] == {}


def test_dense_and_hybrid_answer_as_of_the_moment(acme, story, embedder):
    m = story["m"]
    for mode in ("dense", "hybrid"):
        # written after t1: not there then
        mug_then, got = state(acme, story["t1"], mode=mode, query="Ana's mug is blue", embedder=embedder)
        assert got.meta.dense_available, got.meta
        assert m["mug"] not in mug_then
        assert next(iter(state(acme, None, mode=mode, query="Ana's mug is blue", embedder=embedder)[0])) == m["mug"]
        # unchanged since t1: found then by its vector
        erased_then, _ = state(acme, story["t1"], mode=mode, query="Ana's old phone number", embedder=embedder)
        assert next(iter(erased_then)) == m["erased"], (mode, erased_then)
        # forgotten after t1: gone now
        assert m["wifi"] not in state(acme, None, mode=mode, query="guest wifi password", embedder=embedder)[0]
    # Changed since t1 (superseded, forgotten, corrected): the one vector a memory keeps is of its current
    # text and only while it is live, so the dense arm does not find them as of t1; the lexical arm does, by
    # the text they had, and hybrid answers with them in that text.
    for key, query in (("cat", "the office cat is named Pixel"), ("wifi", "the guest wifi password is hunter2"),
                       ("tea", "Ana drinks green tea every morning")):
        dense_then, _ = state(acme, story["t1"], mode="dense", query=query, embedder=embedder)
        assert m[key] not in dense_then, (key, dense_then)
        hybrid_then, _ = state(acme, story["t1"], mode="hybrid", query=query, embedder=embedder)
        assert next(iter(hybrid_then)) == m[key] and hybrid_then[m[key]] == TEXT[key], (key, hybrid_then)
    cat_then, _ = state(acme, story["t1"], mode="hybrid", query="the office cat is named Pixel", embedder=embedder)
    assert m["cat2"] not in cat_then
    cat_now, _ = state(acme, None, mode="hybrid", query="the office cat is named Pixel", embedder=embedder)
    assert next(iter(cat_now)) == m["cat2"] and m["cat"] not in cat_now
    dense_now, _ = state(acme, None, mode="dense", query="Ana drinks black coffee every morning", embedder=embedder)
    assert dense_now[m["tea"]] == TEXT["tea_now"]


def test_facts_are_those_valid_and_believed_then(acme, story):
    then = acme.recall("what does Ana like", as_of=story["t1"], embed=False)
    now = acme.recall("what does Ana like", embed=False)
    assert [i.body for i in then.items if i.item == "fact"] != []
    assert [i for i in now.items if i.item == "fact"] == []


def test_what_was_erased_stays_erased_as_of_any_moment(acme, acme_admin, story):
    m = story["m"]
    receipt = acme_admin.erase({"observation": {"scope": "default", "offset": story["erased_offset"]}},
                               reason="asked", actor="dpo")
    assert receipt.observations_erased == 1
    for t in (story["t1"], story["t2"], None):
        got, _ = state(acme, t)
        assert m["erased"] not in got
        assert "4711" not in " ".join(got.values())


def test_a_moment_in_the_future_is_refused_and_one_before_the_tenant_answers_empty(acme, story, db):
    later = db.execute("select now() + interval '1 hour'").fetchone()[0]
    with pytest.raises(errors.InvalidTime, match="in the future") as refused:
        acme.recall(EVERY, as_of=later, embed=False)
    # in words a Python caller can act on: its own argument's name, not the SQL's parameters or NULL
    said = f"{refused.value} {refused.value.hint}"
    assert "as_of" in said and "p_as_of" not in said and "NULL" not in said and "p_at" not in said, said
    long_ago = db.execute("select '2001-01-01 00:00+00'::timestamptz").fetchone()[0]
    got = acme.recall(EVERY, as_of=long_ago, embed=False)
    assert got.items == []


def test_current_recall_is_unchanged_by_the_as_of_steps(acme, story, db):
    """Without p_as_of every step reads as before: the same rows as the answer at the latest moment."""
    latest = moment(db)
    for query in (EVERY, "office cat", "Ana drinks"):
        assert state(acme, None, query=query)[0] == state(acme, latest, query=query)[0]


def test_a_memory_as_of_a_moment_cites_only_the_turns_it_was_drawn_from_by_then(acme, story):
    """The correction's turn became a source of the memory when it corrected it: as of before, the memory
    stands on the turn it was remembered from alone (a new user saw the later correction listed under the
    old text)."""
    tea = story["m"]["tea"]

    def sources(as_of):
        _, got = state(acme, as_of)
        item = next(i for i in got.items if i.memory_id == tea)
        return [(o.text, o.corrections) for o in item.provenance.observations]

    assert sources(story["t1"]) == [("ana: Ana drinks green tea every morning", [])]
    assert sources(story["t2"]) == [("ana: Ana drinks green tea every morning", []),
                                    ("ana: I switched to black coffee", [2])]


def test_a_memory_drawn_from_one_forgotten_later_is_answered_as_of_before(acme, db):
    """The permission walk (recall's step 5) judged a memory's sources as they stand now: as of a moment
    before its source was forgotten, a summary drawn from it was dropped, though the forget was not made yet
    (and the source itself was answered)."""
    source = put(acme, "the team standup is at nine")
    summary = acme.derive([source], f"{EVERY} note: standups start at nine sharp", kind="summary")
    before = moment(db)
    acme.forget(source, reason="the standup moved")
    then, got = state(acme, before)
    assert then == {source: f"{EVERY} note: the team standup is at nine",
                    summary: f"{EVERY} note: standups start at nine sharp"}
    # and its provenance as of then names the source, hidden from no one (it said "1 source memories you may
    # not see" under a source it listed first)
    provenance = next(i.provenance for i in got.items if i.memory_id == summary)
    assert [m.id for m in provenance.memories] == [source] and provenance.hidden_sources == 0
    assert state(acme, None)[0] == {}


def test_the_answers_metadata_says_which_moment_it_is_for(acme, story, db):
    """A saved answer tells by itself whether it is the memory as it stood then or as it stands (the command
    line printed the moment beside the metadata; a Python or SQL caller had nothing)."""
    t = story["t1"]
    assert acme.recall(EVERY, as_of=t, embed=False).meta.as_of == t
    assert acme.recall(EVERY, embed=False).meta.as_of is None
    [(as_of,)] = db.execute("select (a.meta).as_of from acme.recall_answer('bot', '{default}', %s, "
                            "p_mode => 'lexical', p_as_of => %s) a", (EVERY, t)).fetchall()
    assert as_of == t


def test_facts_as_believed_at_a_later_time_are_refused_not_answered_as_now(acme, db):
    """What will be believed later is not known yet: a future known_at answered what is believed now, silently
    (a future valid_at asks about the world, and stays allowed)."""
    offset = said(acme, "I like green tea")
    acme.assert_fact("Ana", "likes", "green tea", evidence=[{"offset": offset, "quote": "green tea"}])
    later = db.execute("select now() + interval '1 hour'").fetchone()[0]
    with pytest.raises(errors.InvalidTime, match=r"known_at .* is in the future") as refused:
        acme.facts_as_of("Ana", known_at=later)
    assert "valid_at" in (refused.value.hint or "")
    with pytest.raises(errors.InvalidTime, match=r"known_at .* is in the future"):
        acme.neighbourhood(["Ana"], known_at=later)
    assert [f.object for f in acme.facts_as_of("Ana", valid_at=later)] == ["green tea"]
    assert [f.object for f in acme.facts_as_of("Ana", known_at=db.execute("select now()").fetchone()[0])] == [
        "green tea"]
