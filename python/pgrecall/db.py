"""Where pgrecall connects: PGRECALL_DSN if set, else the embedded server."""

from __future__ import annotations

import os
from typing import Any

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


ROLES = ("app", "worker", "admin")


def role_name(tenant: str, role: str = "app") -> str:
    """The login role of one duty of a tenant: pgrecall_<tenant>_<app|worker|admin>."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    return f"pgrecall_{tenant}_{role}"


def tenant_conninfo(tenant: str, role: str = "app") -> str:
    """Conninfo for one duty (app, worker or admin) working in one tenant.

    ``PGRECALL_<ROLE>_DSN`` (e.g. PGRECALL_WORKER_DSN) is used if set, else
    ``PGRECALL_DSN`` as given (its role decides what may be called); on the
    embedded server this logs in as the tenant's role of that duty, which may
    only EXECUTE the functions of its duty.
    """
    from .names import check_tenant_name

    check_tenant_name(tenant)  # it becomes the user name in a URI
    name = role_name(tenant, role)
    dsn = os.environ.get(f"PGRECALL_{role.upper()}_DSN") or dsn_from_env()
    if dsn:
        return dsn
    from . import server

    return server.start().uri(user=name)


def connect_admin(**kwargs: Any) -> psycopg.Connection[Any]:
    return psycopg.connect(admin_conninfo(), **kwargs)
