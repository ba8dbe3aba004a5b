"""Static boundary check of migration files, with sqlglot.

Rules: every statement parses as PostgreSQL; every table, index and type
reference is qualified with the tenant placeholder (__tenant__); no schema
other than the placeholders and pg_catalog is named; no column is called
tenant_id. Violations carry the file and line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError
from sqlglot.tokens import TokenType

TENANT = "__tenant__"
EXTENSIONS = "__ext__"
ALLOWED_SCHEMAS = {TENANT, EXTENSIONS, "pg_catalog"}

# Built-in PostgreSQL types that sqlglot does not model and reports as user-defined.
BUILTIN_TYPES = {
    "tsvector", "tsquery", "regconfig", "regclass", "regtype", "regprocedure", "tstzrange",
    "tstzmultirange", "int4range", "int8range", "daterange", "numrange", "name", "citext",
}


@dataclass(frozen=True)
class Violation:
    file: str
    line: int
    rule: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.rule}"


def statements(text: str) -> list[tuple[int, str]]:
    """(first line, text) of each statement, split on the tokenizer's semicolons."""
    tokens = sqlglot.Dialect.get_or_raise("postgres").tokenize(text)
    result, current = [], []
    for tok in tokens:
        if tok.token_type == TokenType.SEMICOLON:
            if current:
                result.append((current[0].line, text[current[0].start : current[-1].end + 1]))
            current = []
        else:
            current.append(tok)
    if current:
        result.append((current[0].line, text[current[0].start : current[-1].end + 1]))
    return result


def _line(node: exp.Expression, first_line: int) -> int:
    for candidate in [node, *node.find_all(exp.Identifier)]:
        line = candidate.meta.get("line") if hasattr(candidate, "meta") else None
        if line:
            return first_line + line - 1
    return first_line


def _schema_of_type(dtype: exp.DataType) -> tuple[str | None, str]:
    sql = dtype.sql("postgres").split("(")[0].split("[")[0].strip().strip('"')
    if "." in sql:
        schema, name = sql.rsplit(".", 1)
        return schema.strip('"'), name.strip('"')
    return None, sql


# A statement sqlglot does not model, checked here by its shape instead: it names one table, qualified.
SET_STORAGE = re.compile(
    r"alter\s+table\s+(?P<table>[\w.]+)\s+"
    r"alter\s+column\s+\w+\s+set\s+storage\s+(plain|main|external|extended)"
    r"(\s*,\s*alter\s+column\s+\w+\s+set\s+storage\s+(plain|main|external|extended))*\s*;?\s*$",
    re.I)


# The same for "alter table ... disable/enable trigger user": a migration's one-off data change to a table whose
# trigger refuses updates (0024 gives the log's existing turns their audience).
TRIGGERS = re.compile(r"alter\s+table\s+(?P<table>[\w.]+)\s+(disable|enable)\s+trigger\s+(user|\w+)\s*;?\s*$", re.I)


# And "alter type ... add attribute name type" (0042 adds as_of to recall_meta): the type altered is the
# tenant's, the attribute's type built in or qualified.
ADD_ATTRIBUTE = re.compile(
    r"alter\s+type\s+(?P<table>[\w.]+)\s+add\s+attribute\s+\w+\s+(?P<type>[\w.\[\]() ,]+?)\s*;?\s*$", re.I)
# And "alter type ... drop attribute name" (0045 replaces the jsonb provenance of the result types).
DROP_ATTRIBUTE = re.compile(r"alter\s+type\s+(?P<table>[\w.]+)\s+drop\s+attribute\s+\w+\s*;?\s*$", re.I)


def _attribute_type_violation(file: str, line: int, type_text: str) -> list[Violation]:
    dtype = exp.DataType.build(type_text, dialect="postgres", udt=True)
    if dtype.this != exp.DataType.Type.USERDEFINED:
        return []
    schema, name = _schema_of_type(dtype)
    if schema is None and name.lower() not in BUILTIN_TYPES:
        return [Violation(file, line, f"unqualified type {name!r}: qualify it with {TENANT} or {EXTENSIONS}")]
    if schema is not None and schema not in ALLOWED_SCHEMAS:
        return [Violation(file, line, f"type in schema {schema!r}: only {TENANT}, {EXTENSIONS} and pg_catalog are "
                                      "allowed")]
    return []


