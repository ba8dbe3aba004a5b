"""Where pgrecall connects: PGRECALL_DSN if set, else the embedded server."""

from __future__ import annotations

import os

import psycopg


def dsn_from_env() -> str | None:
    return os.environ.get("PGRECALL_DSN") or None


def admin_conninfo() -> str:
    """Conninfo for installing and managing tenants.

    With PGRECALL_DSN set that server is used as given; otherwise the embedded
    server is started if needed and its superuser is used.
    """
    dsn = dsn_from_env()
    if dsn:
        return dsn
    from . import server

    return server.start().uri()


def tenant_conninfo(tenant: str) -> str:
    """Conninfo for an application working in one tenant.

    On the embedded server this logs in as the tenant's application role, which
    may only EXECUTE the tenant's functions. With PGRECALL_DSN the DSN's role is used.
    """
    from .names import check_tenant_name

    check_tenant_name(tenant)  # it becomes the user name in a URI
    dsn = dsn_from_env()
    if dsn:
        return dsn
    from . import server

    return server.start().uri(user=f"pgrecall_{tenant}_app")


def connect_admin(**kwargs) -> psycopg.Connection:
    return psycopg.connect(admin_conninfo(), **kwargs)
