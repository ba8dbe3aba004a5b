"""A handle outlives its connection. The server restarts, fails over or ends a session (an administrator, an idle
timeout): a handle that opened its own connection (``pgrecall.connect`` without ``conn=`` or ``pool=``) opens a new
one for its next call, without an error when the connection was closed while the handle sat idle; a call that is
cut off midway is reported as ``errors.ConnectionLost`` (a ``ConnectionError``, the server's error its cause), never
a bare psycopg error, and the call after it works. A handle on a pool borrows past the pool's connections the
server closed while they waited (a restart closes them all)."""

from __future__ import annotations

import asyncio
import threading
import time

import psycopg
import pytest

import pgrecall
from pgrecall import errors
from test_server_recovery import cli, home  # noqa: F401  (the fixture: an embedded server of the test's own)


def _backends(superuser_dsn: str, state: str) -> list[int]:
    """The pids of acme's app-role sessions in this test's database in ``state`` (idle, active)."""
    with psycopg.connect(superuser_dsn, autocommit=True) as conn:
        return [r[0] for r in conn.execute(
            "select pid from pg_stat_activity where usename = 'pgrecall_acme_app' and datname = current_database()"
            " and state = %s and pid <> pg_backend_pid()", (state,)).fetchall()]


def _end_sessions(superuser_dsn: str, pids: list[int]) -> None:
    with psycopg.connect(superuser_dsn, autocommit=True) as conn:
        for pid in pids:
            conn.execute("select pg_terminate_backend(%s, 10000)", (pid,))


def test_a_handle_whose_idle_session_was_ended_answers_its_next_call(acme, superuser_dsn):
    said = acme.append("Ana moved to Porto in May", role="user", actor="ana")
    made = acme.remember("Ana lives in Porto", evidence=[said], purposes=["converse"])
    pids = _backends(superuser_dsn, "idle")
    assert pids, "the handle's session is idle between calls"
    _end_sessions(superuser_dsn, pids)

    found = acme.recall("Porto", mode="lexical")  # no error: the handle saw its session was gone, and reconnected
    assert [i.memory_id for i in found.items] == [made.memory_id]
    assert acme.append("and she likes it there", role="user", actor="ana") == said + 1


def test_a_call_cut_off_midway_is_connection_lost_and_the_next_call_works(acme, superuser_dsn):
    said = acme.append("Ben plays the cello", role="user", actor="ben")
    outcome: dict[str, BaseException | bool] = {}

    def wait() -> None:
        try:  # the log will not reach this offset: the call waits in the server until its session is ended
            outcome["value"] = acme.wait_for(said + 1000, projection="log", timeout=30)
        except BaseException as exc:
            outcome["error"] = exc

    waiter = threading.Thread(target=wait)
    waiter.start()
    deadline = time.monotonic() + 20
    while not (pids := _backends(superuser_dsn, "active")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pids, "wait_for is running in the server"
    _end_sessions(superuser_dsn, pids)
    waiter.join(timeout=30)

    error = outcome.get("error")
    assert isinstance(error, errors.ConnectionLost), repr(outcome)
    assert isinstance(error, ConnectionError) and isinstance(error.__cause__, psycopg.OperationalError)
    assert "connection to the server was lost" in str(error) and "reconnects" in (error.hint or "")
    assert acme.append("and the piano", role="user", actor="ben") == said + 1  # the next call reconnects


def test_an_async_handle_whose_idle_session_was_ended_answers_its_next_call(acme, conninfo, superuser_dsn):
    async def story() -> None:
        mem = await pgrecall.connect_async(conninfo.dsn(user="pgrecall_acme_app"), tenant="acme", principal="bot",
                                           scopes=["default"])
        async with mem:
            said = await mem.append("Ana bought a red bicycle", role="user", actor="ana")
            await asyncio.to_thread(lambda: _end_sessions(superuser_dsn, _backends(superuser_dsn, "idle")))
            assert await mem.append("and a helmet", role="user", actor="ana") == said + 1

    acme.close()  # only the async handle's session is idle, and ended
    asyncio.run(story())


def test_a_handle_keeps_answering_after_the_server_restarts(home):
    cli(home, "server", "start")
    cli(home, "tenant", "create", "again")
    cli(home, "peer", "add", "ana", "--tenant", "again")
    dsn = cli(home, "server", "uri", "--tenant", "again").stdout.strip()
    with pgrecall.connect(dsn, tenant="again", principal="ana", scopes=["default"]) as mem:
        said = mem.append("I keep bees on the roof", role="user", actor="ana")
        made = mem.remember("Ana keeps bees", evidence=[said], purposes=["converse"])

        cli(home, "server", "stop")
        cli(home, "server", "start")

        assert [i.memory_id for i in mem.recall("bees", mode="lexical").items] == [made.memory_id]
        assert mem.append("three hives now", role="user", actor="ana") == said + 1

        cli(home, "server", "stop")  # down: the call says so, as a pgrecall error, and the next one tries again
        with pytest.raises(errors.ConnectionLost) as lost:
            mem.recall("bees", mode="lexical")
        assert "could not be opened" in str(lost.value) and "pgrecall server start" in (lost.value.hint or "")
        cli(home, "server", "start")
        assert [i.memory_id for i in mem.recall("bees", mode="lexical").items] == [made.memory_id]


def test_a_pool_whose_idle_connections_were_all_closed_lends_working_ones(acme, conninfo, superuser_dsn):
    from psycopg_pool import ConnectionPool

    acme.close()  # only the pool's sessions are acme's app role's
    with ConnectionPool(conninfo.dsn(user="pgrecall_acme_app"), min_size=3, max_size=3, open=True,
                        configure=pgrecall.configure) as pool:
        pool.wait()
        mem = pgrecall.connect(tenant="acme", principal="bot", scopes=["default"], pool=pool)
        said = mem.append("Ben fixed the garden gate", role="user", actor="ben")
        made = mem.remember("Ben fixed the gate", evidence=[said], purposes=["converse"])
        pids = _backends(superuser_dsn, "idle")
        assert len(pids) == 3, "the pool's three connections wait, idle"
        _end_sessions(superuser_dsn, pids)  # as a server restart does to every one of them

        # each call borrows a connection; the closed ones are given back unused and replaced
        assert [i.memory_id for i in mem.recall("gate", mode="lexical").items] == [made.memory_id]
        assert mem.read(made.memory_id, purpose="converse").body == "Ben fixed the gate"
        assert mem.append("and oiled it", role="user", actor="ben") == said + 1


def test_an_async_pool_whose_idle_connections_were_all_closed_lends_working_ones(acme, conninfo, superuser_dsn):
    from psycopg_pool import AsyncConnectionPool

    async def story() -> None:
        async with AsyncConnectionPool(conninfo.dsn(user="pgrecall_acme_app"), min_size=2, max_size=2, open=False,
                                       configure=pgrecall.configure_async) as pool:
            await pool.wait()
            mem = await pgrecall.connect_async(tenant="acme", principal="bot", scopes=["default"], pool=pool)
            said = await mem.append("Ana painted the door blue", role="user", actor="ana")
            pids = await asyncio.to_thread(_backends, superuser_dsn, "idle")
            assert len(pids) == 2
            await asyncio.to_thread(_end_sessions, superuser_dsn, pids)
            assert await mem.append("then green", role="user", actor="ana") == said + 1

    acme.close()
    asyncio.run(story())
