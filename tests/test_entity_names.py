"""Entity names and aliases hold nothing a reader cannot see, and are never blank.

An entity's name is shown to people (recall's entities and facts, the duplicate-review screen), so a
name given through remember's ``about``, assert_fact or add_entity_alias is refused (PR140) when it holds
a control, format or invisible character (a bidi override, a zero-width space, an odd space), and so is
an empty or blank ``about`` name, which was dropped silently. The call fails whole: nothing is stored.
Names in any script, mixed or not, are still names.
"""

from __future__ import annotations

import re

import pytest

from conftest import table_counts
from pgrecall import errors

# Each was accepted as an entity name (the attacker's trial): shown raw, the bidi override reorders
# what follows it on the review screen.
HOSTILE = ["Ri\u202eta", "\u202eRita", "Ri\u200bta", "Rita\u2066x\u2069", "Ri\u00adta", "Rita\u00a0Lopes",
           "Rita\u3000Lopes", "Rita\x1b[31m", "Rita\nLopes", "\ufeffRita\u200d"]
RAW = re.compile("[\x00-\x1f\x7f-\x9f\u00a0\u00ad\u200b-\u200f\u202a-\u202e\u2066-\u2069\u3000\ufeff]")


def refused(call) -> errors.InvalidName:
    with pytest.raises(errors.InvalidName) as info:
        call()
    error = info.value
    assert error.__cause__.sqlstate == "PR140" and error.hint
    assert isinstance(error, errors.InvalidArgument)
    assert not RAW.search(error.args[0]), error.args[0]  # the character is shown, not sent to the reader
    return error


@pytest.mark.parametrize("name", HOSTILE, ids=ascii)
def test_a_hostile_about_name_is_refused_and_nothing_of_the_memory_is_stored(acme, db, name):
    said = acme.append("Rita is my sister", role="user", actor="ana")
    before = table_counts(db)
    error = refused(lambda: acme.remember("Ana's sister is Rita", evidence=[said], purposes=["converse"],
                                          about=["Ana", name]))
    assert "entity name" in error.args[0]
    assert table_counts(db) == before


def test_the_message_shows_the_character_as_an_escape(acme):
    said = acme.append("Rita is my sister", role="user", actor="ana")
    error = refused(lambda: acme.remember("Ana's sister is Rita", evidence=[said], purposes=["converse"],
                                          about=["Ri\u202eta"]))
    assert "'Ri\\u202eta'" in error.args[0] and "U+202E" in error.args[0]


def test_a_character_beyond_four_hex_digits_is_named_whole(acme):
    """A tag character (U+E0041, 'A' drawn as nothing) was named U+E004 in the message, another character:
    lpad cut the code to four digits. The peer rule's message said the same."""
    said = acme.append("Rita is my sister", role="user", actor="ana")
    for call in (lambda: acme.remember("Ana's sister is Rita", evidence=[said], purposes=["converse"],
                                       about=["Rita\U000e0041"]),
                 lambda: acme.add_peer("rita\U000e0041", "human")):
        message = refused(call).args[0]
        assert "U+E0041," in message and "\\U000e0041" in message, message

def test_one_hostile_name_refuses_the_whole_batch(acme, db):
    said = acme.append("Rita is my sister and Ben likes tea", role="user", actor="ana")
    before = table_counts(db)
    error = refused(lambda: acme.remember_many([
        {"body": "Ben likes tea", "evidence": [said], "purposes": ["converse"], "about": ["Ben"]},
        {"body": "Ana's sister is Rita", "evidence": [said], "purposes": ["converse"], "about": ["Ri\u202eta"]}]))
    assert "(item 2)" in error.args[0]
    assert table_counts(db) == before


def test_remember_said_takes_back_its_turn_when_an_about_name_is_refused(acme, db):
    before = table_counts(db)
    refused(lambda: acme.remember("Ana's sister is Rita", said="Rita is my sister", purposes=["converse"],
                                  about=["Ri\u200bta"]))
    assert table_counts(db) == before


@pytest.mark.parametrize("name", ["", "   ", "\t\n", "\u00a0"], ids=ascii)
def test_a_blank_about_name_is_refused_not_dropped(acme, db, name):
    said = acme.append("Rita is my sister", role="user", actor="ana")
    before = table_counts(db)
    error = refused(lambda: acme.remember("Ana's sister is Rita", evidence=[said], purposes=["converse"],
                                          about=[name]))
    assert "empty" in error.args[0]
    assert table_counts(db) == before


def test_derive_and_supersede_refuse_a_hostile_about_name(acme, db):
    said = acme.append("Rita is my sister and she lives in Porto", role="user", actor="ana")
    sister = acme.remember("Ana's sister is Rita", evidence=[said], purposes=["converse"], about=["Rita"]).memory_id
    porto = acme.remember("Rita lives in Porto", evidence=[said], purposes=["converse"], about=["Rita"]).memory_id
    before = table_counts(db)
    refused(lambda: acme.derive([sister, porto], "Ana's sister lives in Porto", about=["Ri\u202eta"]))
    refused(lambda: acme.derive([sister, porto], "Ana's sister lives in Porto", about=[""]))
    refused(lambda: acme.supersede(sister, "Ana's sister is Rita Lopes", revision=1, evidence=[said],
                                   about=["Rita\u200bLopes"]))
    assert table_counts(db) == before


