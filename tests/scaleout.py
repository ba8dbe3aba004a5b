"""Checks an installed tenant against what Citus schema-based sharding requires of a distributed
schema (docs/scale-out.md says why each rule exists and where Citus documents it).

With ``citus.enable_schema_based_sharding`` (or ``citus_schema_distribute``) each tenant schema
becomes one colocation group of single-shard tables placed on one node. That holds only if
everything the tenant's objects reach lives in the same schema, in pg_catalog, or in the
extensions (which Citus installs on every node):

* foreign keys:       only between tables of the tenant's own schema, and none into it from
                      elsewhere (Citus refuses both; a reference table would be allowed, pgrecall
                      has none);
* inheritance:        none, except declarative partitions whose parent is in the same schema;
* table kinds:        no foreign tables; no object owned by an extension;
* dependencies:       nothing a tenant object depends on (column types, defaults, sequences,
                      index operator classes, views' tables, triggers' functions, constraints)
                      lives in another schema, and nothing in another schema depends on the tenant;
* sequences:          bigint, each owned by a column of a tenant table (Citus gives every node its
                      own range of a bigint sequence; smaller ones cannot be split);
* function bodies:    a schema-qualified name names the tenant, pg_catalog or an extension's own
                      object; search_path pins only those (and pg_temp);
* SECURITY DEFINER:   owned by the tenant's owner role, whose rights are the tenant's alone;
* triggers:           a trigger function runs where the row's shard lives, so it must not run DDL
                      (Citus creates a distributed schema's tables from the coordinator only);
* NOTIFY channels:    no function spells a channel name (every role reads pg_proc.prosrc): they
                      notify through _notify(), which reads the tenant's secret name from its table;
* advisory locks:     none (they are node-local, and any role can take a key it sees in pg_locks);
                      REVIEWED_ADVISORY would list a function that had to take one;
* SQL functions:      none with parameters reads a tenant table (Citus cannot plan a statement on
                      a distributed table inside an SQL function with parameters, inlined or not:
                      "could not create distributed plan", or the shell table read as empty); the
                      few sets kept for psql (SQL_SETS) are called by no tenant function;
* DO UPDATE SET:      no function that is not immutable in it (Citus refuses it on a distributed
                      table): the value goes in the inserted row and is taken from excluded;
* UPDATE:             no volatile function (Citus refuses it on a distributed table): the value
                      is taken into a variable first; no array subscript in its SET (Citus 14 crashes
                      the backend planning one): the values are joined by key from unnest(...).

KNOWN lists what the current schema still breaks, each with the change it needs before a tenant
is distributed (docs/scale-out.md, "Before distributing"). Anything else fails.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import psycopg

EXTENSIONS = ("vector", "btree_gist", "pg_trgm")

# SQL sets over one table kept for psql and the tests on one server (the rule they share is an
# inlined predicate that reads no table, which the tenant's functions call instead).
SQL_SETS = frozenset({"_eligible_memories", "_eligible_facts", "_eligible_observations", "_passages_in"})

# Functions that take advisory locks, reviewed for a sharded deployment (docs/scale-out.md): none.
# Writers serialise on row locks of the tenant's lock_stripe (_lock), which hold cluster-wide, and
# a lease names the backend that holds it (_lease_session), checked in pg_stat_activity of the
# node where the claim runs.
REVIEWED_ADVISORY: set[str] = set()

# (rule, object) pairs the current schema still breaks, and what must change first.
KNOWN: dict[tuple[str, str], str] = {}

# Control-plane functions a tenant function may call, each guarded by to_regprocedure (a worker of a
# distributed tenant has no control plane): (calling function, control function), and why.
CONTROL_CALLS: dict[tuple[str, str], str] = {
    ("_complete_erasure", "record_erasure"):
        "an erasure records itself in the server's ledger; erase() is never delegated, so it runs on the "
        "coordinator, where the control plane is; a delegated expire() finds none on the worker and records "
        "nothing (docs/scale-out.md)",
}


@dataclass(frozen=True)
class Violation:
    rule: str
    obj: str
    detail: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.obj}: {self.detail}"


# Every object with a namespace, keyed (class, oid), with the schema it lives in (triggers, rules,
# column defaults and policies live in their table's schema).
_OBJECTS = """
select 'pg_class'::regclass::oid as classid, c.oid as objid, c.relnamespace as nsp from pg_class c
union all select 'pg_proc'::regclass, p.oid, p.pronamespace from pg_proc p
union all select 'pg_type'::regclass, t.oid, t.typnamespace from pg_type t
union all select 'pg_constraint'::regclass, k.oid, k.connamespace from pg_constraint k
union all select 'pg_operator'::regclass, o.oid, o.oprnamespace from pg_operator o
union all select 'pg_opclass'::regclass, o.oid, o.opcnamespace from pg_opclass o
union all select 'pg_opfamily'::regclass, o.oid, o.opfnamespace from pg_opfamily o
union all select 'pg_collation'::regclass, o.oid, o.collnamespace from pg_collation o
union all select 'pg_ts_config'::regclass, o.oid, o.cfgnamespace from pg_ts_config o
union all select 'pg_statistic_ext'::regclass, o.oid, o.stxnamespace from pg_statistic_ext o
union all select 'pg_trigger'::regclass, g.oid, c.relnamespace from pg_trigger g join pg_class c on c.oid = g.tgrelid
union all select 'pg_rewrite'::regclass, r.oid, c.relnamespace from pg_rewrite r join pg_class c on c.oid = r.ev_class
union all select 'pg_attrdef'::regclass, a.oid, c.relnamespace from pg_attrdef a join pg_class c on c.oid = a.adrelid
union all select 'pg_policy'::regclass, p.oid, c.relnamespace from pg_policy p join pg_class c on c.oid = p.polrelid
"""


def check(conn: psycopg.Connection, tenant: str) -> list[Violation]:
    """Every rule's violations for this installed tenant, KNOWN ones left out."""
    found = [v for v in _all(conn, tenant) if (v.rule, v.obj) not in KNOWN]
    return sorted(set(found), key=str)


