"""The hand-use commands: remember, read, forget, import."""

import json

import pytest

from pgrecall import errors
from test_install_paths import run_cli


def test_remember_read_forget_from_the_shell(acme, conninfo):
    env = {"PGRECALL_DSN": conninfo.dsn(user="pgrecall_acme_app"), "PGRECALL_TENANT": "acme"}
    out = run_cli("remember", "--as", "ana", "--purpose", "converse", "--about", "Ana", "Ana drinks green tea", env=env).stdout
    assert "appended observation at offset 1" in out and "remembered as memory 1" in out
    again = run_cli("remember", "--as", "ana", "--purpose", "converse", "--evidence", "1", "Ana drinks green tea", env=env).stdout
    assert "nothing remembered (duplicate" in again
    shown = run_cli("read", "--as", "ana", "--purpose", "converse", "1", env=env).stdout
    assert "body:      Ana drinks green tea" in shown and "from default#1 (ana, user)" in shown
    as_json = json.loads(run_cli("read", "--as", "ana", "--purpose", "converse", "--json", "1", env=env).stdout)
    assert as_json["provenance"]["about"] == [{"entity": "Ana", "type": None}]
    denied = run_cli("read", "--as", "ana", "--purpose", "act", "1", env=env, check=False)
    assert denied.returncode == 4 and "memory 1 not found" in denied.stderr  # EXIT_NOT_FOUND
    assert "forgot memory 1" in run_cli("forget", "--as", "ana", "--reason", "asked to", "1", env=env).stdout
    assert run_cli("read", "--as", "ana", "--purpose", "converse", "1", env=env, check=False).returncode == 4


