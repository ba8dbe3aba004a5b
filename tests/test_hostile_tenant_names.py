"""Hostile tenant names through every command and every Python entry, with a superuser's DSN.

The CLI runs in-process for the whole corpus (fast) and as a real process for a
sample. Whatever the name, nothing is created or dropped anywhere in the
cluster, the error is one line on stderr without a traceback, and the exit
code is not zero.
"""

from __future__ import annotations

import argparse
import json

import psycopg
import pytest

from hostile_names import CORPUS, REPORTED
from pgrecall import cli, demo, errors, install, sources
from pgrecall import db as pgdb
from pgrecall.agent import AgentMemory
from pgrecall.deriver import Deriver
from pgrecall.importer import import_jsonl
from pgrecall.review import create_app
from pgrecall.worker import Worker
from test_install_paths import run_cli

T = "{tenant}"
COMMANDS = [
    ["server", "uri", f"--tenant={T}"],
    ["tenant", "create", "--", T],
    ["tenant", "upgrade", "--", T],
    ["tenant", "drop", "--", T],
    ["tenant", "settings", "--", T],
    ["sql", f"--tenant={T}"],
    ["peer", "add", "ana", f"--tenant={T}"],
    ["scope", "add", "default", f"--tenant={T}"],
    ["remember", f"--tenant={T}", "--as", "ana", "--purpose", "converse", "Ana likes tea"],
    ["read", f"--tenant={T}", "--as", "ana", "--purpose", "converse", "1"],
    ["forget", f"--tenant={T}", "--as", "ana", "--reason", "asked", "1"],
    ["import", f"--tenant={T}", "--quiet", "{file}"],
    ["worker", f"--tenant={T}", "--once"],
    ["worker", f"--tenant={T}"],
    ["deriver", f"--tenant={T}", "--once"],
    ["deriver", f"--tenant={T}"],
    ["embeddings", "status", f"--tenant={T}"],
    ["embeddings", "rebuild", f"--tenant={T}", "--quiet"],
    ["erase", f"--tenant={T}", "--subject", "u-1", "--reason", "asked"],
    ["demo", f"--tenant={T}"],
    ["recall", f"--tenant={T}", "--as", "ana", "tea"],
    ["search", f"--tenant={T}", "--as", "ana", "tea"],
    ["supersede", f"--tenant={T}", "--as", "ana", "1", "Ana likes coffee", "--revision", "1"],
    ["derive", f"--tenant={T}", "--as", "ana", "--from", "1", "Ana likes hot drinks"],
    ["facts", f"--tenant={T}", "--as", "ana", "Ana"],
    ["bundle", f"--tenant={T}", "--as", "ana"],
    ["mcp", f"--tenant={T}", "--as", "ana"],
    ["mcp", f"--tenant={T}", "--as", "ana", "--http", "127.0.0.1:8765"],
    ["review", f"--tenant={T}", "--as", "ana", "--port", "1"],
]


def cluster_snapshot(dsn: str) -> dict[str, list]:
    """Every schema, relation, function, role and database of the cluster (as seen from this database)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {
            "namespaces": conn.execute("select nspname from pg_namespace order by 1").fetchall(),
            "relations": conn.execute("select relnamespace::regnamespace::text, relname, relkind from pg_class "
                                      "order by 1, 2").fetchall(),
            "functions": conn.execute("select oid::regprocedure::text from pg_proc order by 1").fetchall(),
            "roles": conn.execute("select rolname from pg_roles order by 1").fetchall(),
            "databases": conn.execute("select datname from pg_database order by 1").fetchall(),
            "tenants": conn.execute("select name from pgrecall.tenant order by 1").fetchall(),
        }


@pytest.fixture
def armed(db, make_tenant, superuser_dsn, monkeypatch, tmp_path):
    """Tenants the reported injections aim at, a superuser's PGRECALL_DSN, and a conversation file."""
    make_tenant("a")
    make_tenant("b")
    monkeypatch.setenv("PGRECALL_DSN", superuser_dsn)
    monkeypatch.setenv("PGRECALL_HOME", str(tmp_path / "home"))  # no embedded server to find or start
    chat = tmp_path / "chat.jsonl"
    chat.write_text(json.dumps({"speaker": "ana", "role": "user", "text": "I live in Lisbon"}) + "\n")
    return superuser_dsn, chat


def _argv(command: list[str], tenant: str, file) -> list[str]:
    return [part.replace(T, tenant) if T in part else part.replace("{file}", str(file)) for part in command]