def known(conn: psycopg.Connection, tenant: str) -> list[Violation]:
    """The KNOWN violations this tenant still has (a fixed one should leave KNOWN)."""
    return sorted({v for v in _all(conn, tenant) if (v.rule, v.obj) in KNOWN}, key=str)


def _all(conn: psycopg.Connection, tenant: str) -> list[Violation]:
    q = lambda sql, *args: conn.execute(sql, args).fetchall()
    out: list[Violation] = []
    ext_schemas = {r[0] for r in q("select n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace "
                                   "where e.extname = any (%s)", list(EXTENSIONS))}
    allowed = {tenant, "pg_catalog"} | ext_schemas
    ext_member_names = {(r[0], r[1]) for r in q(
        "select n.nspname, x.name from pg_depend d cross join lateral ("
        "  select p.pronamespace as nsp, p.proname as name from pg_proc p "
        "   where d.classid = 'pg_proc'::regclass and p.oid = d.objid "
        "  union all select t.typnamespace, t.typname from pg_type t where d.classid = 'pg_type'::regclass and t.oid = d.objid "
        "  union all select c.relnamespace, c.relname from pg_class c where d.classid = 'pg_class'::regclass and c.oid = d.objid "
        "  union all select o.oprnamespace, o.oprname from pg_operator o "
        "   where d.classid = 'pg_operator'::regclass and o.oid = d.objid "
        "  union all select o.opcnamespace, o.opcname from pg_opclass o "
        "   where d.classid = 'pg_opclass'::regclass and o.oid = d.objid) x "
        "join pg_namespace n on n.oid = x.nsp where d.deptype = 'e'")}
    schemas = {r[0] for r in q("select nspname from pg_namespace")}

    # Foreign keys: same schema only, both ways.
    for name, table, target, src, dst in q(
            "select k.conname, k.conrelid::regclass::text, k.confrelid::regclass::text, cn.nspname, fn.nspname "
            "from pg_constraint k join pg_class r on r.oid = k.conrelid join pg_namespace cn on cn.oid = r.relnamespace "
            "join pg_class f on f.oid = k.confrelid join pg_namespace fn on fn.oid = f.relnamespace "
            "where k.contype = 'f' and %s in (cn.nspname, fn.nspname) and cn.nspname <> fn.nspname", tenant):
        direction = "out of" if src == tenant else "into"
        out.append(Violation("foreign key", f"{table}.{name}", f"references {target}: a foreign key {direction} the "
                             "tenant's schema (Citus: only within one distributed schema)"))

    # Inheritance: only partitions, in their parent's schema.
    for child, parent, is_partition, cs, ps in q(
            "select c.oid::regclass::text, p.oid::regclass::text, c.relispartition, cn.nspname, pn.nspname "
            "from pg_inherits i join pg_class c on c.oid = i.inhrelid join pg_class p on p.oid = i.inhparent "
            "join pg_namespace cn on cn.oid = c.relnamespace join pg_namespace pn on pn.oid = p.relnamespace "
            "where %s in (cn.nspname, pn.nspname)", tenant):
        if not is_partition:
            out.append(Violation("inheritance", child, f"inherits {parent} (Citus: tables in a distributed schema "
                                 "cannot inherit or be inherited)"))
        elif cs != ps:
            out.append(Violation("partition", child, f"partition of {parent} in another schema (Citus: parent "
                                 "and partition must share the distributed schema)"))

    for (name,) in q("select relname from pg_class where relnamespace = %s::regnamespace and relkind = 'f'", tenant):
        out.append(Violation("foreign table", name, "a distributed schema cannot hold foreign tables"))
    for (name,) in q(f"with o as ({_OBJECTS}) select pg_describe_object(d.classid, d.objid, d.objsubid) "
                     "from pg_depend d join o on o.classid = d.classid and o.objid = d.objid "
                     "where d.deptype = 'e' and o.nsp = %s::regnamespace", tenant):
        out.append(Violation("extension member", name, "an extension's object inside the tenant's schema"))

    # Sequences: bigint, owned by a tenant table's column.
    for name, typ, owner_ns in q(
            "select c.relname, s.seqtypid::regtype::text, "
            "       (select n.nspname from pg_depend d join pg_class t on t.oid = d.refobjid "
            "          join pg_namespace n on n.oid = t.relnamespace "
            "         where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.refclassid = 'pg_class'::regclass "
            "           and d.deptype in ('a', 'i') limit 1) "
            "from pg_sequence s join pg_class c on c.oid = s.seqrelid where c.relnamespace = %s::regnamespace", tenant):
        if typ != "bigint":
            out.append(Violation("sequence", name, f"is {typ}: Citus splits only bigint sequences into per-node ranges"))
        if owner_ns != tenant:
            out.append(Violation("sequence", name, "is not owned by a column of a tenant table"))

    # Dependencies, both ways.
    for dependent, referenced, ref_ns in q(
            f"with o as ({_OBJECTS}), t as (select * from o where nsp = %s::regnamespace), "
            "refs as materialized (select d.*, rn.nspname from pg_depend d "
            "   join t on t.classid = d.classid and t.objid = d.objid "
            "   join o r on r.classid = d.refclassid and r.objid = d.refobjid join pg_namespace rn on rn.oid = r.nsp "
            "  where d.deptype in ('n', 'a', 'i') and rn.nspname not in (%s, 'pg_catalog')) "
            "select pg_describe_object(d.classid, d.objid, d.objsubid), pg_describe_object(d.refclassid, d.refobjid, 0), "
            "       d.nspname from refs d "
            "where not (d.nspname = any (%s) and exists (select 1 from pg_depend e where e.classid = d.refclassid "
            "                                             and e.objid = d.refobjid and e.deptype = 'e'))",
            tenant, tenant, sorted(ext_schemas)):
        out.append(Violation("dependency", dependent, f"depends on {referenced} in schema {ref_ns}"))
    for dependent, referenced, dep_ns in q(
            f"with o as ({_OBJECTS}), t as materialized (select * from o where nsp = %s::regnamespace), "
            "outside as materialized (select d.* from pg_depend d join t on t.classid = d.refclassid "
            "                          and t.objid = d.refobjid where d.deptype in ('n', 'a') and not exists "
            "                          (select 1 from t u where u.classid = d.classid and u.objid = d.objid)) "
            "select pg_describe_object(d.classid, d.objid, d.objsubid), pg_describe_object(d.refclassid, d.refobjid, 0), "
            "       dn.nspname "
            "from outside d join o on o.classid = d.classid and o.objid = d.objid "
            "join pg_namespace dn on dn.oid = o.nsp where dn.nspname not in (%s, 'pg_toast')", tenant, tenant):
        out.append(Violation("dependency", dependent, f"in schema {dep_ns} depends on the tenant's {referenced}"))

    # Functions: bodies, pinned search_path, definer's owner, trigger DDL, NOTIFY, advisory locks.
    tables = [r[0] for r in q("select c.relname from pg_class c where c.relnamespace = %s::regnamespace "
                              "and c.relkind in ('r', 'p', 'v', 'm')", tenant)]
    names = "|".join(map(re.escape, sorted(tables, key=len, reverse=True)))
    reads = re.compile(rf"(?:\b(?:from|join|update|into|using|table)|,)\s+(?:(?:{re.escape(tenant)}|__tenant__)\s*\.\s*)?"
                       rf"({names})\b(?!\s*\()", re.I)
    for name, body in q("select p.proname, p.prosrc from pg_proc p join pg_language l on l.oid = p.prolang "
                        "where p.pronamespace = %s::regnamespace and l.lanname = 'sql' and p.pronargs > 0", tenant):
        found = sorted({m.group(1) for m in reads.finditer(strip_comments(body))})
        if found and name not in SQL_SETS:
            out.append(Violation("sql function", name, f"an SQL function with parameters reads {', '.join(found)} "
                                 "(Citus cannot plan it): PL/pgSQL, or an inlined predicate over the caller's table"))
    for name, body in q("select p.proname, p.prosrc from pg_proc p where p.pronamespace = %s::regnamespace", tenant):
        code = strip_comments(body)
        for called in sorted(s for s in SQL_SETS if s != name and re.search(rf"\b{s}\s*\(", code)):
            out.append(Violation("sql set called", name, f"calls {called}, an SQL set over a tenant table "
                                 "(on Citus: not planned, or the shell table read as empty)"))
        for statement in re.findall(r"\bupdate\s+(?:only\s+)?[\w%$.]+\s+(?:as\s+)?\w*\s*set\b(.*?)(?:;|\breturning\b|\$q\$|$)",
                                   code, re.I | re.S):
            if re.search(r"\b(clock_timestamp|random|nextval|_erasure_tables_touched|_lease_holder_alive)\s*\(",
                         statement, re.I):
                out.append(Violation("volatile in update", name, "a volatile function in an UPDATE (Citus refuses "
                                     "it on a distributed table): take the value first"))
            set_clause = re.split(r"\bwhere\b", statement, maxsplit=1, flags=re.I)[0]
            if re.search(r"(?:\)|(?<!\barray)(?<![\w$]\[\])(?<=[\w$]))\s*\[\s*[^\]\s]", set_clause, re.I):
                out.append(Violation("subscript in update", name, "an array subscript in an UPDATE's SET (Citus 14 "
                                     "crashes the backend planning it): join the values by key (FROM unnest)"))
        for clause in re.findall(r"\bdo\s+update\s+set\b(.*?)(?:;|\breturning\b|$)", code, re.I | re.S):
            if re.search(r"\b(clock_timestamp|now|statement_timestamp|transaction_timestamp|random|nextval)\s*\(|"
                         r"\bcurrent_timestamp\b", clause, re.I):
                out.append(Violation("do update", name, "a function that is not immutable in DO UPDATE SET "
                                     "(Citus refuses it): insert the value and take it from excluded"))

    triggers = {r[0] for r in q("select distinct g.tgfoid::regproc::text from pg_trigger g join pg_class c "
                                "on c.oid = g.tgrelid where c.relnamespace = %s::regnamespace and not g.tgisinternal",
                                tenant)}
    for name, body, config, definer, owner in q(
            "select p.proname, p.prosrc, coalesce(p.proconfig, '{}'), p.prosecdef, pg_get_userbyid(p.proowner) "
            "from pg_proc p where p.pronamespace = %s::regnamespace", tenant):
        for schema, target, in_literal in qualified_names(body):
            if schema not in schemas or schema in {tenant, "pg_catalog", "pg_temp"}:
                continue
            if in_literal and schema == "pgrecall":
                continue  # a GUC name (pgrecall.last_recall) or a hint naming a control function to a person
            if schema == "pgrecall" and (name, target) in CONTROL_CALLS:
                continue
            if schema in ext_schemas and (schema, target) in ext_member_names:
                continue
            out.append(Violation("function body", name, f"names {schema}.{target}"))
        for setting in config:
            key, _, value = setting.partition("=")
            if key == "search_path":
                for entry in (e.strip().strip('"') for e in value.split(",")):
                    if entry not in allowed | {"pg_temp"}:
                        out.append(Violation("search_path", name, f"search_path names schema {entry}"))
        if definer and owner != f"pgrecall_{tenant}_owner":
            out.append(Violation("security definer", name, f"runs as {owner}, not the tenant's owner role"))
        code = strip_comments(body)
        if f"{tenant}.{name}" in triggers or name in triggers:
            if re.search(r"\b(create|alter|drop)\s+(table|index|schema|sequence|view|function|trigger|type)\b",
                         code, re.I):
                out.append(Violation("trigger DDL", name, "a trigger function runs DDL"))
        for channel in re.findall(r"pg_notify\s*\(\s*'([^']*)'", code) + re.findall(r"\bnotify\s+(\w+)", code, re.I):
            out.append(Violation("notify channel", name, f"spells channel {channel} in its body, which every role "
                                 "reads: notify through _notify(), whose names are the tenant's secret"))
        if re.search(r"\bpg_(try_)?advisory_(xact_)?lock(_shared)?\s*\(", code) and name not in REVIEWED_ADVISORY:
            out.append(Violation("advisory lock", name, "takes an advisory lock not reviewed for a sharded deployment "
                                 "(docs/scale-out.md, REVIEWED_ADVISORY)"))
    return out


