"""Peer and scope names read as what they are: one name per spelling, nothing hidden in it."""

from __future__ import annotations

import re
import unicodedata
from contextlib import contextmanager

import psycopg
import pytest
from psycopg import sql

from conftest import table_counts
from pgrecall import errors, install, sources
from test_install_paths import run_cli

NFC_EMILE = unicodedata.normalize("NFC", "\u00c9mile")
NFD_EMILE = unicodedata.normalize("NFD", NFC_EMILE)

# Finding 12 as found: each was accepted as a peer of its own.
HOSTILE_PEER_NAMES = [
    "ana\x1b[31m", "ana\x07", "ana\r", "ana\nben", "ana\tben", "\x1b", "an\u200ba", "\u200b", "ana\u3000ben",
    "\u3000", "\u3000\u3000", "\u202eana", "ana\u2066x\u2069", "an\u00ada", "\ufeffana", "ana\u00a0ben", "\u00a0",
    "ana\u2028", "\u3164", "ana\ufe0f", "ana\u034f", "an\U000e0061",
    "\u0410na", "An\u0430", "\u0391na", "\u03bfscar", "\u0410\u03bd\u03b1",  # Cyrillic and Greek look-alikes
    " ana", "ana ", "ana  ben", " ", "", "x" * 201,
]


@pytest.mark.parametrize("name", HOSTILE_PEER_NAMES, ids=ascii)
def test_hostile_peer_names_are_refused_and_nothing_is_written(acme, db, name):
    before = table_counts(db)
    with pytest.raises(errors.InvalidName) as info:
        acme.add_peer(name)
    assert info.value.__cause__.sqlstate == "PR140" and info.value.hint
    assert isinstance(info.value, errors.InvalidArgument)  # as before it had a code of its own
    assert not re.search("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]", info.value.args[0])
    assert table_counts(db) == before


def test_names_in_one_script_and_names_with_spaces_between_words_are_fine(acme):
    for name in ("\u0410\u043d\u043d\u0430", "Ana \u041f\u0435\u0442\u0440\u043e\u0432\u0430", "\u03a3\u03bf\u03c6\u03af\u03b1",
                 "Bolt the innkeeper", "O'Brien", "Zo\u00eb", "\u674e\u96f7", "\u0645\u0631\u064a\u0645", "R2-D2", "ana-2"):
        assert acme.add_peer(name) > 0


def test_names_that_differ_only_in_case_are_one_name(acme, db):
    acme.add_peer("Zara")
    acme.add_peer(NFC_EMILE)
    acme.add_peer("\u03a3\u03bf\u03c6\u03af\u03b1\u03c2")  # ends in final sigma
    acme.add_peer("\u0410\u043d\u043d\u0430")
    before = table_counts(db)
    for name in ("ZARA", "zARA", "zara", "\u00c9MILE", "\u00e9mile", "\u03a3\u039f\u03a6\u038a\u0391\u03a3",
                 "\u0430\u043d\u043d\u0430"):
        with pytest.raises(errors.NameTaken) as info:
            acme.add_peer(name)
        assert info.value.__cause__.sqlstate == "PR141" and info.value.hint
    assert "'Zara'" in str(pytest.raises(errors.NameTaken, acme.add_peer, "zara").value)
    assert table_counts(db) == before
    assert acme.add_peer("Zara", metadata={"x": 1}) == acme.add_peer("Zara")  # the same spelling is the same peer


def test_nfc_and_nfd_spellings_are_one_peer_stored_in_nfc(acme, db):
    first = acme.add_peer(NFD_EMILE)
    assert acme.add_peer(NFC_EMILE) == first
    assert db.execute("select name from acme.peer where id = %s", (first,)).fetchone() == (NFC_EMILE,)
    # every lookup normalises too
    offset = acme.append("Bonjour", role="user", actor=NFD_EMILE)
    r = acme.remember("Émile says hello", evidence=[offset], purposes=["converse"], audience=NFD_EMILE,
                      principal=NFD_EMILE)
    assert r.created and acme.read(r.memory_id, purpose="converse", principal=NFC_EMILE).audience == NFC_EMILE
    s = acme.create_session("salon", principal=NFD_EMILE)
    acme.add_session_peers(s, [NFD_EMILE])
    assert acme.add_messages(s, [{"actor": NFD_EMILE, "body": "Salut"}])[0].offset > 0
    assert acme.log_turn("chat", NFD_EMILE, "encore").offset > 0