@pytest.mark.parametrize("name", HOSTILE[:4], ids=ascii)
def test_assert_fact_refuses_a_hostile_subject_or_object(acme, db, name):
    said = acme.append("I live in Lisbon", role="user", actor="ana")
    evidence = [{"offset": said, "quote": "I live in Lisbon"}]
    before = table_counts(db)
    assert "subject" in refused(lambda: acme.assert_fact(name, "lives_in", "Lisbon", evidence=evidence)).args[0]
    assert "object" in refused(lambda: acme.assert_fact("Ana", "lives_in", name, evidence=evidence)).args[0]
    assert table_counts(db) == before


@pytest.mark.parametrize("alias", HOSTILE[:4], ids=ascii)
def test_add_entity_alias_refuses_a_hostile_alias(acme, db, alias):
    said = acme.append("Rita is my sister", role="user", actor="ana")
    acme.remember("Ana's sister is Rita", evidence=[said], purposes=["converse"], about=["Rita"])
    before = table_counts(db)
    assert "alias" in refused(lambda: acme.add_entity_alias("Rita", alias)).args[0]
    assert table_counts(db) == before
    assert [e.aliases for e in acme.entities("Rita")] == [[]]


def test_names_in_any_script_are_still_names(acme):
    names = ["\u00c9mile", "\u6771\u4eac", "\u0391\u0398\u0397\u039d\u0391", "\u041c\u043e\u0441\u043a\u0432\u0430",
             "\u0645\u0631\u064a\u0645", "\u03a9mega Labs", "R2-D2", "O'Brien"]
    said = acme.append("I live in Lisbon and I know them all", role="user", actor="ana")
    acme.remember("Ana knows them all", evidence=[said], purposes=["converse"], about=names + ["  Ana\n"])
    assert {e.name for e in acme.entities()} == set(names) | {"Ana"}
    fact = acme.assert_fact("\u00c9mile", "lives_in", "\u6771\u4eac",
                            evidence=[{"offset": said, "quote": "I live in Lisbon"}])
    assert fact.fact_id > 0
    assert acme.add_entity_alias("\u6771\u4eac", "\u30c8\u30a6\u30ad\u30e7\u30a6").aliases == [
        "\u30c8\u30a6\u30ad\u30e7\u30a6"]


def test_a_name_stored_before_the_rule_is_left_and_still_carried(acme, db):
    # Upgrade rewrites nothing: a memory about an entity whose stored name breaks the rule can still be
    # superseded (its about-links carried over) and the entity merged into a clean one.
    said = acme.append("Rita is my sister", role="user", actor="ana")
    sister = acme.remember("Ana's sister is Rita", evidence=[said], purposes=["converse"], about=["Rita"]).memory_id
    db.execute("update acme.entity set name = 'Ri' || chr(8238) || 'ta' where name = 'Rita'")
    newer = acme.supersede(sister, "Ana's sister is Rita, a nurse", revision=1, evidence=[said])
    assert [e.name for e in acme.entities()] == ["Ri\u202eta"]
    assert db.execute("select count(*) from acme.memory_link where memory_id = %s and link_type = 'about'",
                      (newer,)).fetchone()[0] == 1


# A combining mark with no letter before it (an attacker's trial: each was accepted as an entity): shown
# alone it is a stray accent, and on a screen it lands on whatever text comes before the name.
MARK_LED = ["\u0301", "\u0301\u0301", "\u20dd", "\u0301Rita", "Rita \u0301Lopes", "Rita  \u0308Lopes", "\u093fRita"]


@pytest.mark.parametrize("name", MARK_LED, ids=ascii)
def test_a_name_whose_word_starts_with_a_combining_mark_is_refused_whole(acme, db, name):
    said = acme.append("Rita is my sister", role="user", actor="ana")
    before = table_counts(db)
    error = refused(lambda: acme.remember("Ana's sister is Rita", evidence=[said], purposes=["converse"],
                                          about=["Ana", name]))
    assert "combining mark" in error.args[0] and "U+" in error.args[0]
    refused(lambda: acme.assert_fact(name, "lives_in", "Porto", evidence=[{"offset": said, "quote": "Rita"}]))
    refused(lambda: acme.assert_fact("Rita", "knows", name, evidence=[{"offset": said, "quote": "Rita"}]))
    assert table_counts(db) == before


def test_marks_on_letters_are_names_in_any_script(acme):
    said = acme.append("Rita is my sister", role="user", actor="ana")
    names = ["E\u0301mile", "Zoe\u0308 Lopes", "Nguye\u0302\u0303n", "\u0928\u092e\u0938\u094d\u0924\u0947",
             "\u05e9\u05b8\u05c1\u05dc\u05d5\u05b9\u05dd", "Ri\u0301ta \u00c9mile"]
    acme.remember("Ana's friends", evidence=[said], purposes=["converse"], about=names)
    assert len(acme.entities()) == len(names)
