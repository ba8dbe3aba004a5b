"""Issue #51, finding 4: PostgreSQL's defaults gave a tenant's login roles more than they need. Another tenant's
app role could create temporary tables and functions (TEMPORARY, which every role holds through PUBLIC) and
connect to the embedded server's `postgres` database. An install or upgrade now takes TEMPORARY from PUBLIC
on the tenant's database, and `pgrecall server start` closes the embedded server's other databases.
"""

from __future__ import annotations

import psycopg
import pytest

from test_server_recovery import cli, home  # noqa: F401  (the fixture: a server of the test's own)

LOGINS = ("app", "worker", "admin")


def refused_temporary_objects(dsn: str) -> list[str]:
    """What a login role tried and was refused, as SQLSTATEs: a temporary table, a function in pg_temp."""
    codes = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        for attempt in ("create temporary table scratch (x int)",
                        "create function pg_temp.probe() returns int language sql as 'select 1'"):
            try:
                conn.execute(attempt)
            except psycopg.errors.InsufficientPrivilege:
                codes.append("42501")
    return codes


def test_a_tenants_login_roles_cannot_create_temporary_objects(db, make_tenant, conninfo):
    make_tenant("t51")
    for login in LOGINS:
        role = f"pgrecall_t51_{login}"
        assert not db.execute("select has_database_privilege(%s, current_database(), 'TEMPORARY')",
                              (role,)).fetchone()[0], role
        assert refused_temporary_objects(conninfo.dsn(user=role)) == ["42501", "42501"], role
    # the database's owner (the installer here) keeps what it had
    assert db.execute("select has_database_privilege(current_user, current_database(), 'TEMPORARY')").fetchone()[0]
    db.execute("create temporary table installer_scratch (x int)")


def test_an_upgrade_takes_back_temporary_when_public_was_given_it_again(db, make_tenant, conninfo):
    make_tenant("t51")
    db.execute(db.execute("select format('grant temporary on database %I to public', current_database())")
               .fetchone()[0])
    assert db.execute("select has_database_privilege('pgrecall_t51_app', current_database(), 'TEMPORARY')").fetchone()[0]
    db.execute("select * from pgrecall.upgrade_tenant('t51')")
    assert not db.execute("select has_database_privilege('pgrecall_t51_app', current_database(), 'TEMPORARY')"
                          ).fetchone()[0]
    assert refused_temporary_objects(conninfo.dsn(user="pgrecall_t51_worker")) == ["42501", "42501"]


@pytest.mark.slow
def test_the_embedded_servers_other_databases_are_closed_to_tenant_roles(home):
    cli(home, "server", "start")
    cli(home, "tenant", "create", "lock")
    app = cli(home, "server", "uri", "--tenant", "lock").stdout.strip()
    params = psycopg.conninfo.conninfo_to_dict(app)
    for database in ("postgres", "template1"):
        with pytest.raises(psycopg.OperationalError, match=f'permission denied for database "{database}"'):
            psycopg.connect(psycopg.conninfo.make_conninfo(app, dbname=database), connect_timeout=10).close()
    assert params["dbname"] == "pgrecall"
    assert refused_temporary_objects(app) == ["42501", "42501"]
    with psycopg.connect(app, autocommit=True) as conn:  # its own database still answers
        assert conn.execute("select current_user").fetchone()[0] == "pgrecall_lock_app"
    # a second start (the settings already written) changes nothing of that
    cli(home, "server", "start")
    with pytest.raises(psycopg.OperationalError, match="permission denied"):
        psycopg.connect(psycopg.conninfo.make_conninfo(app, dbname="postgres"), connect_timeout=10).close()
