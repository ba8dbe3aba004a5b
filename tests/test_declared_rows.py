"""Result rows are read as the tenant's declared types registered on the connection (issue #47 item 1), not
through a JSON copy of them: numbers keep the type the catalog declares, a tenant whose schema is newer than
the driver (its types have attributes the driver does not know) is still read, on a connection that
registered the types before they changed as on a new one, and a pool's connections register them on their
own."""

from __future__ import annotations

import json

import pytest
from psycopg_pool import ConnectionPool

import pgrecall
from pgrecall.driver import _calls
from pgrecall.render import jsonable


def _a_memory(acme):
    said = acme.append("I moved to Porto last week", role="user", actor="ana")
    return said, acme.remember("Ana lives in Porto", evidence=[said], purposes=["converse"], about=["Ana"]).memory_id


def test_a_whole_number_score_is_a_float_as_the_item_type_declares(acme):
    """recall_item.score is double precision: a score of exactly 1 is the float 1.0 (JSON made it the int 1,
    so `--json` showed 1 for one item and 0.5 for the next)."""
    _a_memory(acme)
    acme.remember("Ana's sister lives in Porto too", purposes=["converse"])
    items = acme.recall("Porto", mode="lexical").items
    assert 1.0 in [i.score for i in items]
    assert all(type(i.score) is float for i in items)
    assert all(type(i.bm25) is float for i in items if i.bm25 is not None)
    assert json.dumps(jsonable(items[0])["score"]) == "1.0"


def test_a_facts_confidence_reads_as_the_real_it_is(acme):
    """A real (fact_provenance.confidence, facts_as_of's confidence) reads as the shortest decimal PostgreSQL
    prints: 0.8, not the float nearest to the float32 (0.800000011920929)."""
    said, _ = _a_memory(acme)
    acme.assert_fact("Ana", "lives_in", "Porto", evidence=[{"offset": said, "quote": "moved to Porto"}],
                     confidence=0.8)
    [fact] = [i for i in acme.recall("Where does Ana live? Porto", mode="lexical").items if i.item == "fact"]
    assert fact.fact_provenance.confidence == 0.8
    assert acme.facts_as_of("Ana", "lives_in")[0].confidence == 0.8


def _add_an_attribute_to_about_entity(db) -> None:
    """What a newer pgrecall's migration would do: an attribute added to a declared type, and the function
    that builds its values filling it."""
    db.execute("alter type acme.about_entity add attribute since text")
    definition = db.execute("select pg_get_functiondef('acme._provenance_of'::regproc)").fetchone()[0]
    built = "row(n.name, n.type)::about_entity"
    assert built in definition
    db.execute(definition.replace(built, "row(n.name, n.type, 'always')::about_entity"))


@pytest.fixture
def lenient_rows(monkeypatch):
    """Rows read as a user's application reads them: attributes the driver does not know are ignored (the test
    suite otherwise runs with PGRECALL_STRICT_ROWS=1)."""
    monkeypatch.setenv("PGRECALL_STRICT_ROWS", "0")
    _calls._strict_rows.cache_clear()
    yield
    _calls._strict_rows.cache_clear()


def test_a_tenant_upgraded_under_a_running_driver_is_still_read(acme, db, conninfo, lenient_rows):
    said, memory = _a_memory(acme)
    before = acme.read(memory, purpose="converse").provenance  # the handle's connection has registered acme's types
    assert [a.entity for a in before.about] == ["Ana"]

    _add_an_attribute_to_about_entity(db)

    assert acme.read(memory, purpose="converse").provenance == before  # the same connection: registered again
    assert [i.provenance for i in acme.recall("Porto", mode="lexical").items] == [before]
    with pgrecall.connect(conninfo.dsn("pgrecall_acme_app"), tenant="acme", principal="bot",
                          scopes=["default"]) as newer:  # a new connection registers the type as it is now
        assert newer.read(memory, purpose="converse").provenance == before


def test_strict_rows_refuse_an_attribute_the_driver_does_not_know(acme, db):
    """Under PGRECALL_STRICT_ROWS=1 (the test suite's setting) an attribute the SQL adds and the driver's
    dataclasses lack is an error, not silently dropped."""
    _, memory = _a_memory(acme)
    acme.read(memory, purpose="converse")
    _add_an_attribute_to_about_entity(db)
    with pytest.raises(TypeError, match="since"):
        acme.read(memory, purpose="converse")


def test_each_connection_of_a_pool_reads_the_declared_types(acme, conninfo):
    """A pool configured with pgrecall.configure alone: each of its connections registers acme's types at its
    first call, and every call reads the provenance whole, whichever connection it borrowed."""
    said, memory = _a_memory(acme)
    expected = acme.read(memory, purpose="converse").provenance
    with ConnectionPool(conninfo.dsn("pgrecall_acme_app"), min_size=3, max_size=3, open=True,
                        configure=pgrecall.configure, kwargs={"autocommit": True}) as pool:
        pooled = pgrecall.connect(pool=pool, tenant="acme", principal="bot", scopes=["default"])
        with pool.connection() as a, pool.connection() as b, pool.connection() as c:
            held = [a, b, c]  # the pool's three connections, none used by the driver yet
        for _ in range(6):
            assert pooled.read(memory, purpose="converse").provenance == expected
            assert [i.provenance for i in pooled.recall("Porto", mode="lexical").items] == [expected]
        for conn in held:
            assert conn.execute("select provenance from acme.read('bot', '{default}', %s, 'converse')",
                                (memory,)).fetchone()[0]["offsets"] == [said]
