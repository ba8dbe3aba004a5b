"""Errors in the command line's words: where a SQL function's message or hint names a call or a parameter
(`create_session()`, `p_include_superseded => true`), the command line names its own command or flag instead
(pgrecall.cli._hints), and a real failure of each kind shows it."""

import re
from pathlib import Path

import pytest

from pgrecall.cli._hints import SAID_FOR_CLI, for_cli, sql_words
from test_install_paths import run_cli

ROOT = Path(__file__).resolve().parents[1]


def _sources() -> str:
    """The PL/pgSQL sources, a literal continued on the next line ('one ' newline 'two') joined as SQL joins it."""
    text = "\n".join(p.read_text() for p in sorted((ROOT / "plpgsql").rglob("*.sql")))
    return re.sub(r"'[ \t]*\n\s*'", "", text)


def test_every_mapped_text_is_still_said_by_the_sql_and_is_mapped_to_no_sql():
    sql = _sources().replace("''", "'")
    for said, instead in SAID_FOR_CLI:
        assert said in sql, f"the SQL no longer says {said!r}: update pgrecall/cli/_hints.py"
        assert sql_words(instead.format(tenant="acme")) == [], instead


def test_a_hint_is_rewritten_and_the_rest_kept():
    hint = ("It does not exist, this principal may not see it for this purpose, or it was superseded "
            "(pass p_include_superseded => true to read history).")
    assert for_cli(hint, "acme") == ("It does not exist, this principal may not see it for this purpose, or it was "
                                     "superseded (add --include-superseded to read history).")
    assert sql_words(hint) == ["p_include_superseded", "=>"]
    assert for_cli("Create a session with create_session().", "acme") == (
        "Create one: pgrecall session create NAME --tenant acme --as PEER (it prints the session id).")
    assert for_cli(None) is None and for_cli("nothing to map") == "nothing to map"


@pytest.fixture
def app_env(acme, conninfo):
    return {"PGRECALL_DSN": conninfo.dsn(user="pgrecall_acme_app"), "PGRECALL_TENANT": "acme"}


def test_failures_name_the_commands_flags(acme, app_env):
    off = acme.append("I live in Lisbon", role="user", actor="ana")
    old = acme.remember("Ana lives in Lisbon", evidence=[off], purposes=["converse"]).memory_id
    new_off = acme.append("We moved to Porto", role="user", actor="ana")
    acme.supersede(old, "Ana lives in Porto", revision=1, evidence=[new_off])
    cases = [
        (["read", "--as", "ana", "--purpose", "converse", str(old)], 4, "--include-superseded"),
        (["search", "--as", "ana", "Porto", "--session", "999", "--mode", "lexical"], 4,
         "pgrecall session create NAME --tenant acme"),
        (["facts", "--as", "ana", "ana", "lives_at"], 1, "pgrecall fact predicates --tenant acme"),
        (["session", "say", "999", "hello", "--as", "ana"], 4, "pgrecall session create"),
    ]
    for args, code, flag in cases:
        proc = run_cli(*args, env=app_env, check=False)
        assert proc.returncode == code, (args, proc.stderr)
        assert flag in proc.stderr, (args, proc.stderr)
        assert sql_words(proc.stderr.split("(hint:", 1)[-1]) == [], proc.stderr


def test_recall_as_of_in_the_future_names_the_flag(acme, app_env):
    proc = run_cli("recall", "--as", "ana", "anything", "--as-of", "2030-01-01", env=app_env, check=False)
    assert proc.returncode == 1, proc.stderr
    assert "--as-of 2030-01-01" in proc.stderr and "is in the future" in proc.stderr, proc.stderr
    assert "leave out --as-of to recall as of now" in proc.stderr, proc.stderr
    assert "p_as_of" not in proc.stderr and "NULL" not in proc.stderr and "p_at" not in proc.stderr, proc.stderr
