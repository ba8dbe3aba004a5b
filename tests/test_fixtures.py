"""The fixtures every test stands on: a clone per test, acme as promised, and nothing leaking between tests."""

import textwrap
from pathlib import Path

import pytest


def test_acme_comes_with_its_scopes_and_peers(acme, db):
    assert db.execute("select name from pgrecall.list_tenants()").fetchall() == [("acme",)]
    assert db.execute("select name from acme.scope order by 1").fetchall() == [("default",), ("other",)]
    assert db.execute("select name, kind from acme.peer order by 1").fetchall() == \
        [("ana", "human"), ("ben", "human"), ("bot", "agent")]
    # the handle logs in as the app role and acts for bot over scope default
    offset = acme.append("hello", role="user")
    assert db.execute("select o.scope, p.name, current_user from acme.observation o join acme.peer p "
                      "on p.id = o.actor_id where o.log_offset = %s", (offset,)).fetchone() == \
        ("default", "bot", "pgrecall_tester")
    assert db.execute("select session_user from pg_stat_activity where pid <> pg_backend_pid() "
                      "and datname = current_database() and usename = 'pgrecall_acme_app'").fetchone() is not None


def test_without_acme_the_database_holds_the_control_plane_only(db, make_tenant):
    assert db.execute("select count(*) from pgrecall.list_tenants()").fetchone()[0] == 0
    assert db.execute("select to_regnamespace('acme')").fetchone()[0] is None
    make_tenant("acme")  # the roles may exist already (the acme template has them): they are reused
    assert db.execute("select name from pgrecall.list_tenants()").fetchall() == [("acme",)]


INNER_TESTS = '''
import psycopg


def roles(db, name):
    return db.execute("select rolcanlogin, rolconnlimit, rolconfig, rolcreatedb from pg_roles where rolname = %s",
                      (name,)).fetchone()


def test_1_drops_acme_and_alters_every_role_it_can(db, acme, make_tenant):
    acme.close()
    db.execute("select pgrecall.drop_tenant('acme')")
    db.execute("alter role pgrecall_acme_app nologin connection limit 3")
    db.execute("alter role pgrecall_acme_app set work_mem = '1MB'")
    db.execute("alter role pgrecall_acme_owner rename to pgrecall_renamed_owner")
    make_tenant("b")
    db.execute("alter role pgrecall_b_owner createdb")


def test_2_finds_acme_whole_and_b_creatable_again(db, acme, make_tenant, conninfo):
    assert [r[0] for r in db.execute("select name from acme.peer order by 1")] == ["ana", "ben", "bot"]
    acme.add_scope("third")
    assert roles(db, "pgrecall_acme_app") == (True, -1, None, False)
    assert db.execute("select nspowner::regrole::text from pg_namespace where nspname = 'acme'").fetchone()[0] == \\
        "pgrecall_acme_owner"
    make_tenant("b")  # refused (PR002) if pgrecall_b_owner still had CREATEDB
    assert roles(db, "pgrecall_b_owner") == (False, -1, None, False)


def test_3_a_plain_database_after_them(db):
    assert db.execute("select count(*) from pgrecall.tenant").fetchone()[0] == 0
    assert db.execute("select count(*) from pg_roles where rolname in ('pgrecall_b_owner', 'pgrecall_b_app')"
                      ).fetchone()[0] == 0
'''


@pytest.mark.slow
def test_what_a_test_does_to_tenants_and_roles_does_not_reach_the_next(pytester, monkeypatch):
    """Runs three tests in a session of their own (its own embedded server): the first drops acme and alters,
    renames and creates roles; the next ones see the tenant and the cluster's roles as the fixtures promise."""
    monkeypatch.delenv("PGRECALL_TEST_DSN", raising=False)  # a server of its own, not the outer session's
    pytester.makeconftest((Path(__file__).parent / "conftest.py").read_text())
    pytester.makepyfile(test_inner=textwrap.dedent(INNER_TESTS))
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
