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
    applied: list[tuple[str, str]] = []
    try:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute(sources.install_sql(tenants).encode())
            # A multi-statement string yields one result per statement.
            while True:
                if cur.description and [c.name for c in cur.description] == ["kind", "name"]:
                    applied.extend(cur.fetchall())
                if not cur.nextset():
                    break
    except psycopg.Error as exc:
        raise errors.translate(exc) from exc
    return applied
