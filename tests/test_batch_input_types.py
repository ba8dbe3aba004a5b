"""The batch inputs as declared types (issue #47 item 1): remember_many's items and append_observations' rows are
JSON objects whose keys are the attributes of the tenant's types memory_item and observation_row. The functions
read the JSON into them and refuse a key outside them; Python's typed dicts are generated from them."""

from __future__ import annotations

import json

import psycopg
import pytest

import pgrecall
from pgrecall import errors


def _attributes(db, type_name: str) -> list[tuple[str, str]]:
    return db.execute("""select a.attname, col_description(a.attrelid, a.attnum) from pg_attribute a
                          where a.attrelid = %s::regclass and a.attnum > 0 and not a.attisdropped
                          order by a.attnum""", (type_name,)).fetchall()


@pytest.mark.parametrize(("type_name", "typed_dict"), [("acme.memory_item", pgrecall.MemoryItem),
                                                       ("acme.observation_row", pgrecall.ObservationRow)])
def test_pythons_typed_dicts_are_the_declared_input_types(db, acme, type_name, typed_dict):
    declared = _attributes(db, type_name)
    assert list(typed_dict.__annotations__) == [name for name, _ in declared]
    assert typed_dict.__required_keys__ == {name for name, comment in declared if comment.startswith("Required.")}
    assert typed_dict.__required_keys__  # the type says which keys a caller must give


def test_every_key_of_the_declared_types_is_taken_and_another_is_refused_naming_them(db, acme):
    rows: list[pgrecall.ObservationRow] = [{
        "body": "I moved to Porto", "source_role": "user", "kind": "message", "actor": "ana", "session_id": None,
        "occurred_at": "2026-12-01T10:00:00Z", "payload": {"channel": "chat"}, "data_subject_id": "ana",
        "lawful_basis": "consent", "classification": "confidential", "retention_until": "2030-01-01T00:00:00Z",
        "audience": ["ana", "bot"]}]
    [offset] = acme.append_many(rows)
    items: list[pgrecall.MemoryItem] = [{
        "body": "Ana lives in Porto", "evidence": [offset], "purposes": ["converse"], "audience": "ana",
        "kind": "fact", "title": "Home", "confidence": 0.9, "about": ["Ana"], "observer": None,
        "widening_reason": None}]
    [made] = acme.remember_many(items)
    assert made.created
    with pytest.raises(errors.InvalidArgument) as refused:
        acme.remember_many([{"body": "Ana rows", "evidence": [offset], "purposes": ["converse"], "colour": "red"}])
    assert "unknown key 'colour' in item 1" in str(refused.value)
    assert ", ".join(name for name, _ in _attributes(db, "acme.memory_item")) in str(refused.value)
    with pytest.raises(errors.InvalidArgument, match="unknown key 'speaker' in row 1"):
        acme.append_many([{"body": "Hello", "source_role": "user", "speaker": "ana"}])


def test_the_functions_read_the_batch_through_the_declared_type(db, acme):
    """The keys a batch may hold are the type's: an attribute a DBA adds to memory_item is a key remember_many
    takes (it has no column to go to, so it is read and left), where a list of keys written in the function
    refused it."""
    [offset] = acme.append_many([{"body": "Ana rows on the Douro", "source_role": "user", "actor": "ana"}])
    db.execute("alter type acme.memory_item add attribute mood text")
    [made] = acme.remember_many([{"body": "Ana rows on the Douro", "evidence": [offset], "purposes": ["converse"],
                                  "mood": "calm"}])
    assert made.created


def test_a_psql_caller_gives_the_batch_as_a_json_literal_as_before(acme, conninfo):
    [offset] = acme.append_many([{"body": "Ben plays the cello", "source_role": "user", "actor": "ana"}])
    with psycopg.connect(conninfo.dsn(user="pgrecall_acme_app"), autocommit=True) as app:
        [(memory_id, status)] = app.execute(
            "select memory_id, status from acme.remember_many('bot', '{default}', 'default', %s::text::jsonb)",
            (json.dumps([{"body": "Ben plays the cello", "evidence": [offset], "purposes": ["converse"]}]),)).fetchall()
    assert memory_id is not None and status == "created"