def test_import_loads_a_conversation_all_or_nothing(acme, conninfo, db, tmp_path):
    env = {"PGRECALL_DSN": conninfo.dsn(user="pgrecall_acme_app")}
    good = tmp_path / "chat.jsonl"
    lines = [{"speaker": "ana", "role": "user", "text": f"turn {i}", "occurred_at": f"2026-05-01T10:{i:02d}:00+00:00"}
             for i in range(30)]
    lines.insert(5, {"speaker": "helper", "role": "assistant", "text": "noted", "speaker_kind": "agent"})
    good.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    out = run_cli("import", "--tenant", "acme", "--scopes", "chat", str(good), env=env)
    assert "imported 31 observations into scope chat" in out.stdout
    assert "importing" in out.stderr  # the progress bar
    rows = db.execute("select log_offset, source_role, body from acme.observation where scope = 'chat' order by 1").fetchall()
    assert len(rows) == 31 and rows[5] == (6, "assistant", "noted")
    assert db.execute("select kind from acme.peer where name = 'helper'").fetchone() == ("agent",)

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"speaker": "ana", "role": "user", "text": "fine"}) + "\n"
                   + json.dumps({"speaker": "ana", "role": "narrator", "text": "not a role"}) + "\n")
    failed = run_cli("import", "--tenant", "acme", "--scopes", "chat", str(bad), env=env, check=False)
    assert failed.returncode == 1 and "bad.jsonl:2" in failed.stderr and "nothing was imported" in failed.stderr
    assert db.execute("select count(*) from acme.observation where scope = 'chat'").fetchone()[0] == 31

    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"speaker": "ana", "role": "user", "text": "ok"}\n{not json\n')
    failed = run_cli("import", "--tenant", "acme", "--scopes", "chat", str(broken), env=env, check=False)
    assert failed.returncode == 1 and "broken.jsonl:2: not JSON" in failed.stderr



def test_an_import_line_that_cannot_be_read_or_names_no_speaker_is_refused_at_its_line(acme, conninfo, db, tmp_path):
    """A line nested thousands deep, a number of thousands of digits and a speaker that is an array or an object
    were internal errors (RecursionError, ValueError, TypeError: exit 70); a speaker name the tenant refuses
    was reported without the line that gave it."""
    env = {"PGRECALL_DSN": conninfo.dsn(user="pgrecall_acme_app")}
    fine = json.dumps({"speaker": "ana", "role": "user", "text": "fine"})
    cases = {
        "deep": ('{"speaker": "ana", "role": "user", "text": "hi", "payload": ' + '{"a": ' * 5000 + "1"
                 + "}" * 5001, "nested too deeply"),
        "digits": ('{"speaker": "ana", "role": "user", "text": "hi", "payload": {"n": ' + "9" * 5000 + "}}",
                   "digits"),
        "list": (json.dumps({"speaker": ["ana"], "role": "user", "text": "hi"}), "speaker must be a string"),
        "object": (json.dumps({"speaker": {"name": "ana"}, "role": "user", "text": "hi"}),
                   "speaker must be a string"),
        "control": (json.dumps({"speaker": "eve\u202e", "role": "user", "text": "hi"}), "U+202E"),
    }
    before = db.execute("select (select count(*) from acme.observation), (select count(*) from acme.peer)").fetchone()
    for name, (line, said) in cases.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text(fine + "\n" + line + "\n", encoding="utf-8")
        failed = run_cli("import", "--tenant", "acme", "--quiet", str(path), env=env, check=False)
        assert failed.returncode == 1 and f"{name}.jsonl:2: " in failed.stderr, failed.stderr
        assert said in failed.stderr and "internal error" not in failed.stderr, failed.stderr
    assert db.execute("select (select count(*) from acme.observation), (select count(*) from acme.peer)"
                      ).fetchone() == before

def test_peers_and_scopes_from_the_shell(make_tenant, conninfo, db):
    make_tenant("acme")
    env = {"PGRECALL_DSN": conninfo.dsn(user="pgrecall_acme_app"), "PGRECALL_TENANT": "acme"}
    # a new scope is said to be added; one that is there, to exist ("exists" for both read as "it was there")
    assert run_cli("scope", "add", "default", env=env).stdout.strip() == "scope default added to tenant acme"
    assert run_cli("scope", "add", "default", env=env).stdout.strip() == "scope default exists in tenant acme"
    assert run_cli("scope", "add", "travel", env=env).stdout.strip() == "scope travel added to tenant acme"
    assert "its description is now" in run_cli("scope", "add", "travel", "--description", "trips", env=env).stdout
    assert "peer ana (human)" in run_cli("peer", "add", "ana", env=env).stdout
    out = run_cli("remember", "--as", "ana", "--purpose", "converse", "Ana is vegetarian", env=env).stdout
    assert "remembered as memory 1" in out
    bad = run_cli("peer", "add", " ana ", env=env, check=False)
    assert bad.returncode == 1 and "invalid peer name" in bad.stderr


def test_a_refused_remember_leaves_no_turn_and_says_so_in_its_exit_code(acme, conninfo, db):
    """Finding 4 of #27: the turn was written before the memory was checked, and a refusal exited 0."""
    env = {"PGRECALL_DSN": conninfo.dsn(user="pgrecall_acme_app"), "PGRECALL_TENANT": "acme"}
    remember = ("remember", "--as", "ana", "--purpose", "converse")
    too_long = run_cli(*remember, "x" * 100_000, env=env, check=False)
    assert too_long.returncode == 1 and "memory body is 100000 bytes" in too_long.stderr
    for text in ("", "Does Ana eat fish?", "..."):
        refused = run_cli(*remember, text, env=env, check=False)
        assert refused.returncode == 9, (text, refused.stdout, refused.stderr)  # EXIT_NOTHING_KEPT
        assert "nothing remembered" in refused.stdout and "appended" not in refused.stdout
    assert db.execute("select count(*) from acme.observation").fetchone()[0] == 0
    as_json = run_cli(*remember, "--json", "Is it?", env=env, check=False)
    assert as_json.returncode == 9 and json.loads(as_json.stdout)["appended_offset"] is None
    kept = run_cli(*remember, "Ana drinks green tea", env=env)
    assert "appended observation at offset 1" in kept.stdout and "remembered as memory 1" in kept.stdout
    # a duplicate is kept already: it says which memory, and exits 0
    again = run_cli(*remember, "Ana drinks green tea", env=env)
    assert "nothing remembered (duplicate" in again.stdout and "memory 1" in again.stdout
    assert db.execute("select count(*) from acme.observation").fetchone()[0] == 1


def test_the_driver_remembers_what_was_said_in_one_call(acme, db):
    """The driver's remember-with-its-turn: one stored call, so a refused memory leaves no turn."""
    r = acme.remember("Ana drinks green tea", said="I drink green tea every morning", purposes=["converse"],
                      audience="ana")
    assert r.created and r.log_offset == 1
    assert db.execute("select body, audience = array[(select id from acme.peer where name = 'ana'), "
                      "(select id from acme.peer where name = 'bot')] from acme.observation").fetchall() == \
        [("I drink green tea every morning", True)]
    for text in ("", "Is it?"):
        nothing = acme.remember(text, said=text or "hm", purposes=["converse"])
        assert not nothing.created and nothing.log_offset is None
    with pytest.raises(errors.TextTooLong):
        acme.remember("x" * 20_000, said="x" * 20_000, purposes=["converse"])
    assert db.execute("select count(*) from acme.observation").fetchone()[0] == 1



def test_an_imported_time_without_a_zone_is_utc_whatever_the_sessions_time_zone(acme, conninfo, db, tmp_path):
    """It was read in the database session's time zone (PGTZ or the server's): the same file imported at
    UTC+14 put the turn fourteen hours earlier, where `recall --as-of` reads the same spelling as UTC."""
    env = {"PGRECALL_DSN": conninfo.dsn(user="pgrecall_acme_app"), "PGTZ": "Pacific/Kiritimati"}
    path = tmp_path / "naive.jsonl"
    path.write_text(json.dumps({"speaker": "ana", "role": "user", "text": "at ten", "occurred_at": "2026-01-01T10:00:00"})
                    + "\n", encoding="utf-8")
    run_cli("import", "--tenant", "acme", "--quiet", str(path), env=env)
    [(when,)] = db.execute("select to_char(occurred_at at time zone 'UTC', 'YYYY-MM-DD HH24:MI') from acme.observation"
                           " where body = 'at ten'").fetchall()
    assert when == "2026-01-01 10:00"


def test_an_import_that_writes_a_session_id_as_a_number_and_as_a_string_is_refused(acme, conninfo, db, tmp_path):
    """session_id 1 and "1" are two different JSON values, but both were taken as one session ("session 1"),
    whose peers then saw the turns of both: the file is refused, naming both lines, and nothing is imported."""
    env = {"PGRECALL_DSN": conninfo.dsn(user="pgrecall_acme_app")}
    sessions = "select count(*) from acme.session"
    before = db.execute(sessions).fetchone()[0]
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("".join(json.dumps(line) + "\n" for line in (
        {"speaker": "ana", "role": "user", "text": "in the number one", "session_id": 1},
        {"speaker": "ben", "role": "user", "text": "hi there"},
        {"speaker": "ben", "role": "user", "text": "in the string one", "session_id": "1"})))
    failed = run_cli("import", "--tenant", "acme", "--quiet", str(mixed), env=env, check=False)
    assert failed.returncode == 1, failed.stderr
    assert 'mixed.jsonl:3: session_id "1" (a string) is not session_id 1 (a number) of line 1' in failed.stderr
    assert "nothing was imported" in failed.stderr
    assert db.execute(sessions).fetchone()[0] == before
    assert db.execute("select count(*) from acme.observation where body like 'in the %'").fetchone()[0] == 0

    # written the same way on every line, each label is its own session
    same = tmp_path / "same.jsonl"
    same.write_text(mixed.read_text().replace('"session_id": "1"', '"session_id": 2'))
    run_cli("import", "--tenant", "acme", "--quiet", str(same), env=env)
    assert db.execute(sessions).fetchone()[0] == before + 2
