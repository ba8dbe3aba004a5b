"""`pgrecall mcp`: the SDK's own client starts the server as a subprocess and uses a principal's memory.

Every server here is a real `pgrecall mcp` process logged in as acme's application role (through
PGRECALL_APP_DSN); the client is `mcp.ClientSession` over `stdio_client`, or over
`streamable_http_client` for the HTTP transport.
"""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import anyio
import pytest
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client

from conftest import table_counts
from pgrecall import cli, errors

TOOLS = {"recall", "read", "remember", "derive", "correct", "supersede", "forget", "search_messages", "facts"}


def server_env(conninfo, tenant: str = "acme") -> dict[str, str]:
    # stdio_client passes only a safe subset of the environment: the DSN goes explicitly.
    # PYTHONPATH too, when set: a checkout run with another checkout's venv serves its own code, not the venv's.
    # The model in the server's own process: a resident embedder would be started in the user's own
    # PGRECALL_HOME (the env carries none) and outlive the test.
    return {"PGRECALL_APP_DSN": conninfo.dsn(user=f"pgrecall_{tenant}_app"), "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1", "PGRECALL_EMBEDDER": "process", **({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ
                                           else {})}


@asynccontextmanager
async def stdio_session(env: dict, args: list[str], errlog, preload: bool = False):
    # The model is preloaded only where a test recalls by meaning: it costs seconds of CPU per server.
    args = [*args] if preload else [*args, "--no-preload"]
    params = StdioServerParameters(command=sys.executable, args=["-m", "pgrecall.cli", "mcp", *args], env=env)
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def ok(session, tool: str, **arguments) -> dict:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    assert json.loads(result.content[0].text) == result.structured_content  # the text is the same document
    return result.structured_content


async def error(session, tool: str, **arguments) -> dict:
    result = await session.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    err = result.structured_content["error"]
    assert result.content[0].text.startswith(f"{err['code']} {err['type']}: ")
    return err


def observations(db) -> int:
    return table_counts(db)["observation"]


@pytest.mark.slow  # an MCP server subprocess that loads the embedding model
def test_an_mcp_client_remembers_recalls_reads_corrects_and_forgets(acme, conninfo, db, tmp_path):
    env = server_env(conninfo)
    stderr = tmp_path / "server.err"

    async def as_ana():
        with stderr.open("w") as errlog:
            async with stdio_session(env, ["--tenant", "acme", "--as", "ana", "--scopes", "default"], errlog,
                                     preload=True) as s:
                listed = (await s.list_tools()).tools
                assert {t.name for t in listed} == TOOLS
                assert all(t.input_schema["type"] == "object" and t.description for t in listed)

                said = "I'm vegetarian: no meat, no fish."
                r = await ok(s, "remember", text="Ana is vegetarian", said=said, about=["Ana"], private=True)
                assert r["status"] == "created" and r["evidence"] == [r["recorded_offset"]]
                memory = r["memory"]
                assert (memory["revision"], memory["audience"], memory["purposes"]) == (1, "ana", ["converse"])
                [source] = memory["provenance"]["observations"]
                assert (source["text"], source["actor"], source["source_role"], source["offset"]) == \
                    (said, "ana", "user", r["recorded_offset"])
                memory_id = r["memory_id"]

                found = await ok(s, "recall", query="what does Ana eat")
                [item] = [i for i in found["items"] if i["memory_id"] == memory_id]
                assert item["body"] == "Ana is vegetarian"
                assert item["provenance"]["observations"][0]["text"] == said
                assert isinstance(found["meta"]["dense_available"], bool) and found["meta"]["fused_count"] >= 1

                read = await ok(s, "read", memory_id=memory_id)
                assert (read["revision"], read["body"], read["valid"]["to"]) == (1, "Ana is vegetarian", None)

                fixed = await ok(s, "correct", memory_id=memory_id, text="Ana is vegan", revision=1,
                                 said="Actually, I'm vegan now.", reason="she said so")
                assert fixed["revision"] == 2 and fixed["memory"]["body"] == "Ana is vegan"
                cited = {o["text"]: o["corrections"] for o in fixed["memory"]["provenance"]["observations"]}
                assert cited == {said: [], "Actually, I'm vegan now.": [2]}

                # A stale revision: the conflict, with its code and hint, and nothing written for it.
                before = observations(db)
                stale = await error(s, "correct", memory_id=memory_id, text="Ana eats fish", revision=1)
                assert (stale["code"], stale["type"]) == ("PR105", "RevisionConflict") and stale["hint"]
                assert observations(db) == before
                assert (await ok(s, "read", memory_id=memory_id))["body"] == "Ana is vegan"

                # A question states nothing: refused, and the words are not left in the log.
                asked = await ok(s, "remember", text="Does Ana eat fish?")
                assert asked["status"] == "noop" and asked["reason"].startswith("question")
                assert asked["recorded_offset"] is None and observations(db) == before

                # No argument reaches outside the scopes the server started with.
                outside = await error(s, "remember", text="Ana likes jazz", scope="other")
                assert outside["code"] == "PR103"
                assert observations(db) == before
                return memory_id

    memory_id = anyio.run(as_ana)
    assert "serving ana's memory in tenant acme (scopes default; purpose converse) on stdio" in stderr.read_text()

    async def as_ben():
        with stderr.open("w") as errlog:
            async with stdio_session(env, ["--tenant", "acme", "--as", "ben", "--scopes", "default"], errlog) as s:
                found = await ok(s, "recall", query="what does Ana eat", mode="lexical")
                assert memory_id not in [i["memory_id"] for i in found["items"]]
                hidden = await error(s, "read", memory_id=memory_id)
                assert hidden["code"] == "PR104"
                # Another principal's name is no argument of any tool.
                for tool in (await s.list_tools()).tools:
                    assert not {"principal", "scopes", "as"} & set(tool.input_schema["properties"]), tool.name

    anyio.run(as_ben)

    async def ana_forgets():
        with stderr.open("w") as errlog:
            async with stdio_session(env, ["--tenant", "acme", "--as", "ana", "--scopes", "default"], errlog) as s:
                gone = await ok(s, "forget", memory_id=memory_id, reason="she asked", revision=2)
                assert gone["revision"] == 3
                assert (await error(s, "read", memory_id=memory_id))["code"] == "PR104"
                found = await ok(s, "recall", query="what does Ana eat", mode="lexical")
                assert memory_id not in [i["memory_id"] for i in found["items"]]

    anyio.run(ana_forgets)


def test_supersede_derive_search_facts_and_the_bundle_over_mcp(acme, conninfo, tmp_path):
    async def run():
        with (tmp_path / "server.err").open("w") as errlog:
            async with stdio_session(server_env(conninfo), ["--tenant", "acme", "--as", "ana"], errlog) as s:
                home = await ok(s, "remember", text="Ana lives in Lisbon", said="I live in Lisbon.", about=["Ana"])
                pet = await ok(s, "remember", text="Ana has a beagle called Pixel", said="My beagle Pixel is 3.")
                moved = await ok(s, "supersede", memory_id=home["memory_id"], text="Ana lives in Porto",
                                 revision=1, said="We moved to Porto last week!")
                assert moved["superseded"] == home["memory_id"] and moved["memory"]["body"] == "Ana lives in Porto"
                assert [e["entity"] for e in moved["memory"]["provenance"]["about"]] == ["Ana"]
                old = await ok(s, "read", memory_id=home["memory_id"], include_superseded=True)
                assert old["superseded_by"] == moved["memory_id"] and old["valid"]["to"] is not None
                assert (await error(s, "supersede", memory_id=home["memory_id"], text="Ana lives in Faro",
                                    revision=1))["code"] in ("PR105", "PR108")

                derived = await ok(s, "derive", sources=[moved["memory_id"], pet["memory_id"]],
                                   text="Ana walks Pixel in Porto", kind="note")
                assert {m["id"] for m in derived["memory"]["provenance"]["memories"]} == \
                    {moved["memory_id"], pet["memory_id"]}

                # Offsets instead of words: nothing is appended, the turn cited is the one given.
                aged = await ok(s, "correct", memory_id=pet["memory_id"], text="Ana has a beagle called Pixel, aged 3",
                                revision=1, evidence=[pet["recorded_offset"]])
                assert aged["evidence"] == [pet["recorded_offset"]] and aged["revision"] == 2
                # Neither: the text itself is recorded as what the principal said, and cited.
                plain = await ok(s, "remember", text="Ana's sister Rita lives in Porto too")
                [source] = plain["memory"]["provenance"]["observations"]
                assert (source["text"], source["actor"], source["offset"]) == \
                    ("Ana's sister Rita lives in Porto too", "ana", plain["recorded_offset"])

                hits = await ok(s, "search_messages", query="moved Porto", mode="lexical")
                [hit] = [h for h in hits["items"] if h["body"] == "We moved to Porto last week!"]
                cited = await ok(s, "remember", text="Ana moved to Porto recently", evidence=[hit["log_offset"]])
                assert cited["evidence"] == [hit["log_offset"]] and cited["recorded_offset"] is None

                # Facts, asserted through the driver with a quote of what was said.
                acme.assert_fact("Ana", "lives_in", "Porto", principal="ana",
                                 evidence=[{"offset": hit["log_offset"], "quote": "moved to Porto"}])
                facts = await ok(s, "facts", subject="Ana", predicate="lives_in")
                [fact] = facts["facts"]
                assert (fact["object"], fact["valid"]["to"], fact["evidence"][0]["quote"]) == \
                    ("Porto", None, "moved to Porto")
                assert (await error(s, "facts", subject="Ana", predicate="lives_near"))["code"] == "PR111"

                prompt = await s.get_prompt("session_start", {})
                text = prompt.messages[0].content.text
                assert "Ana walks Pixel in Porto" in text and "call the recall tool" in text
                assert f'from default#{moved["evidence"][0]} (ana, user' in text
                assert "We moved to Porto last week!" in text
                resource = await s.read_resource("pgrecall://bundle")
                assert resource.contents[0].text == text
                assert {p.name for p in (await s.list_prompts()).prompts} == {"session_start"}
                assert [str(r.uri) for r in (await s.list_resources()).resources] == ["pgrecall://bundle"]
                assert [t.uri_template for t in (await s.list_resource_templates()).resource_templates] == \
                    ["pgrecall://session/{session}/bundle"]
                session = acme.create_session("chat", principal="ana")
                acme.add_session_peers(session, ["ana"], principal="ana")
                in_session = await s.read_resource(f"pgrecall://session/{session}/bundle")
                assert f"## Working representation in session {session}" in in_session.contents[0].text
                with pytest.raises(MCPError) as unknown:
                    await s.read_resource("pgrecall://session/999/bundle")
                assert "PR120" in str(unknown.value)
                with pytest.raises(MCPError):
                    await s.get_prompt("session_start", {"session": "one"})

    anyio.run(run)



def test_a_time_without_an_offset_is_utc_whatever_the_servers_time_zone(acme, conninfo, db, tmp_path):
    """recall's as_of and facts' valid_at and known_at without an offset were read in the database session's time
    zone (PGTZ, or the server's configuration: out of the model's sight): under UTC+14 a moment just after a memory
    was written answered as of 14 hours before it, with nothing. The command line reads them as UTC; so does MCP."""
    said = acme.append("ana: I drink green tea", role="user", actor="ana")
    acme.remember("Ana drinks green tea", evidence=[said], purposes=["converse"], principal="ana")
    acme.assert_fact("Ana", "likes", "green tea", principal="ana", evidence=[{"offset": said, "quote": "green tea"}])
    time.sleep(0.05)
    moment = db.execute("select clock_timestamp()").fetchone()[0]
    naive = moment.astimezone(UTC).replace(tzinfo=None).isoformat()

    async def run():
        env = {**server_env(conninfo), "PGTZ": "Pacific/Kiritimati"}
        with (tmp_path / "server.err").open("w") as errlog:
            async with stdio_session(env, ["--tenant", "acme", "--as", "ana"], errlog) as s:
                then = await ok(s, "recall", query="green tea", mode="lexical", as_of=naive)
                assert [i["body"] for i in then["items"] if i["item"] == "memory"] == ["Ana drinks green tea"], \
                    then["meta"]["as_of"]
                assert datetime.fromisoformat(then["meta"]["as_of"]) == moment
                believed = await ok(s, "facts", subject="Ana", known_at=naive, valid_at=naive)
                assert [f["object"] for f in believed["facts"]] == ["green tea"]

    anyio.run(run)


def test_the_session_start_prompt_says_why_it_cannot_be_given(acme, conninfo, tmp_path):
    """The resource said `PR120 UnknownSession: unknown session 999`; the prompt, asked for the same session,
    said only "Error rendering prompt session_start" (the SDK's words for any error of a prompt)."""
    async def run():
        with (tmp_path / "server.err").open("w") as errlog:
            async with stdio_session(server_env(conninfo), ["--tenant", "acme", "--as", "ana"], errlog) as s:
                said = []
                for session in ("999", "one"):
                    with pytest.raises(MCPError) as refused:
                        await s.get_prompt("session_start", {"session": session})
                    said.append(refused.value.message)
                return said

    unknown, not_a_number = anyio.run(run)
    assert unknown.startswith("PR120 UnknownSession: unknown session 999"), unknown
    assert not_a_number.startswith("PR107 InvalidArgument: session must be a session id"), not_a_number
    assert "'one'" in not_a_number

def test_arguments_the_schema_refuses_come_back_in_the_one_error_shape(acme, conninfo, tmp_path):
    """Before this, the framework answered them itself: pydantic's text, the rejected value and a link to its
    docs, no code, no structured content (#33 item 5)."""
    async def run():
        with (tmp_path / "server.err").open("w") as errlog:
            async with stdio_session(server_env(conninfo), ["--tenant", "acme", "--as", "ana"], errlog) as s:
                return [await error(s, "recall", query="tea", limit="many"),
                        await error(s, "read", memory_id=0),
                        await error(s, "remember"),
                        await error(s, "forget_everything", reason="now")]

    many, zero, missing, unknown = anyio.run(run)
    for err in (many, zero, missing, unknown):
        assert (err["code"], err["type"]) == ("PR107", "InvalidArgument"), err
        assert "pydantic" not in err["message"] and "http" not in err["message"], err
        assert err["hint"]
    assert many["message"].startswith("recall: limit: ") and "integer" in many["message"]
    assert "many" not in many["message"]  # the rejected value is the caller's data, not echoed
    assert zero["message"].startswith("read: memory_id: ") and "1" in zero["message"]
    assert missing["message"].startswith("remember: text: ") and "required" in missing["message"]
    assert unknown["message"] == "there is no tool 'forget_everything'"


def test_tool_descriptions_tell_a_model_how_to_use_its_memory(acme, conninfo, tmp_path):
    async def run():
        with (tmp_path / "server.err").open("w") as errlog:
            async with stdio_session(server_env(conninfo), ["--tenant", "acme", "--as", "ana"], errlog) as s:
                init_instructions = s.instructions
                return {t.name: t.description for t in (await s.list_tools()).tools}, init_instructions

    descriptions, instructions = anyio.run(run)
    assert all(len(d) < 600 for d in descriptions.values()), {k: len(v) for k, v in descriptions.items()}
    recall = descriptions["recall"]
    for phrase in ("before saying you have no context", "not necessarily relevant", "dated claim",
                   "not current truth", "provenance", "dense_available"):
        assert phrase in recall, phrase
    for phrase in ("Only what someone actually said", "questions", "empty text are refused", "`said`",
                   "`evidence`"):
        assert phrase in descriptions["remember"], phrase
    assert "Read before you correct or supersede" in descriptions["read"]
    for tool in ("correct", "supersede"):
        assert "revision you read" in descriptions[tool] and "PR105" in descriptions[tool]
    assert "search_messages" in descriptions["remember"] and "not what was remembered" in descriptions["search_messages"]
    assert "`valid`" in descriptions["facts"] and "PR106" in descriptions["derive"]
    assert "Recall before you say you have no context" in instructions and "ana" in instructions


@pytest.mark.slow  # an MCP server subprocess that loads the embedding model
def test_stdout_carries_only_the_protocol(acme, conninfo, tmp_path):
    """Every line the server writes to stdout is a JSON-RPC message, model loading and errors included."""
    import os

    acme.remember("Ana likes green tea", evidence=[acme.append("I like green tea", role="user", actor="ana")],
                  purposes=["converse"], principal="ana")
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "recall", "arguments": {"query": "tea"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "read", "arguments": {"memory_id": 99}}},
        {"jsonrpc": "2.0", "id": 4, "method": "prompts/get", "params": {"name": "session_start"}},
    ]
    proc = subprocess.Popen([sys.executable, "-m", "pgrecall.cli", "mcp", "--tenant", "acme", "--as", "ana"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **server_env(conninfo)})
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    replies = {}
    try:
        for message in messages:
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()
            if "id" in message:
                # Each request is answered before the next is sent; anything else on stdout fails here.
                reply = json.loads(lines.get(timeout=180))
                assert reply["jsonrpc"] == "2.0" and reply["id"] == message["id"], reply
                replies[reply["id"]] = reply
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert lines.empty()
    assert replies[2]["result"]["structuredContent"]["items"][0]["body"] == "Ana likes green tea"
    assert replies[3]["result"]["isError"] and replies[3]["result"]["structuredContent"]["error"]["code"] == "PR104"
    assert "Ana likes green tea" in replies[4]["result"]["messages"][0]["content"]["text"]
    assert "serving ana's memory" in proc.stderr.read()


