"""A claim on an empty embedding queue answers without the lease machinery (issue #46 item 1): a worker that
drains after each batch of writes, on a connection of its own, found nothing to do there but still planned
and ran the lease statements (the session's registration, the holders read from pg_stat_activity), some 15
ms a drain. With a job queued the claim leases it as before."""

from __future__ import annotations

import psycopg
import pytest

from test_leases import queue_work

CLAIMS = [("embedding", "claim_embedding_jobs", "_lease_claim_embedding", "embedding_job"),
          ("passage_embedding", "claim_passage_embedding_jobs", "_lease_claim_passage_embedding",
           "passage_embedding_job")]


def _lease_calls(conn, lease):
    """How often this transaction called the lease function (track_functions = pl)."""
    calls = conn.execute("select pg_stat_get_xact_function_calls(%s::regprocedure)",
                         (f"acme.{lease}(text, integer)",)).fetchone()[0]
    return calls or 0


@pytest.mark.parametrize("queue, claim, lease, table", CLAIMS)
def test_a_claim_on_an_empty_queue_leases_nothing_and_runs_no_lease_statement(acme, db, superuser_dsn, queue,
                                                                              claim, lease, table):
    assert db.execute(f"select count(*) from acme.{table}").fetchone()[0] == 0
    with psycopg.connect(superuser_dsn) as su:
        su.execute("set local track_functions = 'pl'")
        assert su.execute(f"select count(*) from acme.{claim}('w1', 10)").fetchone()[0] == 0
        assert _lease_calls(su, lease) == 0
    # a bad claim is refused all the same, queue empty or not
    with psycopg.connect(superuser_dsn) as su, pytest.raises(psycopg.Error, match="claim limit"):
        su.execute(f"select count(*) from acme.{claim}('w1', 0)")
    queue_work(acme, queue)
    with psycopg.connect(superuser_dsn) as su:
        su.execute("set local track_functions = 'pl'")
        assert su.execute(f"select count(*) from acme.{claim}('w1', 10)").fetchone()[0] == 1
        assert _lease_calls(su, lease) == 1
