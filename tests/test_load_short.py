"""Issue #51, item 2: the short version of `make bench-load` (bench/load.py). Eight agents on one tenant for a few
seconds, recalling, appending and remembering, and searching messages at once: no error of any class, no client
left hanging, and nothing acknowledged lost (every appended turn in the log with its words, every memory there,
the scope's offsets without a gap)."""

from __future__ import annotations

import os

import pytest
from bench import load


@pytest.mark.slow
def test_eight_agents_for_five_seconds_get_no_error_and_lose_nothing(conninfo):
    installer = conninfo.dsn()
    app = conninfo.dsn(user=f"pgrecall_{load.TENANT}_app")
    load.setup(installer, app)
    result = load.run(installer, app, clients=8, seconds=5, mix=(70, 20, 10))
    assert result["errors"] == {} and result["hung_clients"] == 0, result["errors"]
    assert all(result["ops"][op]["count"] > 0 for op in ("recall", "append", "remember", "search")), result["ops"]
    loss = result["loss"]
    assert loss["acknowledged_appends"] > 0
    assert (loss["missing_appends"], loss["missing_memories"], loss["offsets_contiguous"]) == (0, 0, True), loss


@pytest.mark.slow
def test_eight_agents_through_pgbouncer_get_no_error_and_lose_nothing(conninfo):
    """The same load through pgbouncer in transaction mode with two server connections (what the README
    advises for many clients, and `make bench-load --pooler`): each transaction may run on either server
    connection, and still no error, nothing lost, no gap."""
    from bench import pooler

    if pooler.binary() is None:
        if os.environ.get("CI"):
            pytest.fail("pgbouncer is not installed (Debian's package pgbouncer; .ci/run installs it)")
        pytest.skip("pgbouncer is not installed (apt-get install pgbouncer)")
    installer = conninfo.dsn()
    load.setup(installer, conninfo.dsn(user=f"pgrecall_{load.TENANT}_app"))
    with pooler.pgbouncer(conninfo.host, conninfo.port, conninfo.dbname, f"pgrecall_{load.TENANT}_app",
                          pool_size=2) as app:
        result = load.run(installer, app, clients=8, seconds=5, mix=(70, 20, 10))
    assert result["errors"] == {} and result["hung_clients"] == 0, result["errors"]
    assert all(result["ops"][op]["count"] > 0 for op in ("recall", "append", "remember", "search")), result["ops"]
    loss = result["loss"]
    assert loss["acknowledged_appends"] > 0
    assert (loss["missing_appends"], loss["missing_memories"], loss["offsets_contiguous"]) == (0, 0, True), loss


@pytest.mark.slow
def test_eight_agents_whose_writes_have_a_pool_of_their_own_get_no_error_and_lose_nothing(conninfo):
    """`make bench-load --pooler 2 --write-pooler 1`: each agent's reads through one pgbouncer pool and its
    appends and remembers through another, so that a write does not wait in line behind the reads; the two
    pools' transactions interleave on the scope and still nothing is lost and the offsets have no gap."""
    from bench import pooler

    if pooler.binary() is None:
        if os.environ.get("CI"):
            pytest.fail("pgbouncer is not installed (Debian's package pgbouncer; .ci/run installs it)")
        pytest.skip("pgbouncer is not installed (apt-get install pgbouncer)")
    installer, role = conninfo.dsn(), f"pgrecall_{load.TENANT}_app"
    load.setup(installer, conninfo.dsn(user=role))
    with pooler.pgbouncer(conninfo.host, conninfo.port, conninfo.dbname, role, pool_size=2) as reads, \
            pooler.pgbouncer(conninfo.host, conninfo.port, conninfo.dbname, role, pool_size=1) as writes:
        result = load.run(installer, reads, clients=8, seconds=5, mix=(70, 20, 10), write_uri=writes)
    assert result["errors"] == {} and result["hung_clients"] == 0, result["errors"]
    assert all(result["ops"][op]["count"] > 0 for op in ("recall", "append", "remember", "search")), result["ops"]
    loss = result["loss"]
    assert loss["acknowledged_appends"] > 0
    assert (loss["missing_appends"], loss["missing_memories"], loss["offsets_contiguous"]) == (0, 0, True), loss


@pytest.mark.slow
def test_eight_pgbench_clients_on_one_scope_lose_nothing(conninfo, tmp_path):
    """bench/load_pgbench.py, the same operations with pgbench as the clients: every script pgbench counts
    as done ran without an error, the log holds at least every append it counted, the offsets have no gap."""
    from bench import load_pgbench

    installer, role = conninfo.dsn(), f"pgrecall_{load.TENANT}_app"
    load.setup(installer, conninfo.dsn(user=role))
    load_pgbench.questions(installer, role)
    logged_before = load_pgbench.logged(installer)
    result = load_pgbench.run(conninfo.dsn(user=role), clients=8, seconds=3, mix=(70, 20, 10), remember=True,
                              workdir=tmp_path)
    assert result["pgbench_rc"] == 0, result["pgbench_stderr"]
    assert all(result["ops"][op]["count"] > 0 for op in ("recall", "append", "search")), result["ops"]
    loss = load_pgbench.loss_check(installer, result["appends_counted"], logged_before)
    assert loss["offsets_contiguous"] and loss["logged_during_run"] >= loss["appends_counted"] > 0, loss
