"""Tenant names, checked in Python before any SQL is composed with one.

A tenant name becomes a schema name, two role names, a LISTEN channel and a
login user in a URI, so every Python entry that takes one calls
:func:`check_tenant_name` first. The rule is the one ``pgrecall.tenant_name_problem()``
applies in SQL (sql/control.sql); tests hold the two to the same answers.
Passing this check does not make a name safe to paste into SQL: identifiers
still go through ``psycopg.sql.Identifier`` and values through bound parameters.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
from psycopg import sql

from . import _catalog, errors

# The rule is the database's (pgrecall.tenant_name_rules(), sql/control.sql), copied by make driver into
# _catalog.py: each check in order, with what a name that fails it is told.
RULES = _catalog.TENANT_NAME_RULES
HINT = _catalog.TENANT_NAME_HINT

# PostgreSQL's reserved keywords and type/function-name keywords, as the server that generated _catalog.py
# lists them; the SQL rule reads the server's own list, so a test checks this copy covers it.
RESERVED_KEYWORDS = _catalog.RESERVED_KEYWORDS


def _fails(kind: str, argument: str | None, name: str) -> bool:
    """Whether ``name`` (a non-empty str) fails one check of the rule, read as pgrecall.tenant_name_problem reads it."""
    if kind == "max_length":
        assert argument is not None
        return len(name) > int(argument) or len(name.encode("utf-8", "surrogatepass")) > int(argument)
    if kind == "pattern":
        assert argument is not None and argument.startswith("^") and argument.endswith("$")
        # fullmatch on the ASCII text: "$" in re.match would also accept a trailing newline
        return not name.isascii() or re.fullmatch(argument[1:-1], name) is None
    if kind == "not_prefix":
        assert argument is not None
        return name.startswith(argument)
    if kind == "not_one_of":
        assert argument is not None
        return name in argument.split(" ")
    if kind == "not_keyword":
        return name in RESERVED_KEYWORDS
    raise AssertionError(f"_catalog.TENANT_NAME_RULES names an unknown kind of check: {kind}")


def tenant_name_problem(name: object) -> str | None:
    """None if ``name`` may name a tenant, otherwise the rule it breaks (as pgrecall.tenant_name_problem says it)."""
    if not isinstance(name, str) and name is not None:
        return f"a tenant name is a string, not {type(name).__name__}"
    for kind, argument, problem in RULES:
        if kind == "nonempty" and not name:
            return problem
        if kind != "nonempty" and name and _fails(kind, argument, name):
            return problem.replace("%s", name)
    return None


def check_tenant_name(name: object) -> str:
    """``name`` unchanged if it may name a tenant, else :class:`errors.InvalidTenantName` naming the rule.

    The message shows the name as a Python literal (repr): control characters, bidi
    overrides and line breaks arrive escaped on a terminal, never raw.
    """
    problem = tenant_name_problem(name)
    if problem is not None:
        shown = _shown(name)
        raise errors.InvalidTenantName(f"invalid tenant name {shown}: {problem}", hint=HINT)
    return name  # type: ignore[return-value]


def _shown(name: object, limit: int = 80) -> str:
    text = ascii(name) if isinstance(name, str) else repr(name)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def listen(conn: psycopg.Connection[Any], kind: str, tenant: str) -> str:
    """LISTEN on the channel the tenant's functions notify for ``kind`` (embed, derive); returns its name.

    The name is a secret of the tenant (a random name in its notification_channel table, so that no other
    role can listen to its wake-ups or send it any); ``listen_channel()``, a worker-duty function, reads it.
    """
    query = sql.SQL("select {}.listen_channel(%s)").format(sql.Identifier(check_tenant_name(tenant)))
    try:
        row = conn.execute(query, (kind,)).fetchone()
        assert row is not None
        channel: str = row[0]
        conn.execute(sql.SQL("listen {}").format(sql.Identifier(channel)))
    except psycopg.Error as exc:
        raise errors.translate(exc) from exc
    return channel
