"""The graph: bitemporal facts with evidence, supersession as a constraint, traversal, merges."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import psycopg
import pytest

from conftest import run_together, table_counts
from pgrecall import errors
from pgrecall.driver import Evidence
from test_memory_operations import said

T = lambda y, m=1, d=1: datetime(y, m, d, tzinfo=UTC)


def quote(offset, text):
    return [{"offset": offset, "quote": text}]


def now(db):
    return db.execute("select clock_timestamp()").fetchone()[0]


def test_where_ana_lives_now_then_and_as_we_believed_it(acme, db):
    o1 = said(acme, "I live in Lisbon")
    o2 = said(acme, "I moved to Porto last May")
    acme.assert_fact("ana", "lives_in", "Lisbon", evidence=quote(o1, "I live in Lisbon"), valid_from=T(2020))
    believed_lisbon_only = now(db)
    moved = acme.assert_fact("ana", "lives_in", "Porto", evidence=quote(o2, "I moved to Porto"),
                             valid_from=T(2026, 5, 1))
    assert moved.outcome == "superseded" and len(moved.closed_facts) == 1

    where = lambda **kw: [(f.object, f.valid.lower, f.valid.upper) for f in acme.facts_as_of("ana", "lives_in", **kw)]
    # now
    assert where() == [("Porto", T(2026, 5, 1), None)]
    # last April, as we believe now: the surviving part of the Lisbon fact
    assert where(valid_at=T(2026, 4, 1)) == [("Lisbon", T(2020), T(2026, 5, 1))]
    # now, as we believed before the move was told: Lisbon, open-ended
    assert where(known_at=believed_lisbon_only) == [("Lisbon", T(2020), None)]
    # before anything was told, nothing was believed
    assert acme.facts_as_of("ana", "lives_in", known_at=T(2019)) == []
    # every answer carries its proof
    porto = acme.facts_as_of("ana", "lives_in")[0]
    assert porto.evidence == [Evidence(scope="default", offset=o2, start=0, end=16, quote="I moved to Porto",
                                       source_role="user", withheld=False)]


def test_history_is_closed_and_split_never_rewritten(acme, db):
    o1, o2 = said(acme, "I live in Lisbon"), said(acme, "I lived in Porto in 2022")
    first = acme.assert_fact("ana", "lives_in", "Lisbon", evidence=quote(o1, "I live in Lisbon"), valid_from=T(2020))
    acme.assert_fact("ana", "lives_in", "Porto", evidence=quote(o2, "I lived in Porto in 2022"),
                     valid_from=T(2022), valid_to=T(2023))
    rows = db.execute("select f.id, coalesce(o.name, f.object_value), lower(f.valid), upper(f.valid), "
                      "upper_inf(f.known), f.split_from from acme.fact f left join acme.entity o on o.id = f.object_id "
                      "order by f.id").fetchall()
    # the original row is kept, closed; the new value; and Lisbon before and after 2022 as new rows
    assert rows[0][:5] == (first.fact_id, "Lisbon", T(2020), None, False)
    current = sorted((r[1], r[2], r[3]) for r in rows if r[4])
    assert current == [("Lisbon", T(2020), T(2022)), ("Lisbon", T(2023), None), ("Porto", T(2022), T(2023))]
    assert {r[5] for r in rows if r[4] and r[1] == "Lisbon"} == {first.fact_id}
    # the pieces carry the original evidence
    assert db.execute("select count(*) from acme.fact_evidence where quote = 'I live in Lisbon'").fetchone()[0] == 3
    # history cannot be edited, even by the owner
    with pytest.raises(psycopg.Error) as exc:
        db.execute("update acme.fact set statement = 'rewritten' where id = %s", (first.fact_id,))
    assert exc.value.sqlstate == "PR110"
    with pytest.raises(psycopg.Error) as exc:
        db.execute("update acme.fact_evidence set quote = 'x'")
    assert exc.value.sqlstate == "PR110"


def test_the_database_forbids_two_current_values(acme, db):
    o1 = said(acme, "I live in Lisbon")
    acme.assert_fact("ana", "lives_in", "Lisbon", evidence=quote(o1, "I live in Lisbon"), valid_from=T(2020))
    with pytest.raises(psycopg.errors.ExclusionViolation):
        db.execute("""insert into acme.fact (scope, subject_id, predicate, single_valued, object_value, statement,
                      valid, known, asserted_by)
                      select f.scope, f.subject_id, f.predicate, true, 'Madrid', 'ana lives in Madrid',
                             tstzrange('2024-01-01', null), tstzrange(now(), null), f.asserted_by
                        from acme.fact f""")
    # a multi-valued predicate holds many values at once
    o2 = said(acme, "I like jazz and I like tea")
    acme.assert_fact("ana", "likes", "jazz", evidence=quote(o2, "I like jazz"))
    acme.assert_fact("ana", "likes", "tea", evidence=quote(o2, "I like tea"))
    assert sorted(f.object for f in acme.facts_as_of("ana", "likes")) == ["jazz", "tea"]


def test_the_same_value_again_confirms_the_fact(acme):
    o1, o2 = said(acme, "I live in Lisbon"), said(acme, "Still living in Lisbon, yes")
    a = acme.assert_fact("ana", "lives_in", "Lisbon", evidence=quote(o1, "I live in Lisbon"), valid_from=T(2020))
    b = acme.assert_fact("ana", "lives_in", "lisbon", evidence=quote(o2, "Still living in Lisbon"),
                         valid_from=T(2021))
    assert (b.fact_id, b.outcome) == (a.fact_id, "confirmed")
    fact = acme.facts_as_of("ana", "lives_in")[0]
    assert [e.offset for e in fact.evidence] == [o1, o2] and fact.salience == 2


def test_evidence_is_exactly_its_utf8_bytes(acme, db):
    text = "Olá! Eu moro em São Paulo 🌞 desde 2019"
    o = said(acme, text)
    raw = text.encode()
    start = raw.index("São Paulo".encode())
    end = start + len("São Paulo".encode())
    assert end - start == 10  # "ã" is two bytes
    ok = acme.assert_fact("ana", "lives_in", "São Paulo",
                          evidence=[{"offset": o, "start": start, "end": end, "quote": "São Paulo"}])
    cite = acme.resolve_citation(ok.fact_id)
    assert [(c.log_offset, c.byte_start, c.byte_end, c.quote, c.actor) for c in cite] == \
        [(o, start, end, "São Paulo", "ana")]
    assert raw[cite[0].byte_start:cite[0].byte_end].decode() == "São Paulo"
    # without a span, the quote is found and its byte span stored
    sun = acme.assert_fact("ana", "likes", "sun", evidence=quote(o, "🌞 desde 2019"))
    span = acme.resolve_citation(sun.fact_id)[0]
    assert raw[span.byte_start:span.byte_end].decode() == "🌞 desde 2019"

    before = table_counts(db)
    bad = [
        ({"offset": o, "start": start, "end": end, "quote": "Sào Paulo"}, "is not the text at bytes"),
        ({"offset": o, "start": start + 1, "end": end + 1, "quote": "São Paulo"}, "is not the text"),
        ({"offset": o, "start": start, "end": start + 2, "quote": "S"}, "is 1 bytes long but the span"),
        ({"offset": o, "start": 0, "end": len(raw) + 5, "quote": text}, "outside"),
        ({"offset": o, "start": 5, "end": 5, "quote": ""}, None),
        ({"offset": o, "quote": "Rio de Janeiro"}, "does not occur"),
        ({"offset": 99, "quote": "x"}, None),
    ]
    for item, message in bad:
        with pytest.raises((errors.EvidenceMismatch, errors.ObservationNotFound)) as exc:
            acme.assert_fact("ana", "lives_in", "Rio", evidence=[item])
        if message:
            assert message in str(exc.value)
    with pytest.raises(errors.EvidenceMismatch, match="cuts a multi-byte character"):
        acme.assert_fact("ana", "lives_in", "Rio", evidence=[{"offset": o, "start": start + 2, "end": end,
                                                               "quote": "xo Paulo"}])
    with pytest.raises(errors.EvidenceMismatch, match="needs evidence"):
        acme.assert_fact("ana", "lives_in", "Rio", evidence=[])
    assert table_counts(db) == before


def test_role_policy_an_assistant_cannot_tell_us_about_a_human(acme, db):
    by_bot = said(acme, "You live in Lisbon, right?", actor="bot", role="assistant")
    by_ana = said(acme, "Yes, I live in Lisbon")
    before = table_counts(db)
    with pytest.raises(errors.RolePolicyViolation, match="human peer"):
        acme.assert_fact("ana", "lives_in", "Lisbon", evidence=quote(by_bot, "You live in Lisbon"))
    assert table_counts(db) == before
    # ana's own words make it her fact (the assistant's line may come along)
    ok = acme.assert_fact("ana", "lives_in", "Lisbon",
                          evidence=quote(by_bot, "You live in Lisbon") + quote(by_ana, "I live in Lisbon"))
    assert ok.outcome == "inserted"
    # about something that is not a human peer, the assistant's word is evidence
    tip = said(acme, "Lisbon is in Portugal", actor="bot", role="assistant")
    assert acme.assert_fact("Lisbon", "located_in", "Portugal", evidence=quote(tip, "Lisbon is in Portugal")).fact_id
    # and an alias of the human is still the human
    acme.add_entity_alias("ana", "Ana Silva")
    with pytest.raises(errors.RolePolicyViolation):
        acme.assert_fact("Ana Silva", "works_at", "Acme", evidence=quote(by_bot, "You live in Lisbon"))


def test_bad_input_gets_our_errors_and_writes_nothing(acme, db, acme_admin):
    o = said(acme, "I live in Lisbon")
    ev = quote(o, "I live in Lisbon")
    acme.assert_fact("ana", "lives_in", "Lisbon", evidence=ev, valid_from=T(2020))
    before = table_counts(db)
    cases = [
        (dict(subject="ana", predicate="teleports_to", object_="Mars", evidence=ev), errors.UnknownPredicate),
        (dict(subject="ana", predicate="lives_in", object_="Porto", evidence=ev, valid_from=T(2024), valid_to=T(2024)),
         errors.InvalidArgument),
        (dict(subject="ana", predicate="lives_in", object_="Porto", evidence=ev, valid_from=T(2024), valid_to=T(2023)),
         errors.InvalidArgument),
        (dict(subject=" ", predicate="lives_in", object_="Porto", evidence=ev), errors.InvalidArgument),
        (dict(subject="ana", predicate="lives_in", object_="ana", evidence=ev), errors.InvalidArgument),
        (dict(subject="ana", predicate="lives_in", object_="Porto", evidence=ev, confidence=2), errors.InvalidArgument),
        (dict(subject="ana", predicate="lives_in", object_="Porto", evidence=ev, observer="nobody"), errors.UnknownPeer),
        (dict(subject="ana", predicate="lives_in", object_="Porto", evidence=ev, scope="other"),
         errors.ScopeNotAuthorised),
        (dict(subject="ana", predicate="lives_in", object_="Porto", evidence=ev, purposes=["gossip"]),
         errors.InvalidPurpose),
    ]
    for kwargs, error in cases:
        subject, predicate, object_ = kwargs.pop("subject"), kwargs.pop("predicate"), kwargs.pop("object_")
        with pytest.raises(error):
            acme.assert_fact(subject, predicate, object_, **kwargs)
    with pytest.raises(errors.UnknownEntity, match="Zed"):
        acme.facts_as_of("Zed")
    with pytest.raises(errors.UnknownPredicate):
        acme.facts_as_of("ana", "teleports_to")
    for hops in (0, 4, None):
        with pytest.raises(errors.InvalidArgument, match="hops must be 1 to 3"):
            acme.neighbourhood(["ana"], hops=hops)
    with pytest.raises(errors.UnknownEntity):
        acme.neighbourhood(["ana", "Zed"])
    with pytest.raises(errors.FactNotFound):
        acme.resolve_citation(999999)
    with pytest.raises(errors.UnknownEntity):
        acme_admin.merge_entities("ana", "Zed")
    assert table_counts(db) == before


def test_retract_ends_belief_but_keeps_history(acme, db):
    o = said(acme, "I work at Acme")
    f = acme.assert_fact("ana", "works_at", "Acme", evidence=quote(o, "I work at Acme"))
    believed = now(db)
    acme.retract_fact(f.fact_id, reason="she was joking")
    assert acme.facts_as_of("ana", "works_at") == []
    assert [x.object for x in acme.facts_as_of("ana", "works_at", known_at=believed)] == ["Acme"]
    with pytest.raises(errors.MemoryNotLive, match="no longer current"):
        acme.retract_fact(f.fact_id, reason="again")
    with pytest.raises(errors.FactNotFound):
        acme.retract_fact(f.fact_id, reason="x", scopes=["other"])


def chain(acme):
    o = said(acme, "Ana knows Ben. Ben works at Acme. Acme is located in Lisbon. Lisbon is part of Portugal. "
                   "Portugal is part of Europe. Ben knows Ana.")
    for s, p, ob, q in [("ana", "knows", "ben", "Ana knows Ben"), ("ben", "works_at", "Acme", "Ben works at Acme"),
                        ("Acme", "located_in", "Lisbon", "Acme is located in Lisbon"),
                        ("Lisbon", "part_of", "Portugal", "Lisbon is part of Portugal"),
                        ("Portugal", "part_of", "Europe", "Portugal is part of Europe"),
                        ("ben", "knows", "ana", "Ben knows Ana")]:
        acme.assert_fact(s, p, ob, evidence=quote(o, q))


def test_neighbourhood_expands_both_ways_bounded_and_cycle_safe(acme):
    chain(acme)
    reach = lambda seeds, hops: sorted((r.depth, r.statement) for r in acme.neighbourhood(seeds, hops=hops))
    assert reach(["ben"], 1) == [(1, "ana knows ben"), (1, "ben knows ana"), (1, "ben works at Acme")]
    two = reach(["ben"], 2)
    assert [d for d, _ in two].count(2) == 1 and len(two) == 4  # the ana<->ben cycle adds nothing
    assert any("located in Lisbon" in s for d, s in two if d == 2)
    # incoming direction: from Europe back up the chain
    assert [s for _, s in reach(["Europe"], 3)] == ["Portugal part of Europe", "Lisbon part of Portugal",
                                                   "Acme located in Lisbon"]
    # every fact at most once, even though ana and ben point at each other; Europe is 4 hops away
    rows = acme.neighbourhood(["ana", "ben"], hops=3)
    assert len(rows) == len({r.fact_id for r in rows}) == 5
    assert "Portugal part of Europe" not in [r.statement for r in rows]


def test_neighbourhood_is_bitemporal(acme, db):
    o1, o2 = said(acme, "I work at Acme"), said(acme, "I work at Initech now")
    acme.assert_fact("ana", "works_at", "Acme", evidence=quote(o1, "I work at Acme"), valid_from=T(2020))
    acme.assert_fact("ana", "works_at", "Initech", evidence=quote(o2, "I work at Initech"), valid_from=T(2025))
    objects = lambda **kw: [r.object for r in acme.neighbourhood(["ana"], hops=1, **kw)]
    assert objects() == ["Initech"]
    assert objects(valid_at=T(2021)) == ["Acme"]


def test_merge_moves_facts_and_aliases_and_closes_contradictions(acme, db, acme_admin):
    o = said(acme, "I live in Lisbon. A. Silva lives in Porto and likes jazz.")
    acme.assert_fact("ana", "lives_in", "Lisbon", evidence=quote(o, "I live in Lisbon"), valid_from=T(2020))
    acme.assert_fact("A. Silva", "lives_in", "Porto", evidence=quote(o, "A. Silva lives in Porto"), valid_from=T(2020))
    acme.assert_fact("A. Silva", "likes", "jazz", evidence=quote(o, "likes jazz"))
    merged = acme_admin.merge_entities("ana", "A. Silva")
    assert (merged.facts_moved, merged.facts_closed) == (2, 1)
    assert sorted((f.predicate, f.object) for f in acme.facts_as_of("ana")) == [("likes", "jazz"), ("lives_in", "Lisbon")]
    # the absorbed name now denotes the kept entity
    assert sorted((f.predicate, f.object) for f in acme.facts_as_of("a. silva")) == [("likes", "jazz"),
                                                                                     ("lives_in", "Lisbon")]
    assert db.execute("select aliases from acme.entity where normalized_name = 'ana'").fetchone()[0] == ["a. silva"]
    assert db.execute("select count(*) from acme.entity_merge").fetchone()[0] == 1
    # new facts about the absorbed name land on the survivor
    acme.assert_fact("A. Silva", "speaks", "Portuguese", evidence=quote(o, "I live in Lisbon"))
    assert "Portuguese" in [f.object for f in acme.facts_as_of("ana", "speaks")]


def test_conflicting_writers_end_with_exactly_one_current_value(acme, db, conninfo):
    import pgrecall

    offsets = [said(acme, f"I live in City{i}") for i in range(8)]
    barrier = threading.Barrier(8)

    def writer(i):
        with pgrecall.connect(conninfo.dsn(user="pgrecall_acme_app"), tenant="acme", principal="bot",
                              scopes=["default"]) as mem:
            barrier.wait()
            mem.assert_fact("ana", "lives_in", f"City{i}", evidence=quote(offsets[i], f"I live in City{i}"),
                            valid_from=T(2026))

    run_together(writer, range(8), barrier)
    current = acme.facts_as_of("ana", "lives_in")
    assert len(current) == 1
    overlaps = db.execute("""select count(*) from acme.fact a join acme.fact b on a.id < b.id
                              and a.subject_id = b.subject_id and a.predicate = b.predicate
                              and upper_inf(a.known) and upper_inf(b.known) and a.valid && b.valid""").fetchone()[0]
    assert overlaps == 0
    # seven values were believed for a while and closed, one at a time
    assert db.execute("select count(*) from acme.fact where not upper_inf(known)").fetchone()[0] == 7


def test_reading_facts_respects_scope_audience_and_purpose(acme, db):
    o = said(acme, "I like jazz and I like tea")
    acme.assert_fact("ana", "likes", "jazz", evidence=quote(o, "I like jazz"))
    acme.assert_fact("ana", "likes", "tea", evidence=quote(o, "I like tea"), audience="ben", purposes=["personalize"])
    likes = lambda **kw: sorted(f.object for f in acme.facts_as_of("ana", "likes", **kw))
    assert likes() == ["jazz"]
    assert likes(principal="ben") == ["jazz"]
    assert likes(principal="ben", purpose="personalize") == ["jazz", "tea"]
    with pytest.raises(errors.UnknownEntity):
        acme.facts_as_of("ana", scopes=["other"])
    assert [r.object for r in acme.neighbourhood(["ana"], hops=1)] == ["jazz"]


def test_recall_fuses_facts_about_entities_the_query_names(acme, db):
    o1 = said(acme, "I live in Lisbon with my cat")
    o2 = said(acme, "I work at Acme as a designer")
    acme.remember("Ana has a cat", evidence=[o1], purposes=["converse"])
    acme.assert_fact("ana", "lives_in", "Lisbon", evidence=quote(o1, "I live in Lisbon"))
    acme.assert_fact("ana", "works_at", "Acme", evidence=quote(o2, "I work at Acme"))
    acme.assert_fact("ana", "likes", "opera", evidence=quote(o2, "I work at Acme"), audience="ben")
    acme.add_entity_alias("ana", "Ana Silva")

    got = acme.recall("Where does Ana Silva live?", embed=False)
    facts = [i for i in got.items if i.item == "fact"]
    # both facts about ana; the one sharing the query's words first; ben's private one never
    assert [f.body for f in facts] == ["ana lives in Lisbon", "ana works at Acme"]
    assert facts[0].fact_provenance.evidence[0].quote == "I live in Lisbon" and facts[0].fact_rank == 1
    assert got.meta.fact_count == 2 and got.meta.entities == ["ana"]
    assert got.meta.returned == len(got.items)
    assert [i.rank for i in got.items] == list(range(1, len(got.items) + 1))
    assert any(i.item == "memory" and i.body == "Ana has a cat" for i in got.items)
    # ben sees his private fact; a query naming no entity brings no facts
    assert "ana likes opera" in [i.body for i in acme.recall("what does ana like", embed=False, principal="ben").items]
    assert [i for i in acme.recall("who has a cat", embed=False).items if i.item == "fact"] == []
    # facts no longer believed are not recalled
    acme.retract_fact(facts[1].fact_id, reason="left the job")
    assert [i.body for i in acme.recall("Ana", embed=False).items if i.item == "fact"] == ["ana lives in Lisbon"]


@pytest.fixture
def hundred_thousand_facts(acme, db):
    """20k people, each living somewhere and knowing four others: 100k current facts (plus their history)."""
    said(acme, "bulk")
    bot = db.execute("select id from acme.peer where name = 'bot'").fetchone()[0]
    db.execute("insert into acme.entity (scope, name) select 'default', 'person ' || i from generate_series(1, 20000) i")
    db.execute("insert into acme.entity (scope, name) select 'default', 'town ' || i from generate_series(1, 500) i")
    db.execute("""insert into acme.fact (scope, subject_id, predicate, single_valued, object_id, statement, valid,
                                         known, asserted_by)
                  select 'default', p.id, 'knows', false, q.id, 'knows', tstzrange('2020-01-01', null),
                         tstzrange('2020-01-01', null), %(bot)s
                    from acme.entity p
                    join lateral (select generate_series(1, 4) k) k on true
                    join acme.entity q on q.name = 'person ' || (1 + (hashint4(p.id::int * 7 + k.k) & 16383))
                   where p.name like 'person %%'""", {"bot": bot})
    db.execute("""insert into acme.fact (scope, subject_id, predicate, single_valued, object_id, statement, valid,
                                         known, asserted_by)
                  select 'default', p.id, 'lives_in', true, t.id, 'lives in', tstzrange('2020-01-01', null),
                         tstzrange('2020-01-01', null), %(bot)s
                    from acme.entity p join acme.entity t on t.name = 'town ' || (1 + p.id %% 500)
                   where p.name like 'person %%'""", {"bot": bot})
    db.execute("analyze acme.fact")
    db.execute("analyze acme.entity")
    assert db.execute("select count(*) from acme.fact").fetchone()[0] == 100000
    return db.execute("select id from acme.entity where name = 'person 42'").fetchone()[0]


def plan(db, query, params=()):
    return "\n".join(r[0] for r in db.execute("explain " + query, params))


@pytest.mark.slow
def test_supersession_lookup_and_traversal_use_their_indexes_at_100k_facts(acme, db, hundred_thousand_facts):
    person = hundred_thousand_facts
    # the lookup assert_fact makes before closing a current single-valued value
    lookup = plan(db, """select f.id from acme.fact f
                          where f.subject_id = %s and f.predicate = 'lives_in' and f.single_valued
                            and upper_inf(f.known) and coalesce(f.observer_peer_id, 0) = 0
                            and f.valid && tstzrange(now(), null)""", (person,))
    assert "Seq Scan" not in lookup and ("fact_one_current_value" in lookup or "fact_subject" in lookup), lookup
    # each hop's two arms, through the eligibility rule as neighbourhood() runs them
    bot = db.execute("select id from acme.peer where name = 'bot'").fetchone()[0]
    for column, index in (("subject_id", "fact_subject"), ("object_id", "fact_object")):
        arm = plan(db, f"""select f.id from acme._eligible_facts(%s, array['default'], 'converse', now(), null) f
                            where f.{column} = any (%s) order by f.salience desc, f.id limit 200""",
                   (bot, [person, person + 1, person + 2]))
        assert "Seq Scan" not in arm and index in arm, arm
    # the bitemporal question
    as_of = plan(db, """select f.id from acme._eligible_facts(%s, array['default'], 'converse',
                                                              '2024-01-01', '2023-01-01') f
                         where f.subject_id = any (%s)""", (bot, [person]))
    assert "Seq Scan" not in as_of, as_of
    # and the functions answer from that neighbourhood
    rows = acme.neighbourhood(["person 42"], hops=2)
    assert 1 <= len([r for r in rows if r.depth == 1]) <= 10 and len(rows) < 200


def test_a_batch_of_facts_is_asserted_in_order_and_all_or_nothing(acme, db):
    o1, o2 = said(acme, "I live in Lisbon"), said(acme, "I moved to Porto")
    got = acme.assert_facts([
        {"subject": "ana", "predicate": "lives_in", "object": "Lisbon", "valid_from": T(2020),
         "evidence": quote(o1, "I live in Lisbon")},
        {"subject": "ana", "predicate": "lives_in", "object": "Porto", "valid_from": T(2024),
         "evidence": quote(o2, "I moved to Porto")}])
    assert [g.outcome for g in got] == ["inserted", "superseded"] and got[1].closed_facts == [got[0].fact_id]
    before = table_counts(db)
    with pytest.raises(errors.EvidenceMismatch):
        acme.assert_facts([{"subject": "ben", "predicate": "likes", "object": "tea", "evidence": quote(o1, "I live")},
                           {"subject": "ben", "predicate": "likes", "object": "jazz", "evidence": quote(o1, "jazz")}])
    with pytest.raises(errors.InvalidArgument, match="objekt"):
        acme.assert_facts([{"subject": "ben", "predicate": "likes", "objekt": "tea", "evidence": quote(o1, "I live")}])
    assert table_counts(db) == before


def test_entities_lists_only_what_the_principal_may_see(acme):
    o = said(acme, "I like jazz and I am allergic to peanuts")
    acme.assert_fact("ana", "likes", "jazz", evidence=quote(o, "I like jazz"))
    acme.assert_fact("ana", "allergic_to", "peanuts", evidence=quote(o, "allergic to peanuts"), audience="ben")
    listed = lambda who: {e.name: e.facts for e in acme.entities(principal=who)}
    assert listed("bot") == {"ana": 1, "jazz": 1}           # peanuts is named only by ben's private fact
    assert listed("ben") == {"ana": 2, "jazz": 1, "peanuts": 1}


def test_batch_errors_name_the_item_and_settings_are_range_checked(acme, db):
    o = said(acme, "I like jazz")
    with pytest.raises(errors.EvidenceMismatch, match=r"observation 1 of scope default.*\(item 2\)"):
        acme.assert_facts([{"subject": "ana", "predicate": "likes", "object": "jazz", "evidence": quote(o, "I like jazz")},
                           {"subject": "ana", "predicate": "likes", "object": "tea",
                            "evidence": [{"offset": o, "start": 0, "end": 6, "quote": "I love"}]}])
    assert db.execute("select count(*) from acme.fact").fetchone()[0] == 0
    for key, value in (("max_hops", "4"), ("max_hops", "0"), ("traversal_fanout", "2.5"),
                       ("recall_fact_limit", "-1"), ("lexical_match_budget", "0")):
        with pytest.raises(psycopg.Error) as exc:
            db.execute("select pgrecall.set_tenant_setting('acme', %s, %s::jsonb)", (key, value))
        assert exc.value.sqlstate == "PR006", (key, value)
