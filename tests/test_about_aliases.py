"""A name given in ``about`` that is an alias names the entity the alias belongs to.

remember (and remember_many, derive, supersede) matched an about name against entity names alone: an alias
such as "Mom" for the entity "Ana Lopes" made a second entity named "Mom", the memory was linked to it, and
from then on every lookup by "Mom" (entities, facts_as_of, assert_fact, recall's entity words) found the new,
empty entity before the alias. Now an about name means what it means to every other call (_entity_for): the
entity it names, followed to where it was merged, else the entity holding it as an alias, else a new one.
"""

from __future__ import annotations


def quote(offset, text):
    return [{"offset": offset, "quote": text}]


def entity_names(db) -> list[str]:
    return [r[0] for r in db.execute("select name from acme.entity order by id")]


def about_targets(db, memory_id: int) -> list[str]:
    return [r[0] for r in db.execute("select e.name from acme.memory_link l join acme.entity e on e.id = l.target_entity_id"
                                     " where l.memory_id = %s and l.link_type = 'about' order by e.name", (memory_id,))]


def ana_with_an_alias(acme) -> int:
    said = acme.append("My mom Ana Lopes lives in Lisbon", role="user", actor="ana")
    acme.assert_fact("Ana Lopes", "lives_in", "Lisbon", evidence=quote(said, "lives in Lisbon"))
    acme.add_entity_alias("Ana Lopes", "Mom")
    return said


def test_a_memory_about_an_alias_is_about_the_aliased_entity(acme, db):
    said = ana_with_an_alias(acme)
    memory = acme.remember("Mom loves the sea", evidence=[said], purposes=["converse"], about=["mom"]).memory_id
    assert entity_names(db) == ["Ana Lopes", "Lisbon"], "no entity named Mom"
    assert about_targets(db, memory) == ["Ana Lopes"]
    [found] = acme.entities("Mom")
    assert (found.name, found.facts) == ("Ana Lopes", 1)
    assert [(f.predicate, f.object) for f in acme.facts_as_of("Mom")] == [("lives_in", "Lisbon")]
    # a fact asserted about the alias afterwards is still Ana's
    acme.assert_fact("MOM", "likes", "the sea", evidence=quote(said, "Ana Lopes"))
    assert sorted(f.predicate for f in acme.facts_as_of("Ana Lopes")) == ["likes", "lives_in"]


def test_remember_many_derive_and_supersede_link_an_alias_to_its_entity(acme, db):
    said = ana_with_an_alias(acme)
    first, second = acme.remember_many([
        {"body": "Mom swims", "evidence": [said], "purposes": ["converse"], "about": ["Mom", "Ana Lopes"]},
        {"body": "Mom sails", "evidence": [said], "purposes": ["converse"], "about": ["Mom", "Boats"]}])
    derived = acme.derive([first.memory_id, second.memory_id], "Mom likes the water", about=["Mom"])
    replaced = acme.supersede(first.memory_id, "Mom swims every day", revision=1, evidence=[said], about=[" mom "])
    assert entity_names(db) == ["Ana Lopes", "Lisbon", "Boats"]
    assert about_targets(db, first.memory_id) == ["Ana Lopes"], "one link, however many names denote the entity"
    assert about_targets(db, second.memory_id) == ["Ana Lopes", "Boats"]
    assert about_targets(db, derived) == ["Ana Lopes"]
    assert about_targets(db, replaced) == ["Ana Lopes"]
    assert [e.name for e in acme.entities("mom")] == ["Ana Lopes"]


def test_a_new_name_in_about_still_makes_an_entity(acme, db):
    said = acme.append("Ben has a dog called Rex", role="user", actor="ana")
    acme.remember("Ben has a dog", evidence=[said], purposes=["converse"], about=["Ben", "Rex", "ben"])
    assert entity_names(db) == ["Ben", "Rex"]