def test_a_call_naming_a_peer_in_another_case_is_an_unknown_peer(acme):
    # The fixture's peer is "ana": "Ana" may be another person of the application's, never her.
    with pytest.raises(errors.UnknownPeer) as info:
        acme.append("hi", role="user", principal="ANA")
    assert "'ana'" in info.value.hint  # where the collation can tell (ASCII always)
    with pytest.raises(errors.UnknownPeer):
        acme.recall("anything", principal="Ana")


def test_every_control_and_format_character_python_knows_is_refused(acme, db):
    refused = [chr(c) for c in range(1, 0x110000)
               if unicodedata.category(chr(c)) in ("Cc", "Cf") and not 0xD800 <= c <= 0xDFFF]
    assert len(refused) > 200
    names = [n for c in refused for n in (c, f"a{c}b", f"ab{c}")]
    accepted = db.execute("select n from unnest(%s::text[]) n where acme._peer_name_problem(n) is null",
                          (names,)).fetchall()
    assert accepted == []
    # and every other space but U+0020, and the invisible fillers
    others = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) in ("Zs", "Zl", "Zp") and c != 0x20]
    others += ["\u3164", "\u115f", "\u1160", "\uffa0", "\u034f"]
    assert db.execute("select count(*) from unnest(%s::text[]) n where acme._peer_name_problem('a' || n || 'b') is null",
                      (others,)).fetchone()[0] == 0


def test_a_word_that_starts_with_a_combining_mark_is_refused_for_every_mark_python_knows(acme, db):
    """A peer named U+0301 alone was accepted: its name shows as a stray accent, or on a screen sits on the
    letter before it, as though part of another name."""
    marks = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) in ("Mn", "Mc", "Me")]
    assert len(marks) > 2000
    names = [n for m in marks for n in (m, f"{m}ana", f"ana {m}ben")]
    accepted = db.execute("select n from unnest(%s::text[]) n where acme._peer_name_problem(n) is null",
                          (names,)).fetchall()
    assert accepted == []
    with pytest.raises(errors.InvalidName) as info:
        acme.add_peer("\u0301", "human")
    assert "U+0301, a combining mark" in info.value.args[0]
    # a mark on its letter is part of the name, in any script
    for name in (NFD_EMILE, "Zoe\u0308 Ana", "\u0928\u092e\u0938\u094d\u0924\u0947", "Nguye\u0302\u0303n"):
        assert db.execute("select acme._peer_name_problem(%s)", (name,)).fetchone() == (None,), ascii(name)
    acme.add_peer(NFD_EMILE, "human")


def _fold_table() -> tuple[str, str]:
    """The two strings of name_fold's translate(), as migration 0013 writes them."""
    body = next(m.body for m in sources.migrations() if m.name == "0013_peer_names.sql")
    expression = body[body.index("translate(normalize(name, NFC),"):body.index(")) stored") + 1]
    strings, current = [], ""
    for literal, after in re.findall(r"'([^']*)'\s*(\|\||,|\))", expression):
        current += literal
        if after != "||":  # the end of one argument
            strings.append(current)
            current = ""
    src, dst = strings
    return src, dst


def test_the_fold_table_is_unicode_simple_case_folding():
    src, dst = _fold_table()
    assert len(src) == len(dst) > 1400 and len(set(src)) == len(src)
    python = {}
    for c in map(chr, range(0x110000)):
        if 0xD800 <= ord(c) <= 0xDFFF:
            continue
        folded = c.casefold() if len(c.casefold()) == 1 else c.lower()
        if len(folded) == 1 and folded != c:
            python[c] = folded
    table = dict(zip(src, dst))
    assert {c: f for c, f in table.items() if python.get(c) != f} == {}
    if unicodedata.unidata_version == "14.0.0":  # the version the table was written from
        assert table == python


@contextmanager
def database_of_its_own(superuser_dsn, name, options):
    """A connection, as the superuser, to a new database made from template0 with the given options (an encoding,
    a locale); the database is dropped afterwards."""
    with psycopg.connect(superuser_dsn, autocommit=True) as su:
        drop = sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name))
        su.execute(drop)
        su.execute(sql.SQL("create database {} template template0 ").format(sql.Identifier(name)) + sql.SQL(options))
        try:
            with psycopg.connect(psycopg.conninfo.make_conninfo(superuser_dsn, dbname=name), autocommit=True) as c:
                yield c
        finally:
            su.execute(drop)


