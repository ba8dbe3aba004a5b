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

MAX_LENGTH = 47  # pgrecall_<name>_worker must fit 63-byte identifiers

# fullmatch, ASCII only: "$" in re.match would also accept a trailing newline.
_SHAPE = re.compile(r"[a-z][a-z0-9_]*", re.ASCII)

_RESERVED_SCHEMAS = frozenset({"public", "information_schema", "extensions"})

# PostgreSQL's reserved keywords and type/function-name keywords, as the server that generated _catalog.py
# lists them; the SQL rule reads the server's own list, so a test checks this copy covers it.
RESERVED_KEYWORDS = _catalog.RESERVED_KEYWORDS

HINT = "Use 1 to 47 characters: a lowercase letter, then lowercase letters, digits or underscores."


def tenant_name_problem(name: object) -> str | None:
    """None if ``name`` may name a tenant, otherwise the rule it breaks (as pgrecall.tenant_name_problem says it)."""
    if name is None or name == "":
        return "a tenant name must not be empty"
    if not isinstance(name, str):
        return f"a tenant name is a string, not {type(name).__name__}"
    if len(name) > MAX_LENGTH or len(name.encode("utf-8", "surrogatepass")) > MAX_LENGTH:
        return f"a tenant name has at most {MAX_LENGTH} characters"
    if not _SHAPE.fullmatch(name):
        return ("a tenant name starts with a lowercase ASCII letter and holds only lowercase ASCII letters, "
                "digits and underscores")
    if name.startswith("pg_"):
        return "names beginning with pg_ are reserved for PostgreSQL"
    if name.startswith("pgrecall"):
        return "names beginning with pgrecall are reserved for pgrecall itself"
    if name in _RESERVED_SCHEMAS:
        return f"{name} is a reserved schema name"
    if name in RESERVED_KEYWORDS:
        return f"{name} is a reserved SQL keyword"
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