def strip_comments(body: str) -> str:
    return "".join(text for kind, text in _segments(body) if kind != "comment")


def qualified_names(body: str) -> list[tuple[str, str, bool]]:
    """(schema, name, inside a quoted string) for each qualified name in a function body; comments are
    skipped, dollar-quoted text (dynamic SQL) is read as code."""
    out = []
    pattern = re.compile(r'(?<![\w$."])(?:"([^"]+)"|([A-Za-z_][\w$]*))\s*\.\s*(?:"([^"]+)"|([A-Za-z_][\w$]*))')
    for kind, text in _segments(body):
        if kind == "comment":
            continue
        for m in pattern.finditer(text):
            out.append(((m.group(1) or m.group(2)).lower() if m.group(2) else m.group(1),
                        m.group(3) or (m.group(4) or "").lower(), kind == "literal"))
    return out


def _segments(body: str) -> list[tuple[str, str]]:
    """Split SQL text into ('code' | 'literal' | 'comment', text) runs."""
    out, i, start, n = [], 0, 0, len(body)

    def flush(upto: int, kind: str = "code") -> None:
        if upto > start:
            out.append((kind, body[start:upto]))

    while i < n:
        if body.startswith("--", i):
            flush(i)
            end = body.find("\n", i)
            end = n if end < 0 else end
            out.append(("comment", body[i:end]))
            i = start = end
        elif body.startswith("/*", i):
            flush(i)
            end = body.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(("comment", body[i:end]))
            i = start = end
        elif body[i] == "'":
            flush(i)
            escapes = i > 0 and body[i - 1] in "eE" and (i < 2 or not (body[i - 2].isalnum() or body[i - 2] == "_"))
            j = i + 1
            while j < n:
                if escapes and body[j] == "\\":
                    j += 2
                    continue
                if body[j] == "'":
                    if j + 1 < n and body[j + 1] == "'":
                        j += 2
                        continue
                    break
                j += 1
            out.append(("literal", body[i:j + 1]))
            i = start = j + 1
        else:
            i += 1
    flush(n)
    return out
