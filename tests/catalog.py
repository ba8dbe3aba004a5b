"""A comparable description of one tenant schema, read from the catalog.

Two tenants built by different paths (fresh install, step-by-step upgrade,
the psql script) must give equal snapshots. The tenant's own name is replaced
by <T> so tenants with different names can be compared.
"""

from __future__ import annotations

import re

import psycopg

_QUERIES = {
    "relations": """
        select c.relname, c.relkind, c.relpersistence, c.relacl::text,
               obj_description(c.oid, 'pg_class'), pg_get_userbyid(c.relowner)
          from pg_class c where c.relnamespace = %(s)s::regnamespace order by 1""",
    "columns": """
        select c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
               pg_get_expr(d.adbin, d.adrelid), a.attgenerated, a.attidentity, a.attacl::text
          from pg_attribute a join pg_class c on c.oid = a.attrelid
          left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
         where c.relnamespace = %(s)s::regnamespace and a.attnum > 0 and not a.attisdropped
         order by 1, 2""",
    "constraints": """
        select conrelid::regclass::text, conname, pg_get_constraintdef(oid)
          from pg_constraint where connamespace = %(s)s::regnamespace order by 1, 2""",
    "indexes": """
        select indexrelid::regclass::text, pg_get_indexdef(indexrelid)
          from pg_index i join pg_class c on c.oid = i.indexrelid
         where c.relnamespace = %(s)s::regnamespace order by 1""",
    "functions": """
        select p.proname, pg_get_function_identity_arguments(p.oid), pg_get_function_result(p.oid),
               p.prosecdef, p.provolatile, p.proconfig::text, p.prosrc, p.proacl::text,
               obj_description(p.oid, 'pg_proc'), pg_get_userbyid(p.proowner)
          from pg_proc p where p.pronamespace = %(s)s::regnamespace order by 1, 2""",
    "types": """
        select t.typname, t.typtype, array(select e.enumlabel from pg_enum e
                                            where e.enumtypid = t.oid order by e.enumsortorder)::text
          from pg_type t where t.typnamespace = %(s)s::regnamespace order by 1""",
    "triggers": """
        select tgrelid::regclass::text, tgname, pg_get_triggerdef(t.oid)
          from pg_trigger t join pg_class c on c.oid = t.tgrelid
         where c.relnamespace = %(s)s::regnamespace and not t.tgisinternal order by 1, 2""",
    "schema": """
        select nspacl::text, pg_get_userbyid(nspowner) from pg_namespace where nspname = %(s)s""",
    "default_acl": """
        select defaclobjtype, defaclacl::text from pg_default_acl
         where defaclnamespace = %(s)s::regnamespace order by 1""",
    "ledger": "select version, name, sha256 from {schema}.schema_migration order by 1",
    "function_ledger": "select file, sha256, functions::text from {schema}.function_ledger order by 1",
    "data_steps": "select name, requested_by, done_at is not null from {schema}.data_step order by 1",
}


def snapshot(conn: psycopg.Connection, tenant: str) -> dict[str, list[tuple]]:
    result = {}
    for key, query in _QUERIES.items():
        rows = conn.execute(query.format(schema=tenant), {"s": tenant}).fetchall()
        result[key] = [tuple(_normalise(v, tenant) for v in row) for row in rows]
    return result


def _normalise(value, tenant: str):
    # Whole-name matches only: tenant "fresh" must not turn "refreshed" into "re<T>ed".
    if isinstance(value, str):
        return re.sub(rf"(?<![A-Za-z0-9]){re.escape(tenant)}(?![A-Za-z0-9])", "<T>", value)
    return value
