"""An entity is one entity whatever Unicode form its name was sent in.

A macOS keyboard sends "Émile" in NFD ("E" and U+0301, a combining acute accent); most other clients send
it in NFC (one character, U+00C9). Entity identity compared names without normalising them, so the two
spellings made two entities and the facts, aliases and memories about Émile were split between them. Now
identity compares names in NFC (as peer names already are), every call that looks an entity up or makes one
agrees, and upgrading a tenant folds the entities that the old rule had split.
"""

from __future__ import annotations

import unicodedata

import pytest

from pgrecall import errors

NFC = "\u00c9mile"
NFD = "E\u0301mile"
assert unicodedata.normalize("NFD", NFC) == NFD and NFC != NFD


def quote(offset, text):
    return [{"offset": offset, "quote": text}]


def entity_rows(db, tenant="acme"):
    return db.execute(f"select id, name, merged_into from {tenant}.entity order by id").fetchall()


def test_a_memory_about_the_nfd_name_and_a_fact_about_the_nfc_name_share_one_entity(acme, db):
    said = acme.append("Émile lives in Lisbon and plays the cello", role="user", actor="ana")
    acme.remember("Émile plays the cello", evidence=[said], purposes=["converse"], about=[NFD])
    acme.assert_fact(NFC, "lives_in", "Lisbon", evidence=quote(said, "lives in Lisbon"))
    assert [name for _, name, _ in entity_rows(db)] == [NFD, "Lisbon"]
    for form in (NFC, NFD):
        [emile] = acme.entities(form)
        assert (emile.name, emile.facts) == (NFD, 1)
        assert [(f.predicate, f.object) for f in acme.facts_as_of(form)] == [("lives_in", "Lisbon")]


def test_facts_asserted_in_either_form_are_about_one_subject(acme, db):
    said = acme.append("Émile lives in Porto and speaks French", role="user", actor="ana")
    acme.assert_fact(NFC, "lives_in", "Porto", evidence=quote(said, "lives in Porto"))
    acme.assert_fact(NFD, "speaks", "French", evidence=quote(said, "speaks French"))
    # an object in the other form is the same entity too
    acme.assert_fact("Ana", "knows", NFD, evidence=quote(said, "Émile"))
    assert len(acme.entities()) == 4  # Émile, Porto, French, Ana
    assert sorted((f.predicate, f.object) for f in acme.facts_as_of(NFD)) == [("lives_in", "Porto"),
                                                                             ("speaks", "French")]
    assert [f.object for f in acme.facts_as_of("Ana", "knows")] == [NFC]


def test_remember_many_and_derive_about_both_forms_link_one_entity(acme, db):
    said = acme.append("Émile plays the cello and sings", role="user", actor="ana")
    rows = acme.remember_many([
        {"body": "Émile plays the cello", "evidence": [said], "purposes": ["converse"], "about": [NFC]},
        {"body": "Émile sings", "evidence": [said], "purposes": ["converse"], "about": [NFD, NFC]}])
    acme.derive([r.memory_id for r in rows], "Émile is a musician", about=[NFD])
    assert len(entity_rows(db)) == 1
    assert db.execute("select count(distinct target_entity_id), count(*) from acme.memory_link "
                      "where link_type = 'about'").fetchone() == (1, 3)


def test_an_alias_in_one_form_is_found_in_the_other(acme, db):
    said = acme.append("Zoë, whom we call Zoé, lives in Lisbon", role="user", actor="ana")
    acme.assert_fact("Zoe Lopes", "lives_in", "Lisbon", evidence=quote(said, "lives in Lisbon"))
    nfd_alias = unicodedata.normalize("NFD", "Zoé")
    assert acme.add_entity_alias("Zoe Lopes", nfd_alias).aliases == ["zoé"]  # stored in NFC
    assert [e.name for e in acme.entities("Zoé")] == ["Zoe Lopes"]
    assert [f.object for f in acme.facts_as_of("ZOÉ", "lives_in")] == ["Lisbon"]
    # the NFC spelling of a name another entity has (in NFD) already denotes that entity
    acme.remember("Émile is Zoë's friend", evidence=[said], purposes=["converse"], about=[NFD])
    with pytest.raises(errors.PgrecallError) as refused:
        acme.add_entity_alias("Zoe Lopes", NFC)
    assert refused.value.__cause__.sqlstate == "PR107"


