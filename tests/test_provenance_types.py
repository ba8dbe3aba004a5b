"""A result's provenance is a declared type (migration 0045, issue #47 item 1): SQL reads its parts as columns,
Python as attributes of generated dataclasses, a fact row carries a fact's provenance and a memory row a
memory's, and a tenant installed before the types keeps its memories' provenance after the upgrade."""

from __future__ import annotations

from datetime import UTC, datetime

from psycopg.types.range import Range

import pgrecall
from pgrecall.driver import FactProvenance, FactQuote, MemoryProvenance, ObservationRef, Provenance
from pgrecall.render import jsonable


def _a_memory(acme):
    said = acme.append("I moved to Porto last week", role="user", actor="ana")
    return said, acme.remember("Ana lives in Porto", evidence=[said], purposes=["converse"], about=["Ana"]).memory_id


def _a_memory_and_a_fact(acme):
    said, memory = _a_memory(acme)
    fact = acme.assert_fact("Ana", "lives_in", "Porto", evidence=[{"offset": said, "quote": "moved to Porto"}])
    return said, memory, fact.fact_id


def test_a_recall_rows_provenance_is_typed_in_sql(acme, conninfo):
    said, memory = _a_memory(acme)
    with conninfo.connect(user="pgrecall_acme_app") as conn:
        row = conn.execute("""
            select (a.items[1]).provenance.observations[1].offset, (a.items[1]).provenance.observations[1].actor,
                   (a.items[1]).provenance.about[1].entity, (a.items[1]).provenance.offsets
              from acme.recall_answer('bot', '{default}', 'Porto', p_mode => 'lexical', p_limit => 1) a""").fetchone()
        assert row == (said, "ana", "Ana", [said])
        # a turn's parts are columns: no jsonb operator, no cast of a text
        turns = conn.execute("""
            select o.offset, o.text, o.withheld, o.occurred_at
              from acme.read('bot', '{default}', %s, 'converse') m, unnest((m.provenance).observations) o""",
                             (memory,)).fetchall()
        assert [(t[0], t[1], t[2]) for t in turns] == [(said, "I moved to Porto last week", False)]
        assert isinstance(turns[0][3], datetime)
        # psql shows the whole of it as JSON, with the keys it had when it was jsonb
        shown = conn.execute("select to_jsonb(provenance) from acme.read('bot', '{default}', %s, 'converse')",
                             (memory,)).fetchone()[0]
        assert set(shown) == {"observations", "memories", "hidden_sources", "about", "widening_reason", "offsets"}
        assert set(shown["observations"][0]) == {"scope", "offset", "withheld", "source_role", "actor",
                                                 "occurred_at", "text", "audience", "corrections"}


def test_a_fact_row_has_the_fact_provenance_and_no_memory_provenance(acme, conninfo):
    said, memory, fact = _a_memory_and_a_fact(acme)
    with conninfo.connect(user="pgrecall_acme_app") as conn:
        rows = conn.execute("""
            select item, provenance is null, fact_provenance is null, (fact_provenance).object,
                   (fact_provenance).evidence[1].quote, (fact_provenance).evidence[1].offset,
                   (fact_provenance).offsets, (provenance).offsets
              from acme.recall('bot', '{default}', 'Where does Ana live? Porto', p_mode => 'lexical')
             order by item""").fetchall()
    assert rows == [("fact", True, False, "Porto", "moved to Porto", said, [said], None),
                    ("memory", False, True, None, None, None, None, [said])]

    items = {i.item: i for i in acme.recall("Where does Ana live? Porto", mode="lexical").items}
    assert items["fact"].provenance is None and items["memory"].fact_provenance is None
    cited = items["fact"].fact_provenance
    assert isinstance(cited, FactProvenance) and isinstance(cited.evidence[0], FactQuote)
    assert (cited.subject, cited.object, cited.evidence[0].quote, cited.evidence[0].start, cited.offsets) == \
        ("Ana", "Porto", "moved to Porto", 2, [said])


