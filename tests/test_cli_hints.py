"""Errors in the command line's words: where a SQL function's message or hint names a call or a parameter
(`create_session()`, `p_include_superseded => true`), the command line names its own command or flag instead
(pgrecall.cli._hints), and a real failure of each kind shows it."""

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pgrecall.cli._hints import SAID_FOR_CLI, for_cli, sql_words
from test_install_paths import run_cli

ROOT = Path(__file__).resolve().parents[1]


def _sources() -> str:
    """The PL/pgSQL sources, a literal continued on the next line ('one ' newline 'two') joined as SQL joins it."""
    files = [*sorted((ROOT / "plpgsql").rglob("*.sql")), ROOT / "sql" / "control.sql"]
    text = "\n".join(p.read_text() for p in files)
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


def test_creating_a_tenant_that_exists_names_the_upgrade_command(acme, conninfo):
    proc = run_cli("tenant", "create", "acme", env={"PGRECALL_DSN": conninfo.dsn()}, check=False)
    assert proc.returncode != 0 and "tenant 'acme' already exists" in proc.stderr, proc.stderr
    assert "pgrecall tenant upgrade acme brings an existing tenant up to date" in proc.stderr, proc.stderr
    assert sql_words(proc.stderr.split("(hint:", 1)[-1]) == [], proc.stderr


def test_commands_of_the_whole_tenant_offer_no_scopes_they_would_ignore(app_env, conninfo):
    """export, erase, worker, deriver and embeddings act on the whole tenant: a --scopes they printed in their
    help and then ignored let a user believe `erase --subject u-42 --scopes work` kept to one scope."""
    for command in (["export"], ["erase"], ["worker"], ["deriver"], ["embeddings", "status"]):
        assert "--scopes" not in run_cli(*command, "--help", env=app_env).stdout, command
    admin = {"PGRECALL_DSN": conninfo.dsn(user="pgrecall_acme_admin"), "PGRECALL_TENANT": "acme"}
    proc = run_cli("erase", "--subject", "u-42", "--scopes", "work", "--reason", "asked", env=admin, check=False)
    assert proc.returncode == 2 and "unrecognized arguments: --scopes work" in proc.stderr, proc.stderr
    assert "--scopes" in run_cli("recall", "--help", env=app_env).stdout  # where it means something, it stays