def test_merge_entities_names_the_entity_in_either_form(acme, db, acme_admin):
    said = acme.append("Émile, known as Em, lives in Lisbon", role="user", actor="ana")
    acme.assert_fact(NFC, "lives_in", "Lisbon", evidence=quote(said, "lives in Lisbon"))
    acme.assert_fact("Em", "lives_in", "Lisbon", evidence=quote(said, "lives in Lisbon"))
    merged = acme_admin.merge_entities(NFD, "Em")
    assert merged.facts_moved == 1
    assert [e.name for e in acme.entities("em") if e.merged_into is None] == [NFC]


def test_a_question_in_nfd_finds_the_facts_about_an_nfc_entity(acme, db):
    said = acme.append("Émile lives in Lisbon", role="user", actor="ana")
    fact = acme.assert_fact(NFC, "lives_in", "Lisbon", evidence=quote(said, "lives in Lisbon")).fact_id
    for question in (f"where does {NFD} live", f"where does {NFC} live"):
        assert [i.fact_id for i in acme.recall(question, mode="lexical").items if i.kind == "fact"] == [fact], question


def test_marks_typed_in_either_order_are_one_name_but_compatibility_look_alikes_stay_two(acme, db):
    """NFC puts combining marks in canonical order and composes them: Vietnamese "ộ" typed as o, circumflex,
    dot below or as o, dot below, circumflex is one letter, so the three spellings of Hà Nội are one entity
    (lower() folds none of them). NFC, not NFKC, as for peer names: the "fi" ligature (U+FB01) is only
    compatible with "fi", a look-alike that stays a name of its own (merge_entities folds it if need be)."""
    said = acme.append("Hà Nội files", role="user", actor="ana")
    hanoi = ["Ha\u0300 No\u0302\u0323i", "Ha\u0300 No\u0323\u0302i", "H\u00e0 N\u1ed9i"]
    assert len({unicodedata.normalize("NFC", n) for n in hanoi}) == 1 and len(set(hanoi)) == 3
    for name in [*hanoi, "\ufb01les", "files"]:
        acme.remember(f"{name} is a name", evidence=[said], purposes=["converse"], about=[name])
    assert [name for _, name, _ in entity_rows(db)] == [hanoi[0], "\ufb01les", "files"]
    assert [e.name for e in acme.entities("H\u00c0 N\u1ed8I")] == [hanoi[0]]


NFD_ZOE = unicodedata.normalize("NFD", "Zoé")


def old_tenant_with_split_entities(db):
    """A tenant at migration 0052 whose entities were made by the old rule: Émile twice (NFD first, then
    NFC), each with facts, aliases, an about-link and sources; one of Émile's facts contradicts the other's."""
    db.execute("select pgrecall.create_tenant('old', 52)")
    db.execute("insert into old.scope (name, log_watermark) values ('default', 1)")
    db.execute("insert into old.peer (name, kind, data_subject_ids) values ('ana', 'human', '{subject-ana}')")
    [ana] = db.execute("select id from old.peer").fetchone()
    [obs] = db.execute("insert into old.observation (scope, log_offset, kind, occurred_at, source_role, actor_id, body)"
                       " values ('default', 1, 'message', now(), 'user', %s, 'about Émile') returning id",
                       (ana,)).fetchone()
    ids = {}
    for name in (NFD, NFC, "Lisbon", "Porto", "Cello"):
        ids[name] = db.execute("insert into old.entity (scope, name) values ('default', %s) returning id",
                               (name,)).fetchone()[0]
        db.execute("insert into old.projection_dependency (kind, row_key, observation_id) values ('entity', %s, %s)",
                   (str(ids[name]), obs))
    # an entity merged into the later Émile before the upgrade
    ids["Emmy"] = db.execute("insert into old.entity (scope, name, merged_into) values ('default', 'Emmy', %s)"
                             " returning id", (ids[NFC],)).fetchone()[0]
    db.execute("update old.entity set aliases = %s where id = %s", (["em"], ids[NFD]))
    db.execute("update old.entity set aliases = %s where id = %s", ([NFD_ZOE.lower(), "emmy"], ids[NFC]))
    db.execute("insert into old.entity_alias_subject (entity_id, alias, data_subject_id) values (%s, %s, 'subject-ana')",
               (ids[NFC], NFD_ZOE.lower()))

    def fact(subject, predicate, single, obj, years):
        return db.execute(
            "insert into old.fact (scope, subject_id, predicate, single_valued, object_id, statement, valid, known,"
            " asserted_by) values ('default', %s, %s, %s, %s, %s, tstzrange(%s, null),"
            " tstzrange(now() - interval '1 day', null), %s) returning id",
            (subject, predicate, single, obj, f"{predicate} {obj}", f"{years}-01-01", ana)).fetchone()[0]

    facts = {"lives_lisbon": fact(ids[NFD], "lives_in", True, ids["Lisbon"], 2020),
             "likes_cello": fact(ids[NFD], "likes", False, ids["Cello"], 2020),
             "lives_porto": fact(ids[NFC], "lives_in", True, ids["Porto"], 2021),
             "knows_emile": fact(ids["Lisbon"], "knows", False, ids[NFC], 2021)}
    [memory] = db.execute("insert into old.memory (scope, kind, body, origin, purposes, created_by) values"
                          " ('default', 'note', 'Émile plays the cello', 'told', '{converse}', %s) returning id",
                          (ana,)).fetchone()
    for entity in (ids[NFD], ids[NFC]):
        [link] = db.execute("insert into old.memory_link (memory_id, link_type, target_entity_id) "
                            "values (%s, 'about', %s) returning id", (memory, entity)).fetchone()
        db.execute("insert into old.projection_dependency (kind, row_key, observation_id) "
                   "values ('memory_link', %s, %s)", (str(link), obs))
    return ids, facts, memory


