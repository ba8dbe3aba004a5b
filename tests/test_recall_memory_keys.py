"""Keys from what was said (issue #48 item 1; migration 0039, plpgsql/memory/keys.sql, plpgsql/recall/key_arm.sql):
a memory is also found under statements derived from its turn (remember_keys), with the setting
recall_memory_keys on; recall returns the memory, once, never a key; a key reaches no principal its memory
does not; erasing the turn erases its keys.

Real PostgreSQL, real all-MiniLM-L6-v2 embeddings computed by the real worker for the hybrid case.
"""

import pytest

from pgrecall import errors
from pgrecall.deriver import statement_keys
from pgrecall.worker import Worker

# Ana's turn never names her; Ben's names her and the words the question asks for, in a long turn.
ANA = "What cheered me up this week was my first zqviolin lesson."
BEN = ("The football game at the stadium cheered everyone up last night, with the fireworks and the band; "
       "Ana was there too with her cousins and her neighbours from the old street.")
QUESTION = "What cheered Ana up?"


def keys_setting(conninfo, on: bool) -> None:
    with conninfo.connect(user="pgrecall_acme_admin") as admin:
        admin.execute("select acme.set_setting('recall_memory_keys', %s::jsonb)", ("true" if on else "false",))


def turn(mem, text: str, actor: str, audience: str | None = None) -> tuple[int, int]:
    """The turn appended and remembered as said (for ``audience`` only, if given); returns (offset, memory id)."""
    offset = mem.append(text, role="user", actor=actor)
    got = mem.remember(text, evidence=[offset], purposes=["converse"], audience=audience)
    assert got.created, got
    return offset, got.memory_id


def with_keys(mem, memory_id: int, text: str, actor: str, **kw) -> list[str]:
    keys = statement_keys({"body": text, "actor": actor, "offset": 0})
    assert mem.remember_keys(memory_id, keys, **kw) == len(keys)
    return keys


@pytest.fixture
def cheered(acme):
    _, ana = turn(acme, ANA, "ana")
    _, ben = turn(acme, BEN, "ben")
    return ana, ben


def ids(result) -> list[int]:
    return [i.memory_id for i in result.items]


def test_statement_keys_put_the_speakers_name_for_the_first_person():
    assert statement_keys({"body": ANA, "actor": "ana", "offset": 1}) == [
        "What cheered ana up this week was ana's first zqviolin lesson."]
    assert statement_keys({"body": "I'm in Porto. Are you? I live in Lisbon with Ben.", "actor": "ana",
                           "offset": 1}) == ["ana lives in Lisbon", "ana is in Porto.", "ana live in Lisbon with Ben."]
    assert statement_keys({"body": "Do I know you?", "actor": "ana", "offset": 1}) == []


def test_a_question_phrased_like_the_key_finds_the_turn_with_the_setting_on(acme, conninfo, cheered):
    ana, ben = cheered
    off = ids(acme.recall(QUESTION, mode="lexical"))
    assert off == [ben, ana], "without keys, the turn that names Ana outranks the one that says it"
    assert acme.remember_keys(ana, ["Ana was cheered up by Ana's zqviolin lesson"]) == 1
    with_keys(acme, ana, ANA, "ana")
    assert ids(acme.recall(QUESTION, mode="lexical")) == off, "keys change nothing while the setting is off"
    keys_setting(conninfo, True)
    r = acme.recall(QUESTION, mode="lexical")
    assert ids(r) == [ana, ben], "the memory comes once, first, although its own text and two keys match"
    assert r.meta.lexical_count == 2 and r.meta.fused_count == 2
    assert [i.body for i in r.items] == [ANA, BEN], "the memory's own text, never a key's"
    # a key already there is not added twice; the memory still comes once
    assert acme.remember_keys(ana, ["  Ana was cheered up by Ana's zqviolin lesson "]) == 0
    assert ids(acme.recall(QUESTION, mode="lexical", limit=1)) == [ana]


