"""The ``pgrecall`` command: server, tenants, the psql install script, and the demo."""

from __future__ import annotations

import argparse
import json
import sys

import psycopg

from . import errors


def _print_rows(headers: list[str], rows: list[tuple]) -> None:
    cells = [[("" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip())
    print("  ".join("-" * w for w in widths))
    for r in cells:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())


def cmd_server(args: argparse.Namespace) -> int:
    from . import server

    if args.action == "start":
        info = server.start()
        print(f"pgrecall: embedded PostgreSQL running (pid {info.pid}, data {info.pgdata})")
        print(info.uri())
    elif args.action == "stop":
        print("pgrecall: stopped" if server.stop() else "pgrecall: the embedded server was not running")
    elif args.action == "status":
        info = server.status()
        if info.running:
            print(f"running  pid={info.pid}  data={info.pgdata}  socket={info.socket_dir}  port={info.port}")
        else:
            print(f"stopped  data={info.pgdata}")
            return 3  # like pg_ctl status: not running
    elif args.action == "uri":
        info = server.status()
        if not info.running:
            print("pgrecall: the embedded server is not running; run: pgrecall server start", file=sys.stderr)
            return 3
        print(info.uri())
    return 0


def cmd_tenant(args: argparse.Namespace) -> int:
    from . import db, install

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
            try:
                conn.execute("select pgrecall.drop_tenant(%s)", (args.name,))
            except psycopg.Error as exc:
                raise errors.translate(exc) from exc
            print(f"pgrecall: dropped tenant {args.name}")
        elif args.action == "list":
            if not _control_installed(conn):
                print("pgrecall: no tenants (pgrecall is not installed in this database)")
                return 0
            rows = conn.execute(
                "select name, schema_version, latest_version, app_role, created_at::timestamp(0) "
                "from pgrecall.list_tenants()"
            ).fetchall()
            _print_rows(["tenant", "version", "latest", "app_role", "created_at"], rows)
        elif args.action == "settings":
            rows = conn.execute(
                "select key, value::text, description from pgrecall.tenant_settings(%s)", (args.name,)
            ).fetchall()
            _print_rows(["key", "value", "description"], rows)
    return 0


def _control_installed(conn: psycopg.Connection) -> bool:
    return conn.execute("select to_regnamespace('pgrecall') is not null").fetchone()[0]


def _ensure_control(conn: psycopg.Connection) -> None:
    from . import install

    install.install(conn)


def cmd_sql(args: argparse.Namespace) -> int:
    from . import sources

    sys.stdout.write(sources.psql_script(args.tenant))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from . import demo

    return demo.main(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pgrecall",
        description="Agent memory inside PostgreSQL. Uses PGRECALL_DSN if set, else an embedded server "
        "under PGRECALL_HOME.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("server", help="the embedded PostgreSQL server")
    p.add_argument("action", choices=["start", "stop", "status", "uri"])
    p.set_defaults(func=cmd_server)

    p = sub.add_parser("tenant", help="create, upgrade, list or drop tenants")
    p.add_argument("action", choices=["create", "upgrade", "drop", "list", "settings"])
    p.add_argument("name", nargs="?")
    p.set_defaults(func=cmd_tenant)

    p = sub.add_parser("sql", help="print a psql script that installs or upgrades a tenant")
    p.add_argument("--tenant", required=True)
    p.set_defaults(func=cmd_sql)

    p = sub.add_parser("demo", help="what `make run` shows")
    p.add_argument("--tenant", default="demo")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "tenant" and args.action != "list" and not args.name:
        parser.error(f"tenant {args.action} needs a NAME")
    try:
        return args.func(args)
    except errors.PgrecallError as exc:
        print(f"pgrecall: error: {exc}", file=sys.stderr)
        return 1
    except psycopg.OperationalError as exc:
        print(f"pgrecall: cannot reach the database: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
