"""The command line as a whole: help with an example for every subcommand, --json everywhere data is
printed, --version, the agent's commands (recall, search, supersede, derive, facts, bundle) and a
tenant drop that asks first."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from pgrecall import cli


def subcommands() -> dict:
    parser = cli.build_parser()
    [sub] = [a for a in parser._actions if a.dest == "command"]
    return sub.choices


def test_every_subcommand_says_what_it_does_and_shows_an_example():
    for name, p in subcommands().items():
        text = p.format_help()
        assert p.description and len(p.description) > 20, name
        example = text.split("example:\n", 1)
        assert len(example) == 2 and example[1].startswith(f"  pgrecall {name}"), (name, text)


def test_the_help_points_to_the_langgraph_and_openai_agents_sections_of_the_docs():
    text = " ".join(cli.build_parser().format_help().split())
    assert cli.INTEGRATIONS in text
    readme = (Path(__file__).resolve().parent.parent / "docs" / "agents.md").read_text()
    for heading in ("LangGraph: a store on pgrecall", "OpenAI Agents: a session on pgrecall"):
        assert f'"{heading}"' in cli.INTEGRATIONS and f"\n## {heading}\n" in readme


def test_version(capsys):
    from pgrecall import __version__

    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out == f"pgrecall {__version__}\n"


@pytest.fixture
def shell(acme, conninfo, monkeypatch, tmp_path, capsys):
    """Runs `pgrecall ...` in this process as acme's app role (tenant commands as the tester); returns
    (exit code, stdout, stderr)."""
    monkeypatch.setenv("PGRECALL_DSN", conninfo.dsn())
    monkeypatch.setenv("PGRECALL_APP_DSN", conninfo.dsn(user="pgrecall_acme_app"))
    monkeypatch.setenv("PGRECALL_TENANT", "acme")
    monkeypatch.setenv("PGRECALL_HOME", str(tmp_path / "home"))  # no embedded server here

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        try:
            code = cli.main(list(argv))
        except SystemExit as exc:  # argparse refusing its arguments
            code = exc.code
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_json_output_parses_for_every_command_that_prints_data(shell, acme, tmp_path):
    seen = set()

    def data(*argv: str, code: int = 0):
        status, out, err = shell(*argv, "--json")
        assert status == code, (argv, err)
        seen.add(argv[0])
        return json.loads(out)  # one document, nothing else on stdout

    ana = ("--as", "ana")
    home = data("remember", *ana, "--purpose", "converse", "--about", "Ana", "Ana lives in Lisbon")
    assert (home["status"], home["evidence"], home["appended_offset"]) == ("created", [1], 1)
    read = data("read", *ana, "--purpose", "converse", str(home["memory_id"]))
    assert read["revision"] == 1 and read["valid"]["to"] is None and list(read) == sorted(read)
    fixed = data("correct", *ana, str(home["memory_id"]), "Ana lives in Lisbon, in Alfama", "--revision", "1",
                 "--evidence", "1")
    assert fixed == {"evidence": [1], "memory_id": home["memory_id"], "revision": 2}
    moved = data("supersede", *ana, str(home["memory_id"]), "Ana lives in Porto", "--revision", "2",
                 "--said", "We moved to Porto!")
    assert moved["superseded"] == home["memory_id"] and moved["evidence"] == [2]
    pet = data("remember", *ana, "--purpose", "converse", "Ana has a beagle called Pixel")
    derived = data("derive", *ana, "--from", str(moved["memory_id"]), "--from", str(pet["memory_id"]),
                   "Ana walks Pixel in Porto")
    assert derived["sources"] == [moved["memory_id"], pet["memory_id"]]
    found = data("recall", *ana, "--mode", "lexical", "where does Ana live")
    assert found["items"][0]["memory_id"] == moved["memory_id"] and found["meta"]["dense_available"] is False
    said = data("search", *ana, "--mode", "lexical", "moved Porto")
    assert [(h["log_offset"], h["body"]) for h in said["items"]] == [(2, "We moved to Porto!")]
    acme.assert_fact("Ana", "lives_in", "Porto", principal="ana", evidence=[{"offset": 2, "quote": "Porto"}])
    facts = data("facts", *ana, "Ana", "lives_in")
    assert [(f["object"], f["valid"]["to"]) for f in facts["facts"]] == [("Porto", None)]
    bundle = data("bundle", *ana)
    assert bundle["scopes"] == ["default", "other"]  # every scope of the tenant when --scopes is not given
    assert [m["id"] for m in bundle["recent"]][:2] == [derived["memory_id"], pet["memory_id"]]
    gone = data("forget", *ana, "--reason", "asked", str(pet["memory_id"]))
    assert gone["revision"] == 2
    tenants = data("tenant", "list")
    assert [t["tenant"] for t in tenants] == ["acme"] and tenants[0]["schema_version"] >= 16
    settings = {s["key"]: s["value"] for s in data("tenant", "settings", "acme")}
    assert settings["rrf_k"] == 60  # JSON values, not their text
    status = data("embeddings", "status")
    assert status["queued"] >= 1 and status["model"] == "all-MiniLM-L6-v2"
    assert data("server", "status", code=3) == {"pgdata": status_pgdata(shell), "pid": None, "port": None,
                                                "running": False, "socket_dir": None}
    # what the model has beyond memories: peers, scopes, sessions and their messages, facts, documents
    assert data("peer", "add", "sage", "--kind", "agent")["peer"] == "sage"
    assert data("peer", "config", "ana", "--observed-globally", "no")["observed_globally"] is False
    assert [s["name"] for s in data("scope", "list")] == ["default", "other"]
    session = data("session", "create", "dinner", *ana, "--peer", "ana", "--peer", "sage")
    sid = str(session["session"])
    assert [p["peer"] for p in session["peers"]] == ["ana", "sage"]
    assert data("session", "config", sid, "sage", "--observe", "yes", *ana)["observe_others"] is True
    turn = data("session", "say", sid, "I cook risotto on Fridays", *ana)
    assert turn["tasks"] >= 1
    assert [(p["peer"], p["observe_others"]) for p in data("session", "peers", sid, *ana)["peers"]] == \
        [("ana", False), ("sage", True)]
    in_session = data("search", *ana, "--mode", "lexical", "risotto", "--session", sid)
    assert [h["log_offset"] for h in in_session["items"]] == [turn["offset"]]
    # a turn of the session: the fact is for one of its peers (a fact is no more public than its turn)
    fact = data("fact", "assert", "Ana", "likes", "risotto", "--evidence", str(turn["offset"]), "--quote",
                "risotto", "--audience", "ana", *ana)
    assert fact["outcome"] == "inserted"
    edges = data("fact", "traverse", "Ana", *ana)
    assert {(e["predicate"], e["object"]) for e in edges["facts"]} >= {("lives_in", "Porto"), ("likes", "risotto")}
    assert data("fact", "retract", str(fact["fact_id"]), "--reason", "not so", *ana)["known"]["to"] is not None
    assert "lives_in" in {p["name"] for p in data("fact", "predicates", *ana)}
    notes = tmp_path / "notes.md"
    notes.write_text("The bike room is in the basement; its key hangs by the door.\n")
    doc = data("document", "add", str(notes), *ana)
    assert doc["title"] == "notes.md" and doc["offset"] > turn["offset"]
    assert data("search", *ana, "--mode", "lexical", "bike room")["items"][0]["log_offset"] == doc["offset"]
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"speaker": "ana", "role": "user", "text": "Hello"}\n')
    assert data("import", str(chat)) == {"imported": 1, "scope": "default", "tenant": "acme"}
    assert data("deriver", "--once")["failed"] == 0
    assert data("scope", "passages", "default", "--embed", "none")["policy"] == "none"
    assert data("worker", "--once")["memories"] >= 1
    assert data("tenant", "settings", "acme", "--set", "rrf_k=61")["changed"] == [{"key": "rrf_k", "value": 61}]
    assert data("tenant", "upgrade", "acme") == {"applied": [], "tenant": "acme"}
    assert data("tenant", "create", "beta") == {"created": True, "scopes": ["default"], "tenant": "beta"}
    assert data("tenant", "drop", "beta", "--yes") == {"dropped": True, "tenant": "beta"}
    erased = data("erase", "--subject", "u-nobody", "--reason", "a request")
    assert erased["receipt"]["observations_erased"] == 0 and erased["vacuum_problem"] is None
    exported = data("export", "--subject", "u-nobody", "--out", str(tmp_path / "u-nobody.jsonl"))
    assert (exported["rows"], exported["kinds"]) == (0, {})
    from pgrecall import resident

    where = resident.paths()  # under PGRECALL_HOME
    assert data("embedder", "status", code=3) == {"running": False, "socket": str(where.socket),
                                                  "log": str(where.log)}
    with_json = {name for name, p in subcommands().items()
                 if any("--json" in a.option_strings for a in p._actions)}
    assert seen == with_json


def status_pgdata(shell) -> str:
    import os

    return os.path.join(os.environ["PGRECALL_HOME"], "pgdata")


def test_the_agents_commands_print_for_a_person(shell, acme):
    ana = ("--as", "ana")
    shell("remember", *ana, "--purpose", "converse", "--about", "Ana", "Ana lives in Lisbon")
    code, out, _ = shell("supersede", *ana, "1", "Ana lives in Porto", "--revision", "1",
                         "--said", "We moved to Porto!")
    assert code == 0 and "memory 1 is superseded by memory 2, citing offset 2" in out
    code, out, _ = shell("recall", *ana, "--mode", "lexical", "where does Ana live")
    assert "1. [memory 2, note] Ana lives in Porto" in out
    assert 'from default#2 (ana, user' in out and "We moved to Porto!" in out
    code, out, _ = shell("derive", *ana, "--from", "2", "--kind", "decision", "Ana's address is in Porto")
    assert code == 0 and "derived memory 3 from memories 2" in out
    code, out, _ = shell("search", *ana, "--mode", "lexical", "Porto")
    assert "default#2 (ana, user" in out and "We moved to Porto!" in out
    acme.assert_fact("Ana", "lives_in", "Porto", principal="ana", evidence=[{"offset": 2, "quote": "Porto"}])
    code, out, _ = shell("facts", *ana, "Ana")
    assert "Ana lives_in Porto" in out and 'quote from default#2 (user): "Porto"' in out
    code, out, err = shell("facts", *ana, "Ana", "--valid-at", "yesterday")
    assert code == 2 and "not an ISO 8601 time" in err

    acme.pin(3, principal="ana")
    code, out, _ = shell("bundle", *ana, "--scopes", "default")
    assert out.startswith("# Memory for ana (pgrecall tenant acme; scopes default; purpose converse)")
    pinned, recent = out.split("## Pinned")[1].split("## Recently changed memories")
    assert "[memory 3, decision, scope default] Ana's address is in Porto" in pinned
    assert "Ana lives in Porto" in recent and "call the recall tool" in out


def test_bundle_names_a_session_for_its_working_representation(shell, acme):
    session = acme.create_session("flat chat", principal="ben")
    acme.add_session_peers(session, ["ana", {"peer": "ben", "observe_others": True}], principal="ben")
    acme.add_messages(session, [{"actor": "ana", "body": "I live in Lisbon"}], principal="ben")
    from pgrecall.deriver import Deriver

    with Deriver("acme", conninfo=acme_worker_dsn(shell)) as deriver:
        deriver.drain()
    code, out, _ = shell("bundle", "--as", "ben", "--session", str(session))
    assert code == 0 and f"## Working representation in session {session}" in out
    assert "- ana: " in out and "(turn 1)" in out
    code, out, _ = shell("bundle", "--as", "ben", "--session", str(session), "--json")
    assert json.loads(out)["working_representation"]["session"] == session
    code, out, err = shell("bundle", "--as", "ana", "--session", "999")
    assert code == 4 and err.startswith("pgrecall: error: ") and "999" in err  # EXIT_NOT_FOUND: unknown session


def acme_worker_dsn(shell) -> str:
    import os

    return os.environ["PGRECALL_APP_DSN"].replace("pgrecall_acme_app", "pgrecall_acme_worker")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_tenant_drop_asks_unless_yes_and_never_reads_consent_from_a_pipe(shell, db, monkeypatch):
    def tenants():
        return [r[0] for r in db.execute("select name from pgrecall.tenant")]

    monkeypatch.setattr("sys.stdin", io.StringIO("acme\n"))  # a pipe: not a terminal, whatever it holds
    code, out, err = shell("tenant", "drop", "acme")
    assert code == 1 and "--yes" in err and tenants() == ["acme"]
    monkeypatch.setattr("sys.stdin", Terminal("yes\n"))
    code, out, err = shell("tenant", "drop", "acme")
    assert code == 1 and "Type the tenant name" in err and tenants() == ["acme"]
    monkeypatch.setattr("sys.stdin", Terminal("acme\n"))
    code, out, err = shell("tenant", "drop", "acme")
    assert code == 0 and "dropped tenant acme" in out and tenants() == []
    shell("tenant", "create", "acme")
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    code, out, err = shell("tenant", "drop", "acme", "--yes")
    assert code == 0 and tenants() == []


def test_the_app_role_lists_its_tenants_scopes(acme, conninfo):
    with conninfo.connect(user="pgrecall_acme_app") as app:
        assert [r[0] for r in app.execute("select name from acme.scopes()")] == ["default", "other"]


def test_reading_commands_ask_every_scope_unless_told(shell, acme):
    """recall, search and facts without --scopes read every scope of the tenant (as bundle and mcp
    do): a tenant without a scope called default still answers; --scopes narrows them."""
    said = acme.append("Ana: my passport expires in June", role="user", actor="ana", scope="other",
                       scopes=["other"])
    acme.remember("Ana's passport expires in June", evidence=[said], purposes=["converse"],
                  scope="other", scopes=["other"], principal="ana", about=["Ana"])
    acme.assert_fact("Ana", "lives_in", "Lisbon", principal="ana", scopes=["other"], scope="other",
                     evidence=[{"offset": said, "quote": "Ana"}])
    # narrowed to default: nothing found, and no entity Ana there for facts (exit 4, not found)
    for argv, found, narrowed in ((("recall", "--mode", "lexical", "passport"), "Ana's passport expires in June", 0),
                                  (("search", "--mode", "lexical", "passport"), "my passport expires in June", 0),
                                  (("facts", "Ana", "lives_in"), "Lisbon", 4)):
        code, out, err = shell(*argv, "--as", "ana")
        assert code == 0 and found in out, (argv, err)
        code, out, err = shell(*argv, "--as", "ana", "--scopes", "default")
        assert code == narrowed and found not in out, (argv, out, err)
