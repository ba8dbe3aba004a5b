"""pgrecall tenant, peer and scope: creating, upgrading, listing and dropping tenants, and what is in them."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import psycopg
from psycopg.rows import dict_row

from .. import errors
from ._common import Subparsers, _fail, _print_json, _print_rows


def cmd_tenant(args: argparse.Namespace) -> int:
    from .. import db, install

    with db.connect_admin(autocommit=True) as conn:
        if args.action in ("create", "upgrade"):
            if args.action == "create":
                _ensure_control(conn)
                try:
                    conn.execute("select pgrecall.create_tenant(%s)", (args.name,))
                except psycopg.Error as exc:
                    raise errors.translate(exc) from exc
                print(f"pgrecall: created tenant {args.name}")
            else:
                applied = install.install(conn, [args.name])
                print(f"pgrecall: tenant {args.name}: " + (", ".join(n for _, n in applied) or "already current"))
        elif args.action == "drop":
            if not _drop_confirmed(conn, args):
                return 1
            try:
                conn.execute("select pgrecall.drop_tenant(%s)", (args.name,))
            except psycopg.Error as exc:
                raise errors.translate(exc) from exc
            print(f"pgrecall: dropped tenant {args.name}")
        elif args.action == "list":
            if not _control_installed(conn):
                if args.json:
                    return _print_json([])
                print("pgrecall: no tenants (pgrecall is not installed in this database)")
                return 0
            if args.json:
                return _print_json(_tenant_list(conn))
            rows = conn.execute(
                "select name, schema_version, latest_version, app_role, created_at::timestamp(0) "
                "from pgrecall.list_tenants()"
            ).fetchall()
            _print_rows(["tenant", "version", "latest", "app_role", "created_at"], rows)
        elif args.action == "move":
            host, _, port = (args.to or "").rpartition(":")
            if not host or not port.isdigit():
                _fail(f"pgrecall: error: tenant move needs --to HOST:PORT of a Citus worker, not {args.to!r}")
                return 2
            try:
                node = conn.execute("select pgrecall.move_tenant(%s, %s, %s)", (args.name, host, int(port))).fetchone()
            except psycopg.Error as exc:
                raise errors.translate(exc) from exc
            print(f"pgrecall: tenant {args.name} is on {node[0] if node else args.to}")
        elif args.action == "settings":
            if args.json:
                return _print_json(_tenant_settings(conn, args.name))
            rows = conn.execute(
                "select key, value::text, description from pgrecall.tenant_settings(%s)", (args.name,)
            ).fetchall()
            _print_rows(["key", "value", "description"], rows)
    return 0


def _drop_confirmed(conn: psycopg.Connection[Any], args: argparse.Namespace) -> bool:
    """Dropping a tenant deletes everything in it: ask, unless --yes. Without a terminal to ask on (CI,
    a pipe) refuse rather than read a stray line as consent. A tenant that does not exist is left to
    drop_tenant, which says so."""
    exists = conn.execute("select exists (select 1 from pgrecall.list_tenants() where name = %s)",
                          (args.name,)).fetchone()
    if args.yes or not (exists and exists[0]):
        return True
    if not sys.stdin.isatty():
        _fail(f"pgrecall: error: not dropping tenant {args.name}: confirm with --yes (no terminal to ask on)")
        return False
    print(f"Drop tenant {args.name}: its schema, its roles and every memory and observation in it? "
          f"This cannot be undone. Type the tenant name to confirm: ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip()
    if answer != args.name:
        _fail(f"pgrecall: not dropping tenant {args.name} (the answer was not its name)")
        return False
    return True


def _tenant_list(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute("select name as tenant, schema_version, latest_version, app_role, created_at "
                           "from pgrecall.list_tenants()").fetchall()


def _tenant_settings(conn: psycopg.Connection[Any], tenant: str) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute("select key, value, description from pgrecall.tenant_settings(%s)", (tenant,)).fetchall()


def _control_installed(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute("select to_regnamespace('pgrecall') is not null").fetchone()
    return bool(row and row[0])


def _ensure_control(conn: psycopg.Connection[Any]) -> None:
    from .. import install

    install.install(conn)


def cmd_add(args: argparse.Namespace) -> int:
    import pgrecall

    with pgrecall.connect(tenant=args.tenant) as mem:
        if args.command == "peer":
            peer_id = mem.add_peer(args.name, args.kind)
            print(f"peer {args.name} ({args.kind}) is id {peer_id} in tenant {args.tenant}")
        else:
            mem.add_scope(args.name, args.description)
            print(f"scope {args.name} exists in tenant {args.tenant}")
    return 0


def add_tenant(sub: Subparsers) -> None:
    p = sub.add_parser("tenant", help="create, upgrade, list, drop or move tenants")
    p.add_argument("action", choices=["create", "upgrade", "drop", "list", "settings", "move"])
    p.add_argument("name", nargs="?")
    p.add_argument("--yes", action="store_true", help="with drop: do not ask for confirmation")
    p.add_argument("--json", action="store_true", help="with list or settings: one JSON document")
    p.add_argument("--to", metavar="HOST:PORT", help="with move: the Citus worker to move the tenant to "
                   "(citus_schema_move, while the tenant stays in use)")
    p.set_defaults(func=cmd_tenant)


def add_peer(sub: Subparsers) -> None:
    p = sub.add_parser("peer", help="add a peer (a person, agent or other participant)")
    p.add_argument("action", choices=["add"])
    p.add_argument("name")
    p.add_argument("--kind", default="human", choices=["human", "agent", "other"])
    p.add_argument("--tenant", default=os.environ.get("PGRECALL_TENANT", "demo"))
    p.set_defaults(func=cmd_add)


def add_scope(sub: Subparsers) -> None:
    p = sub.add_parser("scope", help="add a scope (a project inside the tenant)")
    p.add_argument("action", choices=["add"])
    p.add_argument("name")
    p.add_argument("--description")
    p.add_argument("--tenant", default=os.environ.get("PGRECALL_TENANT", "demo"))
    p.set_defaults(func=cmd_add)
