"""The four purposes are defined once, in the catalog (#32 item 4): the tenant's _purposes(). Python's
constant, the MCP schema's Literal, the CLI's choices and the tables' CHECK constraints all say the same."""

from __future__ import annotations

import re
import typing

from pgrecall import cli, mcp_server
from pgrecall.purposes import PURPOSES


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
    assert seen == 6  # remember, read, recall, facts, bundle, mcp


def test_the_tables_check_the_same_four(acme, db):
    rows = db.execute("""select conrelid::regclass::text, pg_get_constraintdef(oid) from pg_constraint
                          where connamespace = 'acme'::regnamespace and contype = 'c'
                            and pg_get_constraintdef(oid) like '%purposes <@%'""").fetchall()
    assert {table for table, _ in rows} == {"acme.memory", "acme.fact"}
    for table, definition in rows:
        listed = re.search(r"purposes <@ ARRAY\[(.*?)\]", definition).group(1)
        assert tuple(re.findall(r"'(\w+)'", listed)) == PURPOSES, table


def test_an_unknown_purpose_is_refused_naming_the_four(acme, db):
    import psycopg
    import pytest

    with pytest.raises(psycopg.Error) as refused:
        db.execute("select acme._check_purpose('gossip')")
    assert refused.value.sqlstate == "PR102"
    assert refused.value.diag.message_hint == "A purpose is one of converse, act, personalize, review."
    with pytest.raises(psycopg.Error) as empty:
        db.execute("select acme._check_purposes('{}')")
    assert empty.value.diag.message_hint == "Say what the memory may be used for: converse, act, personalize and/or review."