def _install(dsn: str, tenant):
    with psycopg.connect(dsn, autocommit=True) as conn:
        return install.install(conn, [tenant])


@pytest.mark.slow  # the whole corpus through every command: thousands of CLI calls
def test_every_command_refuses_every_hostile_name_in_one_line(armed, capsys, monkeypatch):
    dsn, chat = armed
    before = cluster_snapshot(dsn)
    failures = []
    for tenant in CORPUS:
        for command in COMMANDS:
            argv = _argv(command, tenant, chat)
            code = cli.main(argv)
            out, err = capsys.readouterr()
            if not (code == 1 and out == "" and err.endswith("\n") and err.count("\n") == 1
                    and err.startswith("pgrecall: error: invalid tenant name") and "Traceback" not in err):
                failures.append((argv, code, out[:200], err[:300]))
    assert failures == []
    # PGRECALL_TENANT, the default of --tenant, is checked as well.
    for tenant in CORPUS[:40]:
        monkeypatch.setenv("PGRECALL_TENANT", tenant)
        code = cli.main(["remember", "--as", "ana", "--purpose", "converse", "Ana likes tea"])
        out, err = capsys.readouterr()
        assert code == 1 and err.startswith("pgrecall: error: invalid tenant name") and err.count("\n") == 1
    assert cluster_snapshot(dsn) == before


def test_a_real_process_refuses_the_reported_injections(armed):
    dsn, _ = armed
    before = cluster_snapshot(dsn)
    env = {"PGRECALL_DSN": dsn}
    sample = REPORTED + ["a\x1b]0;owned\x07", "a\u202eb", "x'; drop schema public cascade; --", "\u0430cme"]
    for tenant in sample:
        for command in (["embeddings", "status", f"--tenant={tenant}"], ["deriver", f"--tenant={tenant}"],
                        ["tenant", "upgrade", "--", tenant]):
            proc = run_cli(*command, env=env, check=False)
            assert proc.returncode == 1 and proc.stdout == "", (command, proc.stdout, proc.stderr)
            assert proc.stderr.startswith("pgrecall: error: invalid tenant name") and proc.stderr.count("\n") == 1, (
                command, proc.stderr)
            assert "\x1b" not in proc.stderr and "\u202e" not in proc.stderr
    assert cluster_snapshot(dsn) == before


def _python_entries(tenant: str, dsn: str, chat):
    yield "connect", lambda: __import__("pgrecall").connect(dsn, tenant=tenant)
    yield "Memory", lambda: __import__("pgrecall").Memory(tenant, conninfo=dsn)
    yield "Worker", lambda: Worker(tenant, conninfo=dsn)
    yield "Deriver", lambda: Deriver(tenant, conninfo=dsn).run_once()
    yield "Deriver.run_forever", lambda: Deriver(tenant, conninfo=dsn).run_forever(poll_seconds=0, stop=lambda: True)
    yield "install", lambda: _install(dsn, tenant)
    yield "install_sql", lambda: sources.install_sql([tenant])
    yield "psql_script", lambda: sources.psql_script(tenant)
    yield "tenant_conninfo", lambda: pgdb.tenant_conninfo(tenant)
    yield "import_jsonl", lambda: import_jsonl(chat, tenant=tenant, scope="default", progress=False, conninfo=dsn)
    yield "demo", lambda: demo.main(argparse.Namespace(tenant=tenant))
    yield "AgentMemory", lambda: AgentMemory(tenant, "ana", conninfo=dsn)
    yield "review.create_app", lambda: create_app(tenant, "ana", ["default"], conninfo=dsn)


def test_every_python_entry_refuses_every_hostile_name(armed):
    dsn, chat = armed
    before = cluster_snapshot(dsn)
    failures = []
    for tenant in CORPUS + [None, 7, b"a"]:
        for entry, call in _python_entries(tenant, dsn, chat):
            try:
                call()
            except errors.InvalidTenantName:
                continue
            except Exception as exc:
                failures.append((entry, tenant, repr(exc)[:200]))
            else:
                failures.append((entry, tenant, "accepted"))
    assert failures == []
    assert cluster_snapshot(dsn) == before


def test_a_valid_name_that_is_no_tenant_fails_in_one_line_too(armed, capsys):
    for argv in (["tenant", "settings", "ghost"], ["tenant", "drop", "ghost"]):
        code = cli.main(argv)
        out, err = capsys.readouterr()
        assert code == 4 and err.count("\n") == 1 and "Traceback" not in err, (argv, err)  # EXIT_NOT_FOUND
        assert err.startswith("pgrecall: error: no tenant named 'ghost'"), (argv, err)