def test_a_time_without_an_offset_is_utc_whatever_the_sessions_time_zone(acme, app_env):
    """docs/cli.md says a time without a zone is UTC; it was read in the database session's time zone (PGTZ or
    the server's), so at UTC+14 a time two hours ahead passed as twelve hours ago."""
    ahead = (datetime.now(UTC) + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%S")
    env = {**app_env, "PGTZ": "Pacific/Kiritimati"}
    proc = run_cli("recall", "--as", "ana", "anything", "--as-of", ahead, env=env, check=False)
    assert proc.returncode == 1 and "is in the future" in proc.stderr, (proc.returncode, proc.stderr)
    before = (datetime.now(UTC) - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%S")
    proc = run_cli("recall", "--as", "ana", "anything", "--as-of", before, "--json", env=env)
    assert json.loads(proc.stdout)["meta"]["as_of"] == before + "+00:00"


def test_recall_json_says_which_moment_it_answers_for(acme, app_env):
    now = json.loads(run_cli("recall", "--as", "ana", "anything", "--json", env=app_env).stdout)
    assert now["meta"]["as_of"] is None and now["meta"]["mode"] == "hybrid"
    then = json.loads(run_cli("recall", "--as", "ana", "anything", "--json", "--as-of", "2026-01-02T03:04:05+01:00",
                              env=app_env).stdout)
    assert then["meta"]["as_of"] == "2026-01-02T02:04:05+00:00"  # the moment, in UTC whatever offset it was given


def test_a_lowercase_z_is_utc_as_rfc_3339_allows(acme, app_env):
    """`2026-01-02t03:04:05z` is a time RFC 3339 allows (and some tools print); it was refused as not ISO 8601."""
    then = json.loads(run_cli("recall", "--as", "ana", "anything", "--json", "--as-of", "2026-01-02t03:04:05z",
                              env=app_env).stdout)
    assert then["meta"]["as_of"] == "2026-01-02T03:04:05+00:00"


def test_facts_known_at_a_later_time_is_refused_naming_the_flags(acme, app_env):
    later = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    proc = run_cli("facts", "--as", "ana", "Ana", "--known-at", later, env=app_env, check=False)
    assert proc.returncode == 1 and "--known-at" in proc.stderr and "is in the future" in proc.stderr, proc.stderr
    assert "give --valid-at to ask what holds at a later time" in proc.stderr, proc.stderr
    assert sql_words(proc.stderr) == [], proc.stderr


def test_export_says_what_it_wrote_in_words_or_as_json(acme, conninfo, tmp_path):
    """The summary printed a Python dict ({'data_subject': 'u-42'}); --json, which docs/cli.md promises every
    command but four, was refused."""
    acme.append("I live in Porto", role="user", actor="ana", data_subject_id="u-42")
    admin = {"PGRECALL_DSN": conninfo.dsn(user="pgrecall_acme_admin"), "PGRECALL_TENANT": "acme"}
    out = tmp_path / "u-42.jsonl"
    proc = run_cli("export", "--subject", "u-42", "--out", str(out), env=admin)
    assert "exported 2 rows of data subject u-42 from tenant acme" in proc.stderr, proc.stderr  # a turn, its passage
    assert "{" not in proc.stderr, proc.stderr
    proc = run_cli("export", "--peer", "ana", "--out", str(out), "--json", env=admin)
    said = json.loads(proc.stdout)
    assert said["selector"] == {"peer": "ana"} and said["out"] == str(out) and said["rows"] >= 1, said
    assert said["rows"] == len(out.read_text().splitlines()) - 1  # the header line, then one line a row
    proc = run_cli("export", "--subject", "u-42", "--json", env=admin, check=False)
    assert proc.returncode == 2 and "give --out FILE" in proc.stderr and proc.stdout == "", proc


def test_exporting_or_erasing_a_peer_erased_before_does_not_advise_creating_it(acme, conninfo, tmp_path):
    """After `pgrecall erase --peer ana`, `export --peer ana` said "unknown erased peer 'ana'" and advised
    add_peer(): creating a peer to export or erase it is no answer, and an erased peer's name is gone."""
    acme.append("I live in Porto", role="user", actor="ana")
    admin = {"PGRECALL_DSN": conninfo.dsn(user="pgrecall_acme_admin"), "PGRECALL_TENANT": "acme"}
    run_cli("erase", "--peer", "ana", "--reason", "asked", env=admin)
    for args in (["export", "--peer", "ana", "--out", str(tmp_path / "ana.jsonl")],
                 ["erase", "--peer", "ana", "--reason", "again"]):
        proc = run_cli(*args, env=admin, check=False)
        assert proc.returncode == 4, proc
        assert "unknown peer 'ana'" in proc.stderr and "keeps no name" in proc.stderr, proc.stderr
        assert "add_peer" not in proc.stderr and "peer add" not in proc.stderr, proc.stderr


def test_embeddings_help_says_what_each_action_does_and_status_refuses_rebuilds_flags(acme, app_env):
    """`pgrecall embeddings status --help` showed a bare {status,rebuild} and a rebuild example only; and
    `embeddings status --all` read the status as if --all meant something there."""
    shown = run_cli("embeddings", "status", "--help", env=app_env).stdout
    assert "status: how many memories and passages have a current" in " ".join(shown.split()), shown
    assert "pgrecall embeddings status --tenant acme" in shown and "with rebuild: re-embed every memory" in shown
    proc = run_cli("embeddings", "status", "--all", env=app_env, check=False)
    assert proc.returncode == 2 and "go with rebuild, not status" in proc.stderr, proc.stderr
    assert "current" in run_cli("embeddings", "status", env=app_env).stdout


def test_an_unknown_principal_and_a_fact_wider_than_its_turn_name_the_commands_and_flags(acme, app_env):
    """A new user following the README's tour as a peer not yet added read "Create it first with add_peer(name,
    kind)", and asserting a fact on a session's turn without --audience read "widen it on purpose with a widening
    reason": a Python call and a phrase, where the command line has `pgrecall peer add` and two flags."""
    proc = run_cli("recall", "--as", "nobody", "risotto", env=app_env, check=False)
    assert proc.returncode == 4, proc.stderr
    assert "pgrecall peer add NAME --kind human --tenant acme" in proc.stderr, proc.stderr
    assert sql_words(proc.stderr.split("(hint:", 1)[-1]) == [], proc.stderr
    acme.add_peer("sage", "agent")
    session = run_cli("session", "create", "dinner", "--as", "ana", "--peer", "ana", "--peer", "sage",
                      env=app_env).stdout.split()[1]
    said = run_cli("session", "say", session, "Shall we cook a mushroom risotto?", "--as", "ana",
                   env=app_env).stdout.split()[1]
    proc = run_cli("fact", "assert", "ana", "likes", "risotto", "--evidence", said, "--quote", "mushroom risotto",
                   "--as", "ana", env=app_env, check=False)
    assert proc.returncode == 1 and "would reach more peers than turn" in proc.stderr, proc.stderr
    assert "--audience PEER" in proc.stderr and "--widening-reason TEXT" in proc.stderr, proc.stderr
    proc = run_cli("fact", "assert", "ana", "likes", "risotto", "--evidence", said, "--quote", "mushroom risotto",
                   "--as", "ana", "--audience", "ana", env=app_env)
    assert "recorded fact" in proc.stdout, proc.stdout


def test_a_misspelt_setting_names_the_command_that_lists_them(acme, conninfo):
    """`pgrecall tenant settings acme --set recall_window_besid=true` (docs/operations.md's command, one letter
    short) answered "settings() lists the settings.", a SQL call, where the command is pgrecall tenant settings."""
    proc = run_cli("tenant", "settings", "acme", "--set", "recall_window_besid=true",
                   env={"PGRECALL_DSN": conninfo.dsn()}, check=False)
    assert proc.returncode == 1 and "no setting 'recall_window_besid'" in proc.stderr, proc.stderr
    assert "pgrecall tenant settings acme lists the settings" in proc.stderr, proc.stderr
    assert sql_words(proc.stderr.split("(hint:", 1)[-1]) == [], proc.stderr
