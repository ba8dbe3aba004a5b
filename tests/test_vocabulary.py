"""Each closed set of words (purposes, memory and observation kinds, source roles, peer kinds, ...) is defined
once, in the catalog (#32 item 4): the tenant's _closed_set(). Python's constants, the MCP schema's Literals,
the CLI's choices and the tables' CHECK constraints all say the same, and a value outside a set is refused
with a message listing it."""

from __future__ import annotations

import re
import typing

import psycopg
import pytest

from pgrecall import cli, mcp_server
from pgrecall.vocabulary import CLOSED_SETS, MEMORY_KINDS, PEER_KINDS, PURPOSES


def test_python_reads_the_purposes_the_catalog_defines(acme, db):
    assert tuple(db.execute("select acme._purposes()").fetchone()[0]) == PURPOSES
    assert typing.get_args(mcp_server.Purpose) == PURPOSES


def test_every_cli_purpose_choice_is_the_catalogs():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    seen = 0
    for name, command in sub.choices.items():
        for action in command._actions:
            if action.dest in ("purpose", "purposes"):
                assert tuple(action.choices) == PURPOSES, (name, action.dest)
                seen += 1
    assert seen == 7  # remember, read, recall, facts, bundle, mcp, fact (traverse)


def test_the_tables_check_the_same_four(acme, db):
    rows = db.execute("""select conrelid::regclass::text, pg_get_constraintdef(oid) from pg_constraint
                          where connamespace = 'acme'::regnamespace and contype = 'c'
                            and pg_get_constraintdef(oid) like '%purposes <@%'""").fetchall()
    assert {table for table, _ in rows} == {"acme.memory", "acme.fact"}
    for table, definition in rows:
        listed = re.search(r"purposes <@ ARRAY\[(.*?)\]", definition).group(1)
        assert tuple(re.findall(r"'(\w+)'", listed)) == PURPOSES, table


def test_an_unknown_purpose_is_refused_naming_the_four(acme, db):
    with pytest.raises(psycopg.Error) as refused:
        db.execute("select acme._check_purpose('gossip')")
    assert refused.value.sqlstate == "PR102"
    assert refused.value.diag.message_hint == "A purpose is one of converse, act, personalize, review."
    with pytest.raises(psycopg.Error) as empty:
        db.execute("select acme._check_purposes('{}')")
    assert empty.value.diag.message_hint == "Say what the memory may be used for: converse, act, personalize and/or review."


def test_python_reads_every_closed_set_the_catalog_defines(acme, db):
    for name, words in CLOSED_SETS.items():
        assert tuple(db.execute("select acme._closed_set(%s)", (name,)).fetchone()[0]) == words, name
    assert typing.get_args(mcp_server.MemoryKind) == MEMORY_KINDS


# The table and column whose CHECK constraint (frozen in a migration) lists each set.
_CHECKED = {"memory kind": ("acme.memory", "kind"), "observation kind": ("acme.observation", "kind"),
            "source_role": ("acme.observation", "source_role"), "peer kind": ("acme.peer", "kind"),
            "classification": ("acme.observation", "classification"),
            "lawful_basis": ("acme.observation", "lawful_basis")}


def test_the_tables_check_the_same_sets(acme, db):
    for name, (table, column) in _CHECKED.items():
        definitions = [d for (d,) in db.execute(
            """select pg_get_constraintdef(oid) from pg_constraint
                where conrelid = %s::regclass and contype = 'c' and pg_get_constraintdef(oid) ~ %s""",
            (table, rf"\m{column}\M = ANY")).fetchall()]
        assert definitions, (name, table, column)
        listed = tuple(re.findall(r"'(\w+)'", re.search(r"ARRAY\[(.*?)\]", definitions[0]).group(1)))
        assert listed == CLOSED_SETS[name], (name, definitions[0])


def test_every_cli_kind_choice_is_the_catalogs():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    kinds = {name: tuple(action.choices) for name, command in sub.choices.items()
             for action in command._actions if action.dest == "kind" and action.choices}
    assert kinds == {"remember": MEMORY_KINDS, "derive": MEMORY_KINDS, "peer": PEER_KINDS}


@pytest.mark.parametrize(("statement", "message"), [
    ("select acme.remember('bot', '{default}', 'default', 'x', array[%(offset)s]::bigint[], '{converse}', p_kind => 'gossip')",
     "memory kind 'gossip' is not one of note, fact, decision, summary"),
    ("select acme.append_observation('bot', '{default}', 'default', 'x', 'oracle')",
     "source_role 'oracle' is not one of user, assistant, system, tool, document"),
    ("select acme.append_observation('bot', '{default}', 'default', 'x', 'user', 'rumour')",
     "observation kind 'rumour' is not one of message, document, tool_result, event, note"),
    ("select acme.add_peer('eve', 'ghost')", "peer kind 'ghost' is not one of human, agent, other"),
])
def test_a_value_outside_a_set_is_refused_listing_the_set(acme, db, statement, message):
    offset = db.execute("select acme.append_observation('bot', '{default}', 'default', 'a turn', 'user')").fetchone()[0]
    with pytest.raises(psycopg.Error) as refused:
        db.execute(statement, {"offset": offset})
    assert refused.value.sqlstate == "PR107"
    assert refused.value.diag.message_primary == message
