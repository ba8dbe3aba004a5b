"""The command line never ends in a traceback: every failure is one line on stderr and an exit code
from docs/cli.md's table (usage 2, server down 3, not found 4, conflict 5, not permitted 6, Ctrl-C 130)."""

import os
import signal
import subprocess
import sys

import pytest

from pgrecall import errors
from test_install_paths import run_cli


@pytest.fixture
def app_env(acme, conninfo):
    return {"PGRECALL_DSN": conninfo.dsn(user="pgrecall_acme_app"), "PGRECALL_TENANT": "acme"}


def one_line_failure(proc, code: int) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_usage_errors_exit_2(app_env):
    one_line_failure_or_usage = run_cli("read", "--as", "ana", env=app_env, check=False)
    assert one_line_failure_or_usage.returncode == 2 and "Traceback" not in one_line_failure_or_usage.stderr
    assert run_cli("recall", "--as", "ana", "tea", "--limit", "ten", env=app_env, check=False).returncode == 2


def test_a_time_that_does_not_parse_and_a_missing_dump_file_are_usage_errors(app_env, conninfo):
    """docs/cli.md: a value of the wrong form (--as-of yesterday) and a missing argument (tenant dump's FILE)
    are the command line's own mistakes, exit 2, as argparse exits; a time the server refuses is exit 1."""
    proc = run_cli("recall", "--as", "ana", "tea", "--as-of", "yesterday", env=app_env, check=False)
    assert proc.returncode == 2 and "not an ISO 8601 time: 'yesterday'" in proc.stderr, proc.stderr
    proc = run_cli("tenant", "dump", "acme", env={"PGRECALL_DSN": conninfo.dsn()}, check=False)
    one_line_failure(proc, 2)
    assert "name the tenant and the file" in proc.stderr
    one_line_failure(run_cli("recall", "--as", "ana", "tea", "--as-of", "2030-01-01", env=app_env, check=False), 1)


def test_not_found_exits_4(app_env):
    one_line_failure(run_cli("read", "--as", "ana", "--purpose", "converse", "424242", env=app_env, check=False), 4)
    one_line_failure(run_cli("remember", "--as", "mallory", "--purpose", "converse", "hi", env=app_env,
                             check=False), 4)


def test_conflict_exits_5(acme, app_env):
    off = acme.append("I drink green tea", role="user", actor="ana")
    mid = acme.remember("Ana drinks green tea", evidence=[off], purposes=["converse"]).memory_id
    acme.correct(mid, "Ana drinks black tea", revision=1, evidence=[off])
    one_line_failure(run_cli("correct", "--as", "bot", str(mid), "Ana drinks tea", "--revision", "1",
                             env=app_env, check=False), 5)


def test_a_duty_of_another_role_exits_6(app_env):
    # PGRECALL_DSN's role (the app) is used for every command: erase is the admin's.
    one_line_failure(run_cli("erase", "--subject", "u-1", "--reason", "ticket", env=app_env, check=False), 6)


def test_a_server_that_is_down_exits_3(acme):
    env = {"PGRECALL_DSN": "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2", "PGRECALL_TENANT": "acme"}
    one_line_failure(run_cli("read", "--as", "ana", "--purpose", "converse", "1", env=env, check=False), 3)


@pytest.mark.parametrize("args", [
    ["read", "--as", "ana", "--purpose", "converse", str(2**63)],          # beyond bigint
    ["read", "--as", "ana", "--purpose", "converse", "--", "-1"],
    ["recall", "--as", "ana", "tea", "--limit", "0"],
    ["recall", "--as", "ana", "tea", "--limit", str(2**40)],               # beyond integer
    ["facts", "--as", "ana", "Ana", "lives_in", "--valid-at", "0001-01-01T00:00:00-14:00"],
    ["remember", "--as", "ana", "--purpose", "converse", "--evidence", str(2**64), "hi"],
    ["import", "/nonexistent/chat.jsonl", "--scopes", "default"],
])
def test_bad_input_is_one_line_never_a_traceback(app_env, args):
    proc = run_cli(*args, env=app_env, check=False)
    assert proc.returncode in (1, 4), (proc.returncode, proc.stderr)
    one_line_failure(proc, proc.returncode)


def test_an_import_file_that_is_not_text_is_bad_input(app_env, tmp_path):
    binary = tmp_path / "chat.jsonl"
    binary.write_bytes(bytes(range(256)))
    for path in (binary, tmp_path):  # a binary file, and a folder given for a file
        proc = run_cli("import", str(path), "--scopes", "default", env=app_env, check=False)
        assert proc.returncode == 1, (path, proc.returncode, proc.stderr)
        one_line_failure(proc, 1)


@pytest.mark.slow
def test_ctrl_c_exits_130(acme_worker, conninfo):
    env = {**os.environ, "PGRECALL_DSN": conninfo.dsn(user="pgrecall_acme_worker")}
    proc = subprocess.Popen([sys.executable, "-m", "pgrecall.cli", "worker", "--tenant", "acme"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        assert "waiting for work" in proc.stdout.readline()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "Traceback" not in err, err


def test_an_unknown_scope_exits_4_and_says_how_to_add_it(acme, app_env):
    """A scope that does not exist is not found (4, PR131), not a scope the role may not use (6, PR103)."""
    with pytest.raises(errors.UnknownScope) as unknown:
        acme.append("hi", role="user", scopes=["nowhere"])
    assert unknown.value.sqlstate == "PR131" and isinstance(unknown.value, errors.ScopeNotAuthorised)
    proc = run_cli("read", "--as", "ana", "--purpose", "converse", "1", "--scopes", "nowhere", env=app_env,
                   check=False)
    one_line_failure(proc, 4)
    assert "unknown scope 'nowhere'" in proc.stderr and "pgrecall scope add NAME --tenant acme" in proc.stderr
    assert "add_scope" not in proc.stderr
    # a scope that exists but is not the one written: still not permitted
    one_line_failure(run_cli("remember", "--as", "ana", "--purpose", "converse", "--scope", "other", "hi",
                             env=app_env, check=False), 6)


def test_the_documented_table_lists_exactly_the_codes_the_command_line_returns():
    """Every row of docs/cli.md's exit-code table is a code of pgrecall.cli, and every code has its row."""
    import re
    from pathlib import Path

    from pgrecall import cli

    readme = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    table = readme.split("| exit | meaning |", 1)[1].split("\n\n", 1)[0]
    rows = {int(code): meaning for code, meaning in re.findall(r"^\| (\d+) \| (.+) \|$", table, flags=re.M)}
    codes = {getattr(cli, name) for name in cli.__all__ if name.startswith("EXIT_")}
    assert set(rows) == codes | {0}
    assert "scope" in rows[cli.EXIT_NOT_FOUND] and "scope" in rows[cli.EXIT_NOT_PERMITTED]
