"""Installing the control plane and tenants from Python.

Python runs exactly the SQL that ``pgrecall sql`` prints for psql, so the two
paths cannot drift apart.
"""

from __future__ import annotations

import psycopg

from . import errors, names, sources

_PREREQUISITES = """
select
  current_setting('server_version_num')::int as server_version_num,
  (select coalesce(installed_version, default_version) from pg_available_extensions where name = 'vector') as vector,
  exists (select 1 from pg_available_extensions where name = 'btree_gist') as btree_gist,
  getdatabaseencoding() as encoding
"""


def check_prerequisites(conn: psycopg.Connection) -> None:
    """Fail fast, naming what is missing, when the server cannot host pgrecall."""
    row = conn.execute(_PREREQUISITES).fetchone()
    assert row is not None
    version_num, vector, btree_gist, encoding = row
    if encoding != "UTF8":
        raise errors.MissingPrerequisite(
            f"pgrecall needs a UTF8 database; this one is {encoding}",
            hint="Create the database with ENCODING 'UTF8' (e.g. createdb -E UTF8 -T template0 ...).")
    missing = []
    if version_num < 150000:
        missing.append(f"PostgreSQL >= 15 (this server is {version_num // 10000})")
    if vector is None:
        missing.append("the pgvector extension (vector) >= 0.8")
    elif tuple(int(p) for p in vector.split("-")[0].split(".")[:2]) < (0, 8):
        missing.append(f"pgvector >= 0.8 (found {vector})")
    if not btree_gist:
        missing.append("the btree_gist extension")
    if missing:
        raise errors.MissingPrerequisite(
            "this PostgreSQL server cannot host pgrecall: missing " + ", ".join(missing),
            hint="Install pgvector 0.8+ (https://github.com/pgvector/pgvector#installation) and the "
            "contrib package with btree_gist (Debian: postgresql-NN-pgvector and postgresql-contrib), "
            "or unset PGRECALL_DSN to use the embedded server.",
        )


def install(conn: psycopg.Connection, tenants: list[str] | tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """Install or upgrade the control plane and the named tenants in one transaction.

    Returns what was applied, as (kind, name) pairs.
    """
    tenants = [names.check_tenant_name(name) for name in tenants]
    check_prerequisites(conn)
    if on_citus(conn):
        return _install_on_citus(conn, tenants)
    return _apply(conn, sources.install_sql(tenants))


def on_citus(conn: psycopg.Connection) -> bool:
    """A Citus coordinator: tenants become distributed schemas (docs/scale-out.md)."""
    return conn.execute("select exists (select 1 from pg_extension where extname = 'citus')").fetchone() == (True,)


def _install_on_citus(conn: psycopg.Connection, tenants: list[str]) -> list[tuple[str, str]]:
    """The control plane, then each new tenant in three transactions, as Citus needs them.

    1. its roles, committed: Citus carries the owner's DDL to the workers over connections it
       opens as the owner; 2. the tenant, created on the coordinator with DDL propagation off
       (one user per placement and transaction, which the installer and the owner would break);
    3. pgrecall.distribute_tenant: the schema moves to a worker, its functions to every node.
    An existing tenant is upgraded in one transaction, as on one server; if it is distributed, the
    functions the upgrade made are then created on every node (distribute_tenant, idempotent).
    """
    if not conn.autocommit:
        conn.commit()  # each step below must commit on its own, not as a savepoint of the caller's
    applied = _apply(conn, sources.install_sql([]))
    for name in tenants:
        exists = conn.execute("select exists (select 1 from pgrecall.tenant where name = %s)", (name,)).fetchone()
        if not conn.autocommit:
            conn.commit()
        if exists == (True,):
            literal = sources.sql_literal(name)
            applied += _apply(conn, f"select * from pgrecall.upgrade_tenant({literal});")
            # functions the upgrade made again (or anew) exist on the coordinator only: to every node,
            # colocated with the tenant, so that calls are delegated again
            if conn.execute("select exists (select 1 from pg_dist_schema where schemaid = to_regnamespace(%s))",
                            (name,)).fetchone() == (True,):
                if not conn.autocommit:
                    conn.commit()
                _apply(conn, f"select * from pgrecall.distribute_tenant({literal});")
            continue
        literal = sources.sql_literal(name)
        _apply(conn, f"select pgrecall.create_tenant_roles({literal});")
        _apply(conn, f"set local citus.enable_ddl_propagation = off; select pgrecall.create_tenant({literal});")
        _apply(conn, f"select * from pgrecall.distribute_tenant({literal});")
        applied.append(("tenant", name))
    return applied


def _apply(conn: psycopg.Connection, script: str) -> list[tuple[str, str]]:
    """Runs a script in one transaction; returns the (kind, name) rows it produced."""
    applied: list[tuple[str, str]] = []
    try:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute(script.encode())
            # A multi-statement string yields one result per statement.
            while True:
                if cur.description and [c.name for c in cur.description] == ["kind", "name"]:
                    applied.extend(cur.fetchall())
                if not cur.nextset():
                    break
    except psycopg.Error as exc:
        raise errors.translate(exc) from exc
    return applied
