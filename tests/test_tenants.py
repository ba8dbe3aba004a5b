"""Tenants: created, listed and dropped by SQL functions; hostile names change nothing."""

import psycopg
import pytest

from pgrecall import errors


def call(conn, sql, *params):
    try:
        return conn.execute(sql, params).fetchall()
    except psycopg.Error as exc:
        raise errors.translate(exc) from exc


def footprint(conn):
    """Everything a tenant operation could create or drop, cluster roles included."""
    return (
        conn.execute("select array_agg(nspname order by nspname) from pg_namespace").fetchone()[0],
        conn.execute("select array_agg(rolname order by rolname) from pg_roles").fetchone()[0],
        conn.execute("select array_agg(name order by name) from pgrecall.tenant").fetchone()[0],
        conn.execute("select count(*) from pg_class").fetchone()[0],
    )


def test_create_list_drop(db):
    call(db, "select pgrecall.create_tenant('acme')")
    rows = call(db, "select name, owner_role, app_role, schema_version, latest_version from pgrecall.list_tenants()")
    assert rows == [("acme", "pgrecall_acme_owner", "pgrecall_acme_app", rows[0][4], rows[0][4])]
    owner = db.execute(
        "select rolcanlogin, rolsuper, rolcreaterole, rolcreatedb from pg_roles where rolname = 'pgrecall_acme_owner'"
    ).fetchone()
    app = db.execute(
        "select rolcanlogin, rolsuper, rolcreaterole, rolcreatedb from pg_roles where rolname = 'pgrecall_acme_app'"
    ).fetchone()
    assert owner == (False, False, False, False)
    assert app == (True, False, False, False)
    assert db.execute("select nspowner::regrole::text from pg_namespace where nspname = 'acme'").fetchone()[0] == "pgrecall_acme_owner"

    call(db, "select pgrecall.drop_tenant('acme')")
    assert call(db, "select * from pgrecall.list_tenants()") == []
    assert db.execute("select to_regnamespace('acme')").fetchone()[0] is None


def test_create_twice_is_refused(db, make_tenant):
    make_tenant("acme")
    before = footprint(db)
    with pytest.raises(errors.TenantExists):
        call(db, "select pgrecall.create_tenant('acme')")
    assert footprint(db) == before


def test_an_existing_schema_is_never_adopted(db):
    db.execute("create schema orders")
    before = footprint(db)
    with pytest.raises(errors.TenantExists):
        call(db, "select pgrecall.create_tenant('orders')")
    assert footprint(db) == before


def test_drop_unknown_tenant(db):
    with pytest.raises(errors.TenantNotFound):
        call(db, "select pgrecall.drop_tenant('ghost')")


def test_longest_name_fits_role_names(db):
    name = "t" * 47
    call(db, "select pgrecall.create_tenant(%s)", name)
    roles = call(db, "select owner_role, app_role, worker_role, admin_role from pgrecall.tenant where name = %s",
                 name)[0]
    # not truncated at 63 bytes
    assert roles == tuple(f"pgrecall_{name}_{duty}" for duty in ("owner", "app", "worker", "admin"))
    assert all(len(r.encode()) <= 63 for r in roles)
    call(db, "select pgrecall.drop_tenant(%s)", name)
    with pytest.raises(errors.InvalidTenantName):  # pgrecall_<48>_worker would be 64 bytes
        call(db, "select pgrecall.create_tenant(%s)", "t" * 48)


HOSTILE_NAMES = [
    "a;drop schema b",
    "b; drop schema b cascade; --",
    "a'b",
    'a"b',
    "acme\"; drop schema b; --",
    "\uff41cme",          # fullwidth a
    "\u0430cme",          # Cyrillic a
    "acm\u0435",          # Cyrillic e
    "caf\u00e9",
    "x" * 49,
    "y" * 64,
    "pg_toast",
    "pg_catalog",
    "pg_anything",
    "",
    "1abc",
    "_acme",
    "Acme",
    "ACME",
    "public",
    "information_schema",
    "pgrecall",
    "pgrecall_ext",
    "select",
    "user",
    "a b",
    "a-b",
    "a\nb",
    "acme$",
    " acme",
    "acme ",
    None,
]


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=repr)
def test_hostile_names_are_rejected_with_nothing_created_or_dropped(db, make_tenant, name):
    make_tenant("b")  # a victim the injections aim at
    before = footprint(db)
    for fn in ("create_tenant", "drop_tenant", "install_tenant", "upgrade_tenant", "tenant_settings"):
        with pytest.raises(errors.InvalidTenantName):
            call(db, f"select * from pgrecall.{fn}(%s)", name)
    assert footprint(db) == before
    assert call(db, "select name from pgrecall.list_tenants()") == [("b",)]


def test_rejection_names_the_rule(db):
    with pytest.raises(errors.InvalidTenantName) as info:
        call(db, "select pgrecall.create_tenant('pg_toast')")
    assert "pg_" in str(info.value) and info.value.hint


def test_settings_are_per_tenant_and_validated(db, make_tenant):
    make_tenant("acme")
    make_tenant("beta")
    call(db, "select pgrecall.set_tenant_setting('beta', 'rrf_k', '99')")
    settings = dict((k, v) for k, v, _ in call(db, "select * from pgrecall.tenant_settings('acme')"))
    assert settings["rrf_k"] == 60 and settings["dense_floor"] == 0.3 and settings["default_mode"] == "hybrid"
    assert dict((k, v) for k, v, _ in call(db, "select * from pgrecall.tenant_settings('beta')"))["rrf_k"] == 99
    for key, value in [("no_such", "1"), ("rrf_k", '"sixty"'), ("rrf_k", "-1"), ("default_mode", '"fuzzy"'),
                       ("dense_floor", "2"), ("expiry_gate", "1"), ("walk_depth", "2.5"),
                       ("max_memory_bytes", "-1"), ("embedding_input_version", "3"),
                       ("embedding_model", '"other-model"'), ("arm_candidates", "0")]:
        with pytest.raises(errors.InvalidSetting):
            call(db, "select pgrecall.set_tenant_setting('acme', %s, %s::jsonb)", key, value)
    assert dict((k, v) for k, v, _ in call(db, "select * from pgrecall.tenant_settings('acme')")) == settings