def check(file: str, text: str) -> list[Violation]:
    found: list[Violation] = []
    try:
        stmts = statements(text)
    except Exception as exc:  # the tokenizer's own errors
        return [Violation(file, 1, f"cannot be tokenized as PostgreSQL: {exc}")]
    for first_line, stmt in stmts:
        try:
            tree = sqlglot.parse_one(stmt, read="postgres", error_level=sqlglot.ErrorLevel.RAISE)
        except ParseError as exc:
            found.append(Violation(file, first_line, f"does not parse as PostgreSQL: {str(exc).splitlines()[0]}"))
            continue
        if isinstance(tree, exp.Command) and (attribute := ADD_ATTRIBUTE.match(stmt.strip())):
            if not attribute["table"].startswith(TENANT + "."):
                found.append(Violation(file, first_line,
                                       f"unqualified reference {attribute['table']!r}: qualify it with {TENANT}"))
            found.extend(_attribute_type_violation(file, first_line, attribute["type"]))
            continue
        if isinstance(tree, exp.Command) and (storage := SET_STORAGE.match(stmt.strip())
                                              or TRIGGERS.match(stmt.strip())
                                              or DROP_ATTRIBUTE.match(stmt.strip())):
            if not storage["table"].startswith(TENANT + "."):
                found.append(Violation(file, first_line, f"unqualified reference {storage['table']!r}: qualify it with {TENANT}"))
            continue
        if isinstance(tree, exp.Command):
            found.append(Violation(file, first_line, f"statement not understood by the parser: {stmt.split()[0:3]}"))
            continue
        ctes = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
        # sqlglot parses the name in "drop constraint x" as a table; a constraint
        # name belongs to its table and cannot be qualified.
        constraint_names = {id(t) for drop in tree.find_all(exp.Drop)
                            if str(drop.args.get("kind") or "").upper() == "CONSTRAINT"
                            for t in drop.args.get("tables") or []}
        for table in tree.find_all(exp.Table):
            name, schema = table.name, table.db
            if id(table) in constraint_names:
                continue
            if not schema and name in ctes:
                continue
            if not schema:
                found.append(Violation(file, _line(table, first_line), f"unqualified reference {name!r}: qualify it with {TENANT}"))
            elif schema not in ALLOWED_SCHEMAS:
                found.append(Violation(file, _line(table, first_line), f"names schema {schema!r}: only {TENANT}, {EXTENSIONS} and pg_catalog are allowed"))
        for dtype in tree.find_all(exp.DataType):
            if dtype.this != exp.DataType.Type.USERDEFINED:
                continue
            schema, name = _schema_of_type(dtype)
            if schema is None and name.lower() not in BUILTIN_TYPES:
                found.append(Violation(file, _line(dtype, first_line), f"unqualified type {name!r}: qualify it with {TENANT} or {EXTENSIONS}"))
            elif schema is not None and schema not in ALLOWED_SCHEMAS:
                found.append(Violation(file, _line(dtype, first_line), f"type in schema {schema!r}: only {TENANT}, {EXTENSIONS} and pg_catalog are allowed"))
        for dot in tree.find_all(exp.Dot):
            left = dot.this
            if isinstance(left, (exp.Identifier, exp.Var, exp.Column)) and isinstance(dot.expression, exp.Anonymous):
                schema = left.name
                if schema not in ALLOWED_SCHEMAS:
                    found.append(Violation(file, _line(dot, first_line), f"calls a function in schema {schema!r}"))
        for node in tree.find_all(exp.ColumnDef, exp.Column):
            if node.name.lower() == "tenant_id":
                found.append(Violation(file, _line(node, first_line), "a column named tenant_id: a tenant is a schema, never a column"))
    return found