def test_a_fact_rows_valid_range_is_read_as_the_facts_own_is(acme):
    """A fact's provenance in recall gives its valid range as facts_as_of does (a psycopg Range, not the text
    PostgreSQL prints), so that `--json` and the MCP tools show it as {"from": ..., "to": null} (docs/cli.md)."""
    said, _ = _a_memory(acme)
    acme.assert_fact("Ana", "lives_in", "Porto", evidence=[{"offset": said, "quote": "moved to Porto"}],
                     valid_from=datetime(2026, 5, 1, tzinfo=UTC))
    [fact] = [i for i in acme.recall("Where does Ana live? Porto", mode="lexical").items if i.item == "fact"]
    valid = fact.fact_provenance.valid
    assert isinstance(valid, Range) and valid == acme.facts_as_of("Ana", "lives_in")[0].valid
    assert (valid.lower, valid.upper) == (datetime(2026, 5, 1, tzinfo=UTC), None)
    assert jsonable(fact.fact_provenance)["valid"] == {"from": "2026-05-01T00:00:00+00:00", "to": None}


def test_python_reads_the_provenance_as_attributes(acme):
    said, memory = _a_memory(acme)
    [item] = [i for i in acme.recall("Porto", mode="lexical").items if i.item == "memory"]
    assert isinstance(item.provenance, MemoryProvenance) and Provenance is MemoryProvenance
    turn = item.provenance.observations[0]
    assert isinstance(turn, ObservationRef) and isinstance(turn.occurred_at, datetime)
    assert (turn.offset, turn.actor, turn.text, turn.corrections) == (said, "ana", "I moved to Porto last week", [])
    assert item.provenance == acme.read(memory, purpose="converse").provenance
    assert [r.provenance for r in acme.session_bundle().recent if r.id == memory] == [item.provenance]


def test_a_tenant_installed_before_the_types_keeps_its_provenance_after_the_upgrade(db, conninfo):
    """A tenant at migration 0044, its provenance then jsonb, with a memory cited from a turn and about an
    entity (written as the rows they were); upgraded, read and recall give the typed provenance."""
    db.execute("select pgrecall.create_tenant('older', 44)")
    assert db.execute("""select format_type(a.atttypid, null) from pg_attribute a
                          where a.attrelid = 'older.recall_item'::regclass and a.attname = 'provenance'""").fetchone() \
        == ("jsonb",)
    db.execute("insert into older.scope (name, log_watermark) values ('default', 1)")
    ana = db.execute("insert into older.peer (name, kind) values ('ana', 'human') returning id").fetchone()[0]
    db.execute("insert into older.peer (name, kind) values ('bot', 'agent')")
    turn = db.execute("""insert into older.observation (scope, log_offset, kind, occurred_at, source_role, actor_id, body)
                         values ('default', 1, 'message', now(), 'user', %s, 'I moved to Porto last week')
                         returning id""", (ana,)).fetchone()[0]
    memory = db.execute("""insert into older.memory (scope, kind, body, origin, purposes, created_by)
                           values ('default', 'fact', 'Ana lives in Porto', 'told', '{converse}', %s) returning id""",
                        (ana,)).fetchone()[0]
    entity = db.execute("insert into older.entity (scope, name) values ('default', 'Ana') returning id").fetchone()[0]
    db.execute("""insert into older.memory_link (memory_id, link_type, target_observation_id) values (%s, 'derived_from', %s)""",
               (memory, turn))
    db.execute("insert into older.memory_link (memory_id, link_type, target_entity_id) values (%s, 'about', %s)",
               (memory, entity))

    db.execute("select * from pgrecall.upgrade_tenant('older')")

    with pgrecall.connect(conninfo.dsn("pgrecall_older_app"), tenant="older", principal="bot",
                          scopes=["default"]) as older:
        read = older.read(memory, purpose="converse").provenance
        assert [(o.offset, o.actor, o.text) for o in read.observations] == [(1, "ana", "I moved to Porto last week")]
        assert [a.entity for a in read.about] == ["Ana"] and read.offsets == [1]
        [item] = older.recall("Porto", mode="lexical").items
        assert item.provenance == read and item.fact_provenance is None
