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
