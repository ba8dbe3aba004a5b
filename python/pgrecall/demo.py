"""What `make run` shows: the embedded server, a tenant, and its status."""

from __future__ import annotations

import argparse

from . import db, install, server


def main(args: argparse.Namespace) -> int:
    tenant = args.tenant
    if db.dsn_from_env():
        print(f"pgrecall: using PGRECALL_DSN")
    else:
        info = server.start()
        print(f"pgrecall: embedded PostgreSQL 18 running, pid {info.pid}, data in {info.pgdata}")
    with db.connect_admin(autocommit=True) as conn:
        applied = install.install(conn, [tenant])
        print(f"pgrecall: tenant {tenant!r} installed" + (f" ({len(applied)} steps applied)" if applied else " (already current)"))
        row = conn.execute(
            "select name, schema_version, latest_version, owner_role, app_role from pgrecall.list_tenants() where name = %s",
            (tenant,),
        ).fetchone()
        print(f"  schema {row[0]}: migration {row[1]} of {row[2]}; owner role {row[3]}; application role {row[4]}")
    print("pgrecall: `pgrecall server stop` stops the embedded server.")
    return 0
