"""Issue #51, finding 1: a fact could be more public than its evidence. assert_fact with the default audience,
citing a turn only ana may see, was accepted, and ben then read "Ana likes coffee" through facts_as_of and
recall. Facts now follow the rule memories follow: no more peers than the turns they cite unless widened on
purpose with a reason, and a turn the asserting principal may not see cannot be cited at all.
"""

from __future__ import annotations

import pytest

from pgrecall import errors

SECRET = "I secretly love coffee"


def ana_only_turn(acme) -> int:
    """A turn outside any session that only ana may see (the issue's repro)."""
    return acme.append(SECRET, role="user", actor="ana", audience=["ana"], principal="ana")


def test_a_fact_citing_a_private_turn_is_refused_at_the_scope_and_ben_never_sees_it(acme):
    said = ana_only_turn(acme)
    with pytest.raises(errors.WiderThanEvidence) as refused:
        acme.assert_fact("Ana", "likes", "coffee", evidence=[{"offset": said, "quote": "love coffee"}],
                         principal="ana")
    assert refused.value.sqlstate == "PR116"
    assert f"a fact for everyone in scope 'default' would reach more peers than turn default#{said}" in \
        str(refused.value)
    assert "'ana'" in str(refused.value)
    # nothing of it was written: no fact, no entity ben (or anyone) could name
    for reader in ("ana", "ben"):
        with pytest.raises(errors.UnknownEntity):
            acme.facts_as_of("Ana", principal=reader)
    assert not [i for i in acme.recall("what does Ana like? coffee", principal="ben").items if i.kind == "fact"]


def test_a_fact_for_a_peer_the_turn_admits_is_stored_and_seen_by_that_peer_only(acme):
    said = ana_only_turn(acme)
    made = acme.assert_fact("Ana", "likes", "coffee", evidence=[{"offset": said, "quote": "love coffee"}],
                            audience="ana", principal="ana")
    assert made.outcome == "inserted"
    [row] = acme.facts_as_of("Ana", "likes", principal="ana")
    assert (row.object, [e.quote for e in row.evidence]) == ("coffee", ["love coffee"])
    with pytest.raises(errors.UnknownEntity):
        acme.facts_as_of("Ana", principal="ben")
    # one other peer is wider than the turn too
    with pytest.raises(errors.WiderThanEvidence, match="for 'ben'"):
        acme.assert_fact("Ana", "likes", "tea", evidence=[{"offset": said, "quote": "love coffee"}],
                         audience="ben", principal="ana")


def test_a_widened_fact_keeps_its_reason_and_withholds_the_quote(acme, db):
    said = ana_only_turn(acme)
    made = acme.assert_fact("Ana", "likes", "coffee", evidence=[{"offset": said, "quote": "love coffee"}],
                            widening_reason="her taste in coffee is no secret", principal="ana")
    assert made.outcome == "inserted"
    assert db.execute("select widening_reason from acme.fact where id = %s", (made.fact_id,)).fetchone()[0] == \
        "her taste in coffee is no secret"
    [row] = acme.facts_as_of("Ana", "likes", principal="ben")
    assert row.object == "coffee"
    [quote] = row.evidence
    assert (quote.offset, quote.withheld, quote.quote) == (said, True, None)
    [cited] = acme.resolve_citation(made.fact_id, principal="ben")
    assert cited.withheld and cited.body is None
    assert SECRET not in repr(acme.recall("what does Ana like", principal="ben"))
    # a reason of blanks is no reason
    with pytest.raises(errors.PgrecallError, match="widening reason needs words: say why the fact"):
        acme.assert_fact("Ana", "likes", "tea", evidence=[{"offset": said, "quote": "love coffee"}],
                         widening_reason="   ", principal="ana")


def test_a_turn_the_principal_may_not_see_is_missing_to_them_whatever_they_quote(acme, db):
    """ben guessing the words of ana's turn learned whether he guessed right (PR112 or a stored fact)."""
    said = ana_only_turn(acme)
    missing = said + 1000

    def refusal(offset: int, quote: str) -> str:
        with pytest.raises(errors.ObservationNotFound) as e:
            acme.assert_fact("Ana", "likes", "coffee", evidence=[{"offset": offset, "quote": quote}],
                             audience="ben", principal="ben")
        return str(e.value).replace(str(offset), "N")

    assert refusal(said, "love coffee") == refusal(said, "hate coffee") == refusal(missing, "love coffee")
    assert db.execute("select count(*) from acme.fact").fetchone()[0] == 0