def test_case_insensitive_beyond_ascii_in_a_database_whose_collation_is_c(superuser_dsn, conninfo, db):
    # acme's roles are the cluster's (the acme template holds objects of theirs): the fixtures drop the ones
    # this test created, once its database is gone.
    with database_of_its_own(superuser_dsn, "pgrecall_c_collation", "encoding 'UTF8' locale 'C' owner pgrecall_tester"
                             ) as c:
        c.execute("create extension vector")
        c.execute("create extension btree_gist")
        install.install(c, ["acme"])
        assert c.execute("select lower('\u00c9MILE')").fetchone()[0] == "\u00c9mile"  # why lower() would not do
        c.execute("select acme.add_peer(%s)", (NFC_EMILE,))
        for other in ("\u00c9MILE", "\u00e9mile", NFD_EMILE.lower()):
            with pytest.raises(psycopg.Error) as info:
                c.execute("select acme.add_peer(%s)", (other,))
            assert info.value.sqlstate == "PR141", other


def test_a_database_that_is_not_utf8_is_refused_by_name(superuser_dsn):
    with database_of_its_own(superuser_dsn, "pgrecall_ascii", "encoding 'SQL_ASCII' locale 'C'") as c:
        with pytest.raises(errors.MissingPrerequisite) as info:
            install.install(c, ["acme"])
        assert "UTF8" in str(info.value) and info.value.hint
        with pytest.raises(psycopg.Error) as raw:  # the psql script's own check
            c.execute(sources.install_sql(["acme"]).encode())
        assert raw.value.sqlstate == "PR005"
        assert c.execute("select to_regnamespace('pgrecall')").fetchone()[0] is None


def test_upgrading_a_tenant_that_holds_case_duplicates_renames_the_later_ones(db):
    db.execute("select pgrecall.create_tenant('old', 12)")
    for name, kind in (("Ana", "human"), ("ANA", "agent"), ("ana", "human"), (NFD_EMILE, "human"),
                       (NFC_EMILE, "human"), ("Eve\x1b", "human"), ("Bob", "human")):
        db.execute("insert into old.peer (name, kind) values (%s, %s)", (name, kind))
    ids = dict(db.execute("select name, id from old.peer").fetchall())
    db.execute("insert into old.scope (name) values ('default')")
    db.execute("insert into old.observation (scope, log_offset, kind, occurred_at, source_role, actor_id, body) "
               "values ('default', 1, 'message', now(), 'user', %s, 'hi from ANA')", (ids["ANA"],))

    applied = db.execute("select * from pgrecall.upgrade_tenant('old')").fetchall()
    assert ("migration", "0013_peer_names.sql") in applied
    rows = db.execute("select id, name, metadata ->> 'renamed_from' from old.peer order by id").fetchall()
    assert rows == [
        (ids["Ana"], "Ana", None),
        (ids["ANA"], f"ANA (peer {ids['ANA']})", "ANA"),
        (ids["ana"], f"ana (peer {ids['ana']})", "ana"),
        (ids[NFD_EMILE], NFC_EMILE, None),  # the first one keeps the name, stored in NFC
        (ids[NFC_EMILE], f"{NFC_EMILE} (peer {ids[NFC_EMILE]})", NFC_EMILE),
        (ids["Eve\x1b"], "Eve\x1b", None),  # kept: renaming is for duplicates only
        (ids["Bob"], "Bob", None),
    ]
    assert db.execute("select actor_id from old.observation").fetchone() == (ids["ANA"],)
    with pytest.raises(psycopg.Error) as info:
        db.execute("select old.add_peer('BOB')")
    assert info.value.sqlstate == "PR141"


def test_scope_names_stay_lowercase_ascii_slugs(acme, db):
    before = table_counts(db)
    for name in ("Default", "DEFAULT", "d\u200befault", "d\u0435fault", "default\n", "\u3000", "caf\u00e9", ""):
        with pytest.raises(errors.InvalidName) as info:
            acme.add_scope(name)
        assert info.value.__cause__.sqlstate == "PR140"
    assert table_counts(db) == before


def test_the_cli_shows_a_refused_name_escaped_on_one_line(acme, conninfo):
    env = {"PGRECALL_DSN": conninfo.dsn(user="pgrecall_acme_app"), "PGRECALL_TENANT": "acme"}
    bad = run_cli("peer", "add", "ana\x1b]0;owned\x07", env=env, check=False)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "invalid peer name" in bad.stderr
    assert "\x1b" not in bad.stderr and "\x07" not in bad.stderr and "\\u001b" in bad.stderr
    taken = run_cli("peer", "add", "ANA", env=env, check=False)  # the fixture made "ana"
    assert taken.returncode == 1 and "is taken" in taken.stderr and taken.stderr.count("\n") == 1
