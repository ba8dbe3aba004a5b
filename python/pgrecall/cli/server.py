"""pgrecall server, sql, review and demo: the embedded server, the psql install script, the screens."""

from __future__ import annotations

import argparse
import sys

from ._common import Subparsers, _fail, _print_json, tenant_args


def cmd_server(args: argparse.Namespace) -> int:
    from .. import server

    if args.action == "start":
        info = server.start()
        print(f"pgrecall: embedded PostgreSQL running (pid {info.pid}, data {info.pgdata})")
        print(info.uri())
        if info.pending_restart:
            print(f"pgrecall: {', '.join(info.pending_restart)} take effect after a restart: "
                  "pgrecall server stop && pgrecall server start", file=sys.stderr)
    elif args.action == "stop":
        from .. import resident

        try:
            if resident.stop():  # started on demand like the server, and stopped with it
                print("pgrecall: stopped the resident embedder")
        except OSError as exc:  # its files cannot be read or removed: the server stops all the same
            print(f"pgrecall: the resident embedder was not stopped: {exc}", file=sys.stderr)
        print("pgrecall: stopped" if server.stop() else "pgrecall: the embedded server was not running")
    elif args.action == "status":
        info = server.status()
        if args.json:
            _print_json({"running": info.running, "pid": info.pid if info.running else None,
                         "pgdata": str(info.pgdata), "socket_dir": str(info.socket_dir) if info.running else None,
                         "port": info.port if info.running else None})
            return 0 if info.running else 3
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
        if args.tenant:
            from .. import db

            print(info.uri(user=db.role_name(args.tenant, args.role)))
        else:
            print(info.uri())
    return 0


def cmd_embedder(args: argparse.Namespace) -> int:
    from .. import resident
    from ..embedder import ModelUnavailable

    if args.action == "stop":
        print("pgrecall: stopped the resident embedder" if resident.stop()
              else "pgrecall: the resident embedder was not running")
        return 0
    try:
        info = resident.start() if args.action == "start" else resident.status()
    except (resident.ResidentUnavailable, ModelUnavailable) as exc:
        return _fail(f"pgrecall: error: the resident embedder did not start: {exc}",
                     "Commands still embed, each in its own process (the default; PGRECALL_EMBEDDER=resident "
                     f"sends their texts here) (its log: {resident.paths().log}).")
    if args.json:
        _print_json(info)
    elif info["running"]:
        print(f"running  pid={info['pid']}  model={info['identity']['model']}  requests={info['requests']}  "
              f"texts={info['texts']}  loaded in {info['load_seconds']:.1f} s  socket={info['socket']}")
    else:
        print(f"{'loading' if info.get('loading') else 'stopped'}  socket={info['socket']}  log={info['log']}")
    return 0 if info["running"] else 3


def cmd_sql(args: argparse.Namespace) -> int:
    from .. import sources

    sys.stdout.write(sources.psql_script(args.tenant))
    return 0


def cmd_review(args: argparse.Namespace) -> int:
    from .. import review

    missing = review.missing_dependencies()
    if missing:
        return _fail(f"pgrecall: error: {missing}")
    review.serve(args.tenant, args.principal, args.scopes, port=args.port)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .. import demo

    return demo.main(args)


def add_server(sub: Subparsers) -> None:
    p = sub.add_parser("server", help="the embedded PostgreSQL server")
    p.add_argument("action", choices=["start", "stop", "status", "uri"])
    p.add_argument("--tenant", help="with uri: the URI of one of this tenant's login roles")
    p.add_argument("--role", choices=["app", "worker", "admin"], default="app",
                   help="with uri --tenant: app (the agent, default), worker (queued work) or admin (back office)")
    p.add_argument("--json", action="store_true", help="with status: one JSON document")
    p.set_defaults(func=cmd_server)


def add_embedder(sub: Subparsers) -> None:
    p = sub.add_parser("embedder", help="the resident embedder: the model loaded once for every command, when "
                                        "PGRECALL_EMBEDDER=resident (else each command loads its own, in a "
                                        "fraction of a second); stopped with the server")
    p.add_argument("action", choices=["start", "stop", "status"])
    p.add_argument("--json", action="store_true", help="with start or status: one JSON document")
    p.set_defaults(func=cmd_embedder)


def add_sql(sub: Subparsers) -> None:
    p = sub.add_parser("sql", help="print a psql script that installs or upgrades a tenant")
    p.add_argument("--tenant", required=True)
    p.set_defaults(func=cmd_sql)


def add_review(sub: Subparsers) -> None:
    p = sub.add_parser("review", help="the web screen where a person decides about proposed duplicates "
                                      "(127.0.0.1 only, as the tenant's application role)")
    tenant_args(p)
    p.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (default: 8765)")
    p.set_defaults(func=cmd_review)


def add_demo(sub: Subparsers) -> None:
    p = sub.add_parser("demo", help="what `make run` shows")
    p.add_argument("--tenant", default="demo")
    p.add_argument("--explain", action="store_true",
                   help="also show how recall ranked each answer (candidates, lexical and dense ranks, cosines, "
                        "scores), the migration, the embedding model and the work queue")
    p.set_defaults(func=cmd_demo)