def test_a_batch_is_refused_whole_when_one_item_is_wider_than_its_turn(acme, db):
    said = ana_only_turn(acme)
    public = acme.append("Ana works at Acme", role="user", actor="ana")
    items = [{"subject": "Ana", "predicate": "works_at", "object": "Acme",
              "evidence": [{"offset": public, "quote": "works at Acme"}]},
             {"subject": "Ana", "predicate": "likes", "object": "coffee",
              "evidence": [{"offset": said, "quote": "love coffee"}]}]
    with pytest.raises(errors.WiderThanEvidence, match=r"\(item 2\)"):
        acme.assert_facts(items, principal="ana")
    assert db.execute("select count(*) from acme.fact").fetchone()[0] == 0
    items[1]["widening_reason"] = "she tells everyone"
    assert [f.outcome for f in acme.assert_facts(items, principal="ana")] == ["inserted", "inserted"]


def test_the_deriver_still_asserts_facts_about_a_private_message_for_its_sender(acme, acme_worker, db):
    """task_assert_fact gives a fact of a message outside the scope's log the sender as its audience."""
    s = acme.create_session("ana and the bot")
    acme.add_session_peers(s, ["ana", "bot"])
    [msg] = acme.add_messages(s, [{"actor": "ana", "body": "I live in Lisbon now"}])
    [task] = [t for t in acme_worker.claim_tasks("w", limit=10) if t.observer is None]
    asserted = acme_worker.task_assert_fact(task, "lives_in", "Lisbon",
                                            evidence=[{"offset": msg.offset, "quote": "I live in Lisbon"}])
    assert asserted.outcome == "inserted"
    assert db.execute("select p.name from acme.fact f join acme.peer p on p.id = f.audience_peer_id "
                      "where f.id = %s", (asserted.fact_id,)).fetchone()[0] == "ana"


def test_an_upgrade_narrows_the_facts_that_were_wider_than_their_turns(db):
    """Migration 0035: a fact stored before the rule that reaches more peers than a turn it cites is narrowed
    to the peer who asserted it; facts that fit their turns keep their audience."""
    db.execute("select pgrecall.create_tenant('older', 34)")
    db.execute("insert into older.scope (name, log_watermark) values ('default', 3)")
    ana, ben, bot = (db.execute("insert into older.peer (name, kind) values (%s, %s) returning id", (n, k)).fetchone()[0]
                     for n, k in (("ana", "human"), ("ben", "human"), ("bot", "agent")))
    turns = {}
    for offset, (body, audience) in enumerate([("I secretly love coffee", [ana]),
                                               ("I work at Acme", None),
                                               ("I love tea too", [ana, bot])], 1):
        turns[offset] = db.execute(
            """insert into older.observation (scope, log_offset, kind, occurred_at, source_role, actor_id, body, audience)
               values ('default', %s, 'message', now(), 'user', %s, %s, %s) returning id""",
            (offset, ana, body, audience)).fetchone()[0]
    subject = db.execute("insert into older.entity (scope, name) values ('default', 'Ana') returning id").fetchone()[0]

    def fact(obj: str, audience: int | None, asserted_by: int, turn: int, quote: str, body: str) -> int:
        fact_id = db.execute(
            """insert into older.fact (scope, subject_id, predicate, single_valued, object_value, statement, valid, known,
                                       audience_peer_id, asserted_by)
               values ('default', %s, 'prefers', false, %s, %s, tstzrange(now(), null), tstzrange(now(), null), %s, %s)
               returning id""", (subject, obj, f"Ana prefers {obj}", audience, asserted_by)).fetchone()[0]
        start = body.index(quote)
        db.execute("""insert into older.fact_evidence (fact_id, observation_id, byte_start, byte_end, quote)
                      values (%s, %s, %s, %s, %s)""", (fact_id, turns[turn], start, start + len(quote), quote))
        return fact_id

    wide = fact("coffee", None, ana, 1, "love coffee", "I secretly love coffee")           # the scope, on ana's turn
    for_ben = fact("coffee beans", ben, bot, 1, "coffee", "I secretly love coffee")       # ben, on ana's turn
    public = fact("Acme", None, ana, 2, "Acme", "I work at Acme")                         # the scope, on the scope's
    fits = fact("tea", bot, ana, 3, "tea", "I love tea too")                              # bot, on ana and bot's
    db.execute("select * from pgrecall.upgrade_tenant('older')")
    audiences = dict(db.execute("select id, audience_peer_id from older.fact").fetchall())
    assert audiences == {wide: ana, for_ben: bot, public: None, fits: bot}
    # and after it, the rule holds for new facts on the upgraded tenant
    assert db.execute("select count(*) from older.fact where widening_reason is not null").fetchone()[0] == 0