def test_upgrading_folds_entities_the_old_rule_split_and_loses_nothing(db):
    ids, facts, memory = old_tenant_with_split_entities(db)
    applied = db.execute("select * from pgrecall.upgrade_tenant('old')").fetchall()
    assert ("migration", "0053_entity_names_nfc.sql") in applied

    # one Émile, the first made, keeps its row and name; the later one is gone, everything of it moved
    assert entity_rows(db, "old") == [(ids[NFD], NFD, None), (ids["Lisbon"], "Lisbon", None),
                                      (ids["Porto"], "Porto", None), (ids["Cello"], "Cello", None),
                                      (ids["Emmy"], "Emmy", ids[NFD])]
    emile = ids[NFD]
    assert db.execute("select normalized_name, aliases from old.entity where id = %s", (emile,)).fetchone() == \
        ("émile", ["em", "emmy", "zoé"])
    rows = {r[0]: r[1:] for r in db.execute(
        "select id, subject_id, object_id, upper_inf(known), retraction_reason from old.fact").fetchall()}
    assert rows == {
        facts["lives_lisbon"]: (emile, ids["Lisbon"], True, None),  # the kept entity's value stays
        facts["likes_cello"]: (emile, ids["Cello"], True, None),
        # the later entity's contradicting value is closed, as merge_entities closes it; still in history
        facts["lives_porto"]: (emile, ids["Porto"], False, "merged: contradicted the kept entity"),
        facts["knows_emile"]: (ids["Lisbon"], emile, True, None)}
    assert db.execute("select entity_id, alias, data_subject_id from old.entity_alias_subject").fetchall() == [
        (emile, "zoé", "subject-ana")]
    # the memory was about both; it is about the one entity once, with its sources
    links = db.execute("select id from old.memory_link where memory_id = %s and target_entity_id = %s",
                       (memory, emile)).fetchall()
    assert len(links) == 1 and db.execute("select count(*) from old.memory_link").fetchone() == (1,)
    assert db.execute("select count(*) from old.projection_dependency where kind = 'memory_link' and row_key = %s",
                      (str(links[0][0]),)).fetchone() == (1,)
    assert db.execute("select row_key from old.projection_dependency where kind = 'entity' order by 1").fetchall() \
        == sorted((str(ids[n]),) for n in (NFD, "Lisbon", "Porto", "Cello"))

    # the functions agree: either form, and the aliases in either form, name the one entity
    for name in (NFC, NFD, "EM", "Zoé", NFD_ZOE, "Emmy"):
        assert db.execute("select old._entity_named('default', %s)", (name,)).fetchone() == (emile,), name
    assert db.execute("select count(*) from old.entity where normalized_name = 'émile'").fetchone() == (1,)
