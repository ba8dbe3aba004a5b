"""What a caller hands remember_many / append_many, tried as a new user and as an attacker would: a value of the
wrong JSON shape (an object where a string is expected, an array inside an array) and a vector that cannot be
compared (all zeros, or empty) are refused naming the problem, and nothing of the batch is written.

Real PostgreSQL and the real driver."""

from __future__ import annotations

import json
import re

import numpy as np
import psycopg
import pytest

import pgrecall
from pgrecall import errors

MODEL = "all-MiniLM-L6-v2"


def _tenant(db, conninfo, name="bi"):
    db.execute("select pgrecall.create_tenant(%s)", (name,))
    mem = pgrecall.connect(conninfo.dsn(user=f"pgrecall_{name}_app"), tenant=name, principal="bot",
                           scopes=["default"])
    mem.add_scope("default")
    mem.add_peer("ana", "human")
    mem.add_peer("bot", "agent")
    with pgrecall.connect(conninfo.dsn(user=f"pgrecall_{name}_admin"), tenant=name, role="admin") as admin:
        admin.set_embedding_version(MODEL, 1)
    return mem


def _counts(db, tenant="bi"):
    return db.execute(f"select (select count(*) from {tenant}.memory), (select count(*) from {tenant}.observation),"
                      f" (select count(*) from {tenant}.memory_embedding)").fetchone()


def _item(offset, **changes):
    return {"body": "Ana plays the cello", "evidence": [offset], "purposes": ["converse"], **changes}


@pytest.mark.parametrize("changes,message", [
    ({"body": {"text": "Ana plays the cello"}}, "'body' of item 2 is a JSON object, where a single value"),
    ({"title": ["Music"]}, "'title' of item 2 is a JSON array, where a single value"),
    ({"about": [{"entity": "Ana"}]}, "'about' of item 2 is an array holding an object or an array"),
    ({"purposes": [["converse"]]}, "'purposes' of item 2 is an array holding an object or an array"),
    ({"evidence": "EVIDENCE"}, "'evidence' of item 2 is a JSON array, where"),  # replaced below: [[offset]]
], ids=["object body", "array title", "object in about", "nested purposes", "nested evidence"])
def test_a_batch_item_with_a_value_of_the_wrong_json_shape_is_refused_naming_key_and_item(db, conninfo, changes,
                                                                                         message):
    """jsonb's conversion stored an object's JSON text as the memory's body ('{"text": ...}'), an entity named
    '{"entity": "Ana"}', and read nested arrays as two-dimensional ones: now PR107 names the key and the item."""
    mem = _tenant(db, conninfo)
    [offset] = mem.append_many([{"body": "I play the cello", "source_role": "user", "actor": "ana"}])
    if changes.get("evidence") == "EVIDENCE":
        changes, message = {"evidence": [[offset]]}, "'evidence' of item 2 is an array holding an object or an array"
    counts = _counts(db)
    with pytest.raises(errors.InvalidArgument, match=re.escape(message)):
        mem.remember_many([_item(offset, body="Ana likes music"), _item(offset, **changes)])
    assert _counts(db) == counts


@pytest.mark.parametrize("changes,message", [
    ({"body": {"text": "hello"}}, "'body' of row 2 is a JSON object, where a single value"),
    ({"body": ["hello"]}, "'body' of row 2 is a JSON array, where a single value"),
    ({"audience": [["ana"]]}, "'audience' of row 2 is an array holding an object or an array"),
], ids=["object body", "array body", "nested audience"])
def test_an_appended_row_with_a_value_of_the_wrong_json_shape_is_refused_and_nothing_is_appended(db, conninfo,
                                                                                               changes, message):
    mem = _tenant(db, conninfo)
    counts = _counts(db)
    row = {"body": "hello", "source_role": "user", "actor": "ana", "payload": {"nested": {"is": ["fine"]}}}
    with pytest.raises(errors.InvalidArgument, match=re.escape(message)):
        mem.append_many([row, {**row, **changes}])
    assert _counts(db) == counts
    assert mem.append_many([row]) == [1]  # a payload takes any JSON object


def test_a_psql_caller_gets_the_same_refusal(db, conninfo):
    mem = _tenant(db, conninfo)
    [offset] = mem.append_many([{"body": "I play the cello", "source_role": "user", "actor": "ana"}])
    with conninfo.connect(user="pgrecall_bi_app") as app, pytest.raises(psycopg.Error) as info:
        app.execute("select * from bi.remember_many('bot', '{default}', 'default', %s::jsonb)",
                    (json.dumps([_item(offset, title={"a": 1})]),))
    assert info.value.sqlstate == "PR107"
    assert "'title' of item 1 is a JSON object" in str(info.value)


def test_a_row_that_is_not_an_object_is_refused_by_the_tenant_in_its_words(db, conninfo):
    """The driver failed on it itself ('str' object has no attribute 'items')."""
    mem = _tenant(db, conninfo)
    with pytest.raises(errors.InvalidArgument, match="every one of the rows must be a JSON object"):
        mem.append_many(["hello"])
    with pytest.raises(errors.InvalidArgument, match="every one of the items must be a JSON object"):
        mem.remember_many(["Ana plays the cello"])


