"""Opening a connection of a tenant's login role, pgvector's types registered: what a handle that opens its
own connection uses, and what a caller that needs a plain connection of the same role (the agent's
notifications, the CLI) uses too."""

from __future__ import annotations

from typing import Any

import psycopg

from .. import db, errors
from ._run import configure, configure_async


# No server-side prepared statements (prepare_threshold=None): behind a pooler in transaction mode each
# transaction may get another server connection, where a statement prepared on the last one does not exist.
# They would save little: what the driver sends is a call of a PL/pgSQL function, whose own statements'
# plans the server caches per connection anyway.
def open_connection(conninfo: str, tenant: str, role: str) -> psycopg.Connection[Any]:
    """An autocommit connection of the tenant's login role ``role``, pgvector's types registered; a role that
    does not exist is a tenant that does not exist (TenantNotFound), a server with no slot left ServerAtCapacity."""
    try:
        conn = psycopg.connect(conninfo, autocommit=True, prepare_threshold=None)
    except psycopg.OperationalError as exc:
        check_role(exc, tenant, role)
        _check_capacity(exc, tenant, role)
        raise
    try:
        configure(conn)
    except BaseException:
        conn.close()
        raise
    return conn


async def _open_async(conninfo: str, tenant: str, role: str) -> psycopg.AsyncConnection[Any]:
    try:
        conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True, prepare_threshold=None)
    except psycopg.OperationalError as exc:
        check_role(exc, tenant, role)
        _check_capacity(exc, tenant, role)
        raise
    try:
        await configure_async(conn)
    except BaseException:
        await conn.close()
        raise
    return conn


def check_role(exc: psycopg.OperationalError, tenant: str, role: str) -> None:
    """A refused login whose role does not exist: the tenant does not exist (TenantNotFound, chaining it)."""
    if f'role "{db.role_name(tenant, role)}" does not exist' in str(exc):
        raise errors.TenantNotFound(f"tenant {tenant!r} does not exist on this server",
                                    hint=f"Create it: pgrecall tenant create {tenant}") from exc


# What PostgreSQL answers when it has no slot for one more connection (SQLSTATE 53300, which a refused
# connection does not always carry to the client): for everyone, or for this role.
_NO_SLOT = ("too many clients already", "too many connections for role",
            "remaining connection slots are reserved")


# A Unix socket whose queue of connections not yet accepted is full refuses at once (EAGAIN): PostgreSQL
# queues twice max_connections, so a storm of clients meets that before the server can say "too many".
_QUEUE_FULL = "Resource temporarily unavailable"


def _check_capacity(exc: psycopg.OperationalError, tenant: str, role: str) -> None:
    """A login refused for want of a connection slot: ServerAtCapacity naming the limit, chaining it."""
    said = str(exc)
    queue_full = _QUEUE_FULL in said
    if getattr(exc, "sqlstate", None) != "53300" and not queue_full and not any(w in said for w in _NO_SLOT):
        return
    login = db.role_name(tenant, role)
    if queue_full:
        limit = "the server's queue of connections not yet accepted is full (twice its max_connections)"
    elif "too many connections for role" in said:
        limit = f"role {login}'s CONNECTION LIMIT"
    else:
        limit = "the server's max_connections (less its reserved slots)"
    raise errors.ServerAtCapacity(
        f"the server refused a connection of {login}: every connection slot is taken, {limit} "
        f"({said.strip().splitlines()[-1]})",
        hint="Nothing was sent or stored. Retry later, raise the limit, or put a pooler in front of the server "
             "(pgbouncer in transaction mode: docs/operations.md, 'Many clients').") from exc
