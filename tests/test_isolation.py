"""One tenant can never reach another's data: by roles, grants and pinned paths."""

import psycopg
import pytest

from test_sources import INLINED_HELPERS


@pytest.fixture
def two_tenants(db, make_tenant):
    make_tenant("alpha")
    make_tenant("bravo")
    db.execute("select pgrecall.set_tenant_setting('bravo', 'rrf_k', '77')")
    return "alpha", "bravo"


def _denied(conn, sql):
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(sql)


def test_other_tenants_app_role_is_denied_schema_tables_and_functions(two_tenants, conninfo):
    with conninfo.connect(user="pgrecall_bravo_app") as bravo:
        _denied(bravo, "select * from alpha.setting")
        _denied(bravo, "select * from alpha.schema_migration")
        _denied(bravo, "select * from alpha.schema_info()")
        _denied(bravo, "select * from alpha.settings()")
        _denied(bravo, "select * from pgrecall.tenant")
        _denied(bravo, "select * from pgrecall.list_tenants()")
        # its own tenant only through functions
        _denied(bravo, "select * from bravo.setting")
        assert bravo.execute("select tenant from bravo.schema_info()").fetchone()[0] == "bravo"


def test_owner_role_cannot_reach_another_tenant(two_tenants, db):
    db.execute("set role pgrecall_bravo_owner")
    try:
        _denied(db, "select * from alpha.setting")
        _denied(db, "select * from alpha.settings()")
    finally:
        db.execute("reset role")


def test_functions_return_only_their_own_tenants_rows(two_tenants, conninfo):
    with conninfo.connect(user="pgrecall_alpha_app") as alpha, conninfo.connect(user="pgrecall_bravo_app") as bravo:
        a = dict((k, v) for k, v, _ in alpha.execute("select * from alpha.settings()"))
        b = dict((k, v) for k, v, _ in bravo.execute("select * from bravo.settings()"))
    assert a["rrf_k"] == 60 and b["rrf_k"] == 77


def test_login_roles_hold_execute_on_their_duties_functions_and_nothing_else(two_tenants, db):
    duties = dict(db.execute("select function_name, duties from pgrecall.function_duty").fetchall())
    maintain = db.info.server_version >= 170000
    for tenant in two_tenants:
        for duty in ("app", "worker", "admin"):
            login = f"pgrecall_{tenant}_{duty}"
            tables = db.execute(
                "select c.oid::regclass::text from pg_class c where c.relnamespace = %s::regnamespace and c.relkind in ('r','p','v','m','S')",
                (tenant,),
            ).fetchall()
            assert tables
            for (table,) in tables:
                for priv in ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER"):
                    if table.endswith("_seq") and priv not in ("SELECT", "UPDATE"):
                        continue
                    assert not db.execute("select has_table_privilege(%s, %s, %s)", (login, table, priv)).fetchone()[0], (login, table, priv)
                if maintain and not table.endswith("_seq"):
                    # VACUUM after an erasure (pgrecall erase --vacuum) is the admin's; it reads and writes no row
                    can = db.execute("select has_table_privilege(%s, %s, 'MAINTAIN')", (login, table)).fetchone()[0]
                    assert can == (duty == "admin"), (login, table)
            functions = db.execute(
                "select p.oid::regprocedure::text, p.proname, p.prosecdef, array_to_string(p.proconfig, ';') "
                "from pg_proc p where p.pronamespace = %s::regnamespace",
                (tenant,),
            ).fetchall()
            assert functions
            for signature, name, secdef, config in functions:
                if name in INLINED_HELPERS:
                    # Planner-inlined SQL helpers may not be definer or pin a path; they
                    # qualify their tables and only the tenant's own functions call them.
                    assert not secdef and not config and name.startswith("_")
                else:
                    assert secdef, f"{signature} is not SECURITY DEFINER"
                    assert config == f"search_path=pg_catalog, {tenant}, public, pg_temp", (signature, config)
                can = db.execute("select has_function_privilege(%s, %s, 'EXECUTE')", (login, signature)).fetchone()[0]
                assert can == (not name.startswith("_") and duty in duties[name]), (login, signature)
                assert not db.execute("select has_function_privilege('public', %s, 'EXECUTE')", (signature,)).fetchone()[0]
            other = [t for t in two_tenants if t != tenant][0]
            assert not db.execute("select has_schema_privilege(%s, %s, 'USAGE')", (login, other)).fetchone()[0]


def test_no_tenant_id_column_anywhere(two_tenants, db):
    rows = db.execute("select table_schema, table_name from information_schema.columns where column_name = 'tenant_id'").fetchall()
    assert rows == []
