"""Issue #51, item 5: many clients at once. 300 clients connecting together to the embedded server (whose
max_connections is PostgreSQL's default) must each either work or get a clear error naming the limit, and the
server and every connected client keep working, with nothing acknowledged lost. Behind a pooler (pgbouncer in
transaction mode, from Debian's packages) the driver works as it does directly.
"""

from __future__ import annotations

import os
import threading

import psycopg
import pytest
from bench import pooler

import pgrecall
from pgrecall import errors
from test_server_recovery import cli, home  # noqa: F401  (the fixture: an embedded server of the test's own)

CLIENTS = 300


@pytest.mark.slow
def test_three_hundred_clients_at_once_each_work_or_are_told_the_limit(home):
    cli(home, "server", "start")
    cli(home, "tenant", "create", "storm")
    cli(home, "peer", "add", "writer", "--tenant", "storm")
    app = cli(home, "server", "uri", "--tenant", "storm").stdout.strip()
    admin = cli(home, "server", "uri").stdout.strip()
    with psycopg.connect(admin) as conn:
        limit = int(conn.execute("show max_connections").fetchone()[0])
    assert limit < CLIENTS

    start = threading.Barrier(CLIENTS)
    everyone_tried = threading.Barrier(CLIENTS, timeout=240)
    acknowledged: list[tuple[int, int]] = []
    refused: list[Exception] = []
    other: list[BaseException] = []

    def client(i: int) -> None:
        start.wait()
        try:
            mem = pgrecall.connect(app, tenant="storm", principal="writer", scopes=["default"])
        except errors.ServerAtCapacity as exc:
            refused.append(exc)
            everyone_tried.wait()
            return
        except BaseException as exc:  # anything else is the finding
            other.append(exc)
            everyone_tried.wait()
            return
        try:
            acknowledged.append((i, mem.append(f"storm turn {i}", role="user", actor="writer")))
            everyone_tried.wait()  # every connected client holds its slot until all have tried
            assert mem.recall(f"storm turn {i}", mode="lexical", limit=3).items is not None
            acknowledged.append((i, mem.append(f"storm turn {i} again", role="user", actor="writer")))
        except BaseException as exc:
            other.append(exc)
        finally:
            mem.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a client hung"
    assert other == [], other[:3]
    assert refused, f"all {CLIENTS} clients connected: the storm did not reach the limit"
    for exc in refused:
        assert "every connection slot is taken" in str(exc) and "max_connections" in str(exc), str(exc)
        assert "pooler" in (exc.hint or "")
    connected = CLIENTS - len(refused)
    assert len(acknowledged) == 2 * connected

    # the server still answers, and every acknowledged turn is in the log with its words, offsets contiguous
    with pgrecall.connect(app, tenant="storm", principal="writer", scopes=["default"]) as mem:
        after = mem.append("after the storm", role="user", actor="writer")
    with psycopg.connect(admin) as conn:
        logged = dict(conn.execute("select log_offset, body from storm.observation").fetchall())
    for i, offset in acknowledged:
        assert logged[offset] in (f"storm turn {i}", f"storm turn {i} again")
    assert sorted(logged) == list(range(1, after + 1))


# -- behind pgbouncer ---------------------------------------------------------------------------------------


@pytest.fixture
def pgbouncer(conninfo):
    """pgbouncer in transaction mode in front of the test's server, for acme's app role; its DSN."""
    if pooler.binary() is None:
        if os.environ.get("CI"):
            pytest.fail("pgbouncer is not installed (Debian's package pgbouncer; .ci/run installs it)")
        pytest.skip("pgbouncer is not installed (apt-get install pgbouncer)")
    try:
        with pooler.pgbouncer(conninfo.host, conninfo.port, conninfo.dbname, "pgrecall_acme_app") as dsn:
            yield dsn
    except pooler.PoolerUnavailable as exc:
        pytest.fail(str(exc))


def test_the_driver_works_through_pgbouncer_in_transaction_mode(acme, pgbouncer):
    """Eight clients through three server connections: each transaction may land on another server connection,
    so nothing the driver does may depend on the last one (no prepared statement, no session state)."""
    failures: list[BaseException] = []
    written: list[int] = []

    def client(n: int) -> None:
        try:
            with pgrecall.connect(pgbouncer, tenant="acme", principal="ana", scopes=["default"]) as mem:
                for k in range(12):  # past psycopg's default prepare threshold (5), many times over
                    word = f"pooledzq{n}x{k}w"
                    said = mem.append(f"the {word} harbour was busy", role="user", actor="ana")
                    made = mem.remember(f"Ana saw the {word} harbour", evidence=[said], purposes=["converse"])
                    assert made.created
                    written.append(made.memory_id)
                    found = mem.recall(word, mode="lexical", limit=5)
                    assert made.memory_id in [i.memory_id for i in found.items]
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert failures == [], failures[:3]
    assert len(written) == 8 * 12
    assert acme.memory_count() >= 8 * 12