def test_a_server_that_cannot_serve_says_why_and_exits(acme, conninfo):
    import os

    env = {**os.environ, **server_env(conninfo)}
    # One line naming what is wrong, nothing on stdout (an MCP client would read it as the protocol).
    # Exit codes as docs/cli.md's table: 4 an unknown peer or scope (not found, PR131; it was 6, issue #33).
    for args, named, code in ((["--as", "nobody"], "'nobody'", 4), (["--as", "ana", "--scopes", "nope"], "'nope'", 4),
                              (["--as", "ana", "--purpose", "review", "--scopes", "default,nope"], "'nope'", 4)):
        proc = subprocess.run([sys.executable, "-m", "pgrecall.cli", "mcp", "--tenant", "acme", *args],
                              capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=120)
        assert proc.returncode == code and proc.stdout == "", (args, proc.returncode, proc.stdout)
        assert proc.stderr.startswith("pgrecall: error: ") and named in proc.stderr and proc.stderr.count("\n") == 1


@pytest.mark.parametrize("address", ["0.0.0.0:8765", "192.168.1.10:8765", "127.0.0.2:8765", "example.org:80",
                                     "[::]:8765", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:http"])
def test_http_listens_on_loopback_only(address, capsys, monkeypatch):
    # Refused before anything connects: no database is needed to say no.
    monkeypatch.setenv("PGRECALL_APP_DSN", "host=/nonexistent dbname=none")
    assert cli.main(["mcp", "--tenant", "acme", "--as", "ana", "--http", address]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("pgrecall: error: --http ") and err.count("\n") == 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_streamable_http_on_localhost(acme, conninfo, tmp_path):
    import os

    from mcp.client.streamable_http import streamable_http_client

    port = _free_port()
    errlog = (tmp_path / "server.err").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "pgrecall.cli", "mcp", "--tenant", "acme", "--as", "ana",
                             "--scopes", "default", "--http", f"127.0.0.1:{port}", "--no-preload"],
                            env={**os.environ, **server_env(conninfo)}, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=errlog)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, (tmp_path / "server.err").read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the HTTP server did not start"
                time.sleep(0.2)

        async def run():
            async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write), \
                    ClientSession(read, write) as s:
                await s.initialize()
                assert {t.name for t in (await s.list_tools()).tools} == TOOLS
                r = await ok(s, "remember", text="Ana drinks green tea", said="I only drink green tea.")
                found = await ok(s, "recall", query="green tea", mode="lexical")
                [item] = [i for i in found["items"] if i["memory_id"] == r["memory_id"]]
                assert item["provenance"]["observations"][0]["text"] == "I only drink green tea."
                stale = await error(s, "correct", memory_id=r["memory_id"], text="x", revision=5)
                assert stale["code"] == "PR105"

        anyio.run(run)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        errlog.close()
    assert f"on http://127.0.0.1:{port}/mcp" in (tmp_path / "server.err").read_text()


