"""Opening a connection of a tenant's login role, pgvector's types registered: what a handle that opens its
own connection uses, and what a caller that needs a plain connection of the same role (the agent's
notifications, the CLI) uses too."""

from __future__ import annotations

from typing import Any

import psycopg

from .. import db, errors
from ._run import configure, configure_async


def open_connection(conninfo: str, tenant: str, role: str) -> psycopg.Connection[Any]:
    """An autocommit connection of the tenant's login role ``role``, pgvector's types registered; a role that
    does not exist is a tenant that does not exist (TenantNotFound)."""
    try:
        conn = psycopg.connect(conninfo, autocommit=True)
    except psycopg.OperationalError as exc:
        _check_role(exc, tenant, role)
        raise
    try:
        configure(conn)
    except BaseException:
        conn.close()
        raise
    return conn


async def _open_async(conninfo: str, tenant: str, role: str) -> psycopg.AsyncConnection[Any]:
    try:
        conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
    except psycopg.OperationalError as exc:
        _check_role(exc, tenant, role)
        raise
    try:
        await configure_async(conn)
    except BaseException:
        await conn.close()
        raise
    return conn


def _check_role(exc: psycopg.OperationalError, tenant: str, role: str) -> None:
    """A refused login whose role does not exist: the tenant does not exist (TenantNotFound, chaining it)."""
    if f'role "{db.role_name(tenant, role)}" does not exist' in str(exc):
        raise errors.TenantNotFound(f"tenant {tenant!r} does not exist on this server",
                                    hint=f"Create it: pgrecall tenant create {tenant}") from exc