@pytest.mark.parametrize("vector", [np.zeros(384), np.full(384, 1e-9)], ids=["zeros", "zeros at half precision"])
def test_a_vector_of_zeros_is_refused_it_would_rank_first_with_a_nan_score(db, conninfo, vector):
    """Its cosine to any query is NaN: recall ranked that memory first, with score NaN, and `recall --json`
    printed NaN, which no JSON parser reads."""
    mem = _tenant(db, conninfo)
    [offset] = mem.append_many([{"body": "I play the cello", "source_role": "user", "actor": "ana"}])
    counts = _counts(db)
    with pytest.raises(errors.WrongDimensions, match="all zeros"):
        mem.remember_many([_item(offset)], embeddings=[vector], embedding_model=MODEL, embedding_input_version=1)
    with pytest.raises(errors.WrongDimensions, match="all zeros"):
        mem.remember("Ana plays the cello", evidence=[offset], purposes=["converse"], embedding=vector,
                     embedding_model=MODEL, embedding_input_version=1)
    with conninfo.connect(user="pgrecall_bi_app") as app, pytest.raises(psycopg.Error) as info:
        app.execute("select * from bi.remember('bot', '{default}', 'default', 'Ana plays the cello', %s,"
                    " '{converse}', p_embedding => %s::real[]::halfvec, p_embedding_model => %s,"
                    " p_embedding_input_version => 1)", ([offset], [0.0] * 384, MODEL))
    assert info.value.sqlstate == "PR154"
    assert _counts(db) == counts


def _strict_json(text: str):
    """JSON as the standard has it: NaN and Infinity are not numbers a parser must read (Python's reads them)."""
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


def test_a_vector_of_zeros_stored_before_the_refusal_prints_its_cosine_as_null_not_nan(db, conninfo):
    """Zero vectors stored before they were refused are still in some tenants: their cosine is NaN, and
    `recall --json` printed `"cosine": NaN`, which JavaScript's JSON.parse and other strict readers refuse."""
    from test_install_paths import run_cli

    mem = _tenant(db, conninfo, "nanv")
    [offset] = mem.append_many([{"body": "I play the cello", "source_role": "user", "actor": "ana"}])
    unit = np.zeros(384)
    unit[0] = 1.0
    mem.remember("Ana plays the cello", evidence=[offset], purposes=["converse"], embedding=unit,
                 embedding_model=MODEL, embedding_input_version=1)
    db.execute("update nanv.memory_embedding set embedding = array_fill(0::real, array[384])::halfvec(384)")
    env = {"PGRECALL_DSN": conninfo.dsn(user="pgrecall_nanv_app"), "PGRECALL_TENANT": "nanv"}
    proc = run_cli("recall", "--as", "bot", "--scopes", "default", "who plays the cello", "--mode", "dense",
                   "--json", env=env)
    answer = _strict_json(proc.stdout)
    assert [(item["body"], item["cosine"]) for item in answer["items"]] == [("Ana plays the cello", None)]


def test_an_empty_vector_is_refused_naming_its_dimensions(db, conninfo):
    """pgvector refused it first, in its words ('vector must have at least 1 dimension')."""
    mem = _tenant(db, conninfo)
    [offset] = mem.append_many([{"body": "I play the cello", "source_role": "user", "actor": "ana"}])
    counts = _counts(db)
    for call in (lambda: mem.remember_many([_item(offset)], embeddings=[[]], embedding_model=MODEL,
                                           embedding_input_version=1),
                 lambda: mem.remember("Ana plays the cello", evidence=[offset], purposes=["converse"], embedding=[],
                                      embedding_model=MODEL, embedding_input_version=1)):
        with pytest.raises(errors.WrongDimensions, match="an embedding has 0 dimensions, not 384"):
            call()
    assert _counts(db) == counts


def test_a_session_message_or_a_fact_item_with_an_object_where_a_name_is_expected_is_refused(db, conninfo):
    """add_messages stored '{"a": 1}' as the turn's text; assert_facts made an entity named '{"n": "Ana"}'."""
    mem = _tenant(db, conninfo)
    session = mem.create_session("trial")
    mem.add_session_peers(session, ["ana", "bot"])
    counts = _counts(db)
    with pytest.raises(errors.InvalidArgument, match=re.escape("'body' of message 1 is a JSON object")):
        mem.add_messages(session, [{"actor": "ana", "body": {"a": 1}}])
    assert _counts(db) == counts
    [said] = mem.append_many([{"body": "Ana has a dog named Rex", "source_role": "user", "actor": "ana"}])
    evidence = [{"offset": said, "quote": "a dog named Rex"}]
    with pytest.raises(errors.InvalidArgument, match=re.escape("'subject' of fact item 1 is a JSON object")):
        mem.assert_facts([{"subject": {"n": "Ana"}, "predicate": "has_pet", "object": "Rex", "evidence": evidence}])
    with pytest.raises(errors.InvalidArgument, match=re.escape("'object' of fact item 1 is a JSON array")):
        mem.assert_facts([{"subject": "Ana", "predicate": "has_pet", "object": ["Rex"], "evidence": evidence}])
    assert db.execute("select count(*) from bi.fact").fetchone()[0] == 0
    assert mem.assert_facts([{"subject": "Ana", "predicate": "has_pet", "object": "Rex", "evidence": evidence}])


@pytest.mark.parametrize("given,message", [
    ([0.05] * 384, "embeddings is one vector of 384 numbers, not one vector per item"),
    (np.full(384, 0.05, dtype=np.float32), "embeddings is one vector of 384 numbers, not one vector per item"),
    ("abc", "embeddings must be a list with one vector per item, not str"),
], ids=["flat list", "flat array", "str"])
def test_embeddings_given_as_one_vector_or_a_string_are_refused_saying_what_they_are(db, conninfo, given, message):
    """They were counted as '384 embeddings for 1 items' and '3 embeddings for 1 items'."""
    mem = _tenant(db, conninfo)
    [offset] = mem.append_many([{"body": "I play the cello", "source_role": "user", "actor": "ana"}])
    counts = _counts(db)
    with pytest.raises(errors.InvalidArgument, match=re.escape(message)):
        mem.remember_many([_item(offset)], embeddings=given, embedding_model=MODEL, embedding_input_version=1)
    assert _counts(db) == counts