def test_hybrid_recall_with_the_real_model_returns_the_memory_once(acme, conninfo, cheered):
    ana, ben = cheered
    Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker")).drain()
    with_keys(acme, ana, ANA, "ana")
    before = ids(acme.recall(QUESTION, mode="hybrid"))
    keys_setting(conninfo, True)
    after = ids(acme.recall(QUESTION, mode="hybrid"))
    assert sorted(after) == sorted(set(after)) == sorted([ana, ben])
    assert after.index(ana) <= before.index(ana)


def test_a_key_never_lets_a_principal_find_a_memory_they_may_not_see(acme, conninfo):
    _, private = turn(acme, ANA, "ana", audience="ana")
    with pytest.raises(errors.MemoryNotFound):  # bot may not see it, so may not key it either
        acme.remember_keys(private, ["bot's guess"])
    with_keys(acme, private, ANA, "ana", principal="ana")
    keys_setting(conninfo, True)
    assert private in ids(acme.recall(QUESTION, mode="lexical", principal="ana"))
    r = acme.recall("ana zqviolin lesson cheered", mode="lexical", principal="bot")
    assert private not in ids(r) and r.meta.lexical_count == 0
    for principal in ("ben", "bot"):
        assert ids(acme.recall("zqviolin", mode="lexical", principal=principal, limit=50)) == []
    # a forgotten memory is not found through its keys either
    acme.forget(private, reason="asked", principal="ana")
    assert ids(acme.recall(QUESTION, mode="lexical", principal="ana")) == []


def test_erasing_the_turn_erases_its_keys(acme, conninfo, db, acme_admin):
    offset, ana = turn(acme, ANA, "ana")
    _, ben = turn(acme, BEN, "ben")
    keys = with_keys(acme, ana, ANA, "ana")
    assert acme.remember_keys(ben, ["Ben saw Ana at the football game"]) == 1
    assert db.execute("select count(*) from acme.memory_key where memory_id = %s", (ana,)).fetchone()[0] == len(keys)
    receipt = acme_admin.erase({"observation": {"scope": "default", "offset": offset}}, reason="asked", actor="dpo")
    assert receipt.rows_erased["memory_key"] == len(keys)
    assert set(receipt.residual.values()) == {0}
    assert db.execute("select count(*) from acme.memory_key where memory_id = %s", (ana,)).fetchone()[0] == 0
    # only Ben's key stays registered, against Ben's turn
    assert db.execute("select count(*) from acme.projection_dependency where kind = 'memory_key'").fetchone()[0] == 1
    keys_setting(conninfo, True)
    assert ids(acme.recall(QUESTION, mode="lexical")) == [ben]
    assert db.execute("select count(*) from acme.memory_key where memory_id = %s", (ben,)).fetchone()[0] == 1


def test_bad_input_to_remember_keys_is_a_pgrecall_error(acme, cheered):
    ana, _ = cheered
    with pytest.raises(errors.InvalidArgument, match="at least one key"):
        acme.remember_keys(ana, [])
    with pytest.raises(errors.InvalidArgument, match="a key is empty"):
        acme.remember_keys(ana, ["ok", "   "])
    with pytest.raises(errors.InvalidArgument, match="a key is empty"):
        acme.remember_keys(ana, ["ok", None])
    with pytest.raises(errors.OutOfRange, match="more than the 50 allowed"):
        acme.remember_keys(ana, [f"key {i}" for i in range(51)])
    with pytest.raises(errors.TextTooLong):
        acme.remember_keys(ana, ["x" * 1001])
    with pytest.raises(errors.OutOfRange):
        acme.remember_keys(0, ["a key"])
    with pytest.raises(errors.InvalidArgument, match="memory id must be a positive id, not NULL"):
        acme.remember_keys(None, ["a key"])
    with pytest.raises(errors.MemoryNotFound):
        acme.remember_keys(999999, ["a key"])
    with pytest.raises(errors.ScopeNotAuthorised):
        acme.remember_keys(ana, ["a key"], scopes=[])
