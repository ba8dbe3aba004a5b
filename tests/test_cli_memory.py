"""The hand-use commands: remember, read, forget, import."""

import json

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


def test_peers_and_scopes_from_the_shell(make_tenant, conninfo, db):
    make_tenant("acme")
    env = {"PGRECALL_DSN": conninfo.dsn(user="pgrecall_acme_app"), "PGRECALL_TENANT": "acme"}
    assert "scope default exists" in run_cli("scope", "add", "default", env=env).stdout
    assert "peer ana (human)" in run_cli("peer", "add", "ana", env=env).stdout
    out = run_cli("remember", "--as", "ana", "--purpose", "converse", "Ana is vegetarian", env=env).stdout
    assert "remembered as memory 1" in out
    bad = run_cli("peer", "add", " ana ", env=env, check=False)
    assert bad.returncode == 1 and "invalid peer name" in bad.stderr
