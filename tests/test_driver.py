"""The driver: caller's connection or pool, schema checks, exception mapping."""

import psycopg
import pytest
from psycopg_pool import ConnectionPool

import pgrecall
from pgrecall import errors


def test_uses_the_callers_connection_and_transaction(acme, conninfo, db):
    with conninfo.connect(user="pgrecall_acme_app", autocommit=False) as conn:
        mem = pgrecall.connect(tenant="acme", conn=conn, principal="bot", scopes=["default"])
        off = mem.append("I like jazz", role="user", actor="ana")
        r = mem.remember("Ana likes jazz", evidence=[off], purposes=["converse"])
        assert mem.read(r.memory_id, purpose="converse").body == "Ana likes jazz"
        conn.rollback()
    assert db.execute("select count(*) from acme.memory").fetchone()[0] == 0


def test_uses_a_pool(acme, conninfo):
    with ConnectionPool(conninfo.dsn(user="pgrecall_acme_app"), min_size=1, max_size=2, open=True,
                        kwargs={"autocommit": True}) as pool:
        mem = pgrecall.connect(tenant="acme", pool=pool, principal="bot", scopes=["default"])
        off = mem.append("I like jazz", role="user", actor="ana")
        mid = mem.remember("Ana likes jazz", evidence=[off], purposes=["converse"]).memory_id
        assert mem.read(mid, purpose="converse").provenance.observations[0].offset == off


def test_a_pooled_call_runs_in_autocommit_and_the_connection_goes_back_as_lent(acme, conninfo, db):
    # A pool lends connections outside autocommit: each call would be a transaction block of its own, which
    # Citus does not delegate (docs/scale-out.md). The call runs in autocommit; what it writes is committed
    # all the same, a failed call leaves nothing, and a read-only pool keeps its blocks.
    with ConnectionPool(conninfo.dsn(user="pgrecall_acme_app"), min_size=1, max_size=1, open=True) as pool:
        mem = pgrecall.connect(tenant="acme", pool=pool, principal="bot", scopes=["default"])
        off = mem.append("I like jazz", role="user", actor="ana")
        with pytest.raises(errors.InvalidArgument):
            mem.append_many([{"body": "fine", "source_role": "user"}, {"body": "bad", "role": "user"}])
        with pool.connection() as conn:
            assert (conn.autocommit, conn.info.transaction_status) == (False, psycopg.pq.TransactionStatus.IDLE)
    assert db.execute("select array_agg(log_offset) from acme.observation").fetchone()[0] == [off]
    with ConnectionPool(conninfo.dsn(user="pgrecall_acme_app"), min_size=1, max_size=1, open=True,
                        configure=lambda conn: setattr(conn, "read_only", True)) as pool:
        mem = pgrecall.connect(tenant="acme", pool=pool, principal="bot", scopes=["default"])
        assert mem.recall("jazz", mode="lexical").items == []
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            mem.append("I like blues", role="user", actor="ana")


def test_missing_tenant_and_old_schema_fail_fast(acme, conninfo, db):
    with pytest.raises(errors.TenantNotFound):
        pgrecall.connect(conninfo.dsn(), tenant="nosuch")
    latest = db.execute("select max(version) from acme.schema_migration").fetchone()[0]
    db.execute("delete from acme.schema_migration where version = %s", (latest,))
    with pytest.raises(errors.SchemaOutOfDate) as info:
        pgrecall.connect(conninfo.dsn(user="pgrecall_acme_app"), tenant="acme")
    assert "pgrecall tenant upgrade acme" in info.value.hint


def test_hostile_tenant_names_never_reach_sql(conninfo):
    for name in ("acme; drop schema acme", "Acme", "", "a" * 49):
        with pytest.raises(errors.InvalidTenantName):
            pgrecall.connect(conninfo.dsn(), tenant=name)


def test_other_tenants_role_cannot_use_the_handle(acme, conninfo, make_tenant):
    make_tenant("bravo")
    with pytest.raises(errors.TenantNotFound):
        pgrecall.connect(conninfo.dsn(user="pgrecall_bravo_app"), tenant="acme")


def test_errors_chain_the_server_error(acme):
    with pytest.raises(errors.MemoryNotFound) as info:
        acme.read(12345, purpose="converse")
    assert isinstance(info.value.__cause__, psycopg.Error) and info.value.__cause__.sqlstate == "PR104"
    assert info.value.hint