def check_the_demo_over_mcp(app_dsn: str, tmp_path) -> None:
    """After `make run`'s demo: `pgrecall mcp --tenant demo --as Ana`, nothing else, answers a client
    (called from test_demo, which has just loaded the demo)."""
    env = {"PGRECALL_APP_DSN": app_dsn, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PGRECALL_EMBEDDER": "process", **({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {})}

    async def run(principal: str, question: str) -> tuple[list[dict], list[dict]]:
        with (tmp_path / f"{principal}.err").open("w") as errlog:
            async with stdio_session(env, ["--tenant", "demo", "--as", principal], errlog) as s:
                return ((await ok(s, "recall", query=question, mode="lexical", limit=5))["items"],
                        (await ok(s, "search_messages", query=question, mode="lexical", limit=5))["items"])

    ana, ana_said = anyio.run(run, "Ana", "surprise party for Ben's birthday")
    assert any("surprise party" in i["body"] and i["provenance"]["observations"] for i in ana)
    assert any("surprise party" in h["body"] for h in ana_said)
    ben, ben_said = anyio.run(run, "Ben", "surprise party for Ben's birthday")
    assert not any("surprise" in i["body"] for i in ben)
    assert not any("surprise" in h["body"] for h in ben_said)  # nor in the log (#27)


def test_a_dropped_connection_is_replaced_and_only_reads_are_run_again(acme, conninfo, superuser_dsn):
    import psycopg

    from pgrecall.agent import AgentMemory

    agent = AgentMemory("acme", "ana", ["default"], conninfo=conninfo.dsn(user="pgrecall_acme_app"))

    def kill():
        with psycopg.connect(superuser_dsn, autocommit=True) as su:
            su.execute("select pg_terminate_backend(%s)", (agent._conn.info.backend_pid,))

    try:
        tea = agent.remember("Ana likes green tea", said="I like green tea")["memory_id"]
        kill()  # as a server restart does
        assert agent.read(tea)["body"] == "Ana likes green tea"
        kill()
        assert [i["memory_id"] for i in agent.recall("green tea", mode="lexical")["items"]] == [tea]
        kill()
        # A write is not run again (it may have committed before the connection died): the caller is told ...
        with pytest.raises(errors.ConnectionLost):
            agent.remember("Ana likes black tea", said="I like black tea too")
        # ... the next call has a new connection.
        assert agent.remember("Ana likes black tea", said="I like black tea too")["status"] == "created"
    finally:
        agent.close()
