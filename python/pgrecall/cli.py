"""The ``pgrecall`` command: server, tenants, the psql install script, and the demo."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

import psycopg

from . import errors, names

if TYPE_CHECKING:
    from .driver import Memory


def _print_rows(headers: list[str], rows: list[tuple[Any, ...]]) -> None:
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
        if args.tenant:
            from . import db

            print(info.uri(user=db.role_name(args.tenant, args.role)))
        else:
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


def _control_installed(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute("select to_regnamespace('pgrecall') is not null").fetchone()
    return bool(row and row[0])


def _ensure_control(conn: psycopg.Connection[Any]) -> None:
    from . import install

    install.install(conn)


def cmd_sql(args: argparse.Namespace) -> int:
    from . import sources

    sys.stdout.write(sources.psql_script(args.tenant))
    return 0


def _memory(args: argparse.Namespace) -> Memory:
    import pgrecall

    return pgrecall.connect(tenant=args.tenant, principal=args.principal, scopes=args.scopes)


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


def cmd_remember(args: argparse.Namespace) -> int:
    with _memory(args) as mem:
        evidence = args.evidence
        if not evidence:
            # Hand use: what you ask to remember is itself what was said.
            evidence = [mem.append(args.text, role=args.role, kind="note", scope=args.scope)]
            print(f"appended observation at offset {evidence[0]} of scope {args.scope or args.scopes[0]}")
        r = mem.remember(args.text, evidence=evidence, purposes=args.purposes, scope=args.scope,
                         audience=args.audience, kind=args.kind, title=args.title, about=args.about)
    if r.created:
        print(f"remembered as memory {r.memory_id}")
    else:
        print(f"nothing remembered ({r.reason})" + (f": memory {r.memory_id}" if r.memory_id else ""))
    return 0


def cmd_read(args: argparse.Namespace) -> int:
    with _memory(args) as mem:
        rec = mem.read(args.memory_id, purpose=args.purpose, include_superseded=args.include_superseded)
    if args.json:
        from dataclasses import asdict

        print(json.dumps(asdict(rec), default=str, indent=2))
        return 0
    print(f"memory {rec.id} (revision {rec.revision}, {rec.kind}, {rec.origin}) in scope {rec.scope}")
    if rec.title:
        print(f"  title:     {rec.title}")
    print(f"  body:      {rec.body}")
    print(f"  audience:  {rec.audience or 'everyone in the scope'}; purposes: {', '.join(rec.purposes)}")
    if rec.superseded_by:
        print(f"  superseded by memory {rec.superseded_by}")
    for o in rec.provenance.observations:
        print(f"  from {o.scope}#{o.offset} ({o.actor}, {o.source_role}): {o.text}")
    for m in rec.provenance.memories:
        print(f"  from memory {m.id}")
    if rec.provenance.hidden_sources:
        print(f"  and {rec.provenance.hidden_sources} source memories you may not see")
    for h in rec.revisions:
        print(f"  revision {h.revision} was: {h.body}" + (f" ({h.reason})" if h.reason else ""))
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    with _memory(args) as mem:
        revision = mem.forget(args.memory_id, reason=args.reason)
    print(f"forgot memory {args.memory_id} (revision {revision})")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from . import importer

    count = importer.import_jsonl(args.file, tenant=args.tenant, scope=args.scopes[0], progress=not args.quiet)
    print(f"imported {count} observations into scope {args.scopes[0]} of tenant {args.tenant}")
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from .worker import Worker

    worker = Worker(args.tenant, batch_size=args.batch_size)
    if args.once:
        stats = worker.drain()
        print(f"pgrecall worker: embedded {stats.stored} memories and {stats.passages_stored} passages "
              f"in {stats.batches} batches")
        return 0
    print(f"pgrecall worker {worker.name}: waiting for work in tenant {args.tenant} (Ctrl-C stops)", flush=True)
    try:
        worker.run_forever()
    except KeyboardInterrupt:
        pass
    return 0


def cmd_deriver(args: argparse.Namespace) -> int:
    from .deriver import Deriver

    with Deriver(args.tenant, batch=args.batch_size) as deriver:
        if args.once:
            stats = deriver.drain()
            print(f"pgrecall deriver: {stats.completed} tasks completed, {stats.memories} memories written, "
                  f"{stats.failed} failed")
            for error in stats.errors:
                print(f"  {error}")
            return 0 if not stats.failed else 1
        print(f"pgrecall deriver {deriver.name}: deriving first-person statements in tenant {args.tenant} "
              "(Ctrl-C stops)", flush=True)
        try:
            deriver.run_forever()
        except KeyboardInterrupt:
            pass
    return 0


def cmd_embeddings(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    import pgrecall

    # Reading the status is the app's; queueing a rebuild or switching versions the admin's.
    with pgrecall.connect(tenant=args.tenant, role="app" if args.action == "status" else "admin") as mem:
        status = mem.embedding_status()
        if args.action == "status":
            print(f"model {status.model}, input version {status.input_version}: {status.current} current, "
                  f"{status.stale} stale, {status.queued} queued ({status.leased} leased)")
            print(f"passages: {status.passages_current} current, {status.passages_stale} stale, "
                  f"{status.passages_queued} queued")
            return 0
        if args.model or args.input_version:
            queued = mem.set_embedding_version(args.model or status.model, args.input_version or status.input_version)
        else:
            queued = mem.rebuild_embeddings(args.all)
        status = mem.embedding_status()
    from .worker import Worker

    worker = Worker(args.tenant, batch_size=args.batch_size)
    with tqdm(total=status.queued + status.passages_queued, desc="embedding", unit="memory",
              disable=args.quiet) as bar:
        stats = worker.drain(progress=bar.update)
    print(f"pgrecall: queued {queued}, embedded {stats.stored} memories and {stats.passages_stored} passages")
    return 0


def cmd_erase(args: argparse.Namespace) -> int:
    import pgrecall

    if args.observation:
        scope, _, offset = args.observation.rpartition(":")
        if not scope or not offset.isdigit():
            raise errors.InvalidArgument(f"--observation takes SCOPE:OFFSET, not {args.observation!r}")
        selector = {"observation": {"scope": scope, "offset": int(offset)}}
    else:
        selector = {k: v for k, v in (("data_subject", args.subject), ("peer", args.peer), ("scope", args.scope)) if v}
    with pgrecall.connect(tenant=args.tenant, role="admin") as mem:
        receipt = mem.erase(selector, reason=args.reason, actor=args.actor, requested_by=args.requested_by)
    completed = receipt.completed_at.isoformat() if receipt.completed_at else None
    print(f"erasure request {receipt.id} for {json.dumps(receipt.selector)}: "
          f"{receipt.observations_erased} observations erased at {completed} "
          f"by {receipt.actor} (role {receipt.actor_role})")
    residual, erased = receipt.residual or {}, receipt.rows_erased or {}
    width = max([len("projection kind")] + [len(k) for k in residual])
    print(f"  {'projection kind':<{width}}   erased  residual")
    for kind in sorted(residual):
        print(f"  {kind:<{width}}  {erased.get(kind, '-')!s:>7}  {residual[kind]:>8}")
    clean = receipt.clean
    if not clean:
        print("  RESIDUAL IS NOT ZERO: erasure incomplete")
    elif receipt.observations_erased == 0:
        print("  nothing matched the selector: no observation was erased")
    else:
        print("  residual is zero: everything derived is gone")
    return 0 if clean else 2


def cmd_demo(args: argparse.Namespace) -> int:
    from . import demo

    return demo.main(args)


def _default_actor() -> str:
    import getpass

    try:
        return os.environ.get("PGRECALL_ACTOR") or getpass.getuser()
    except Exception:  # no user name (a container without a passwd entry)
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pgrecall",
        description="Agent memory inside PostgreSQL. Uses PGRECALL_DSN if set, else an embedded server "
        "under PGRECALL_HOME.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("server", help="the embedded PostgreSQL server")
    p.add_argument("action", choices=["start", "stop", "status", "uri"])
    p.add_argument("--tenant", help="with uri: the URI of one of this tenant's login roles")
    p.add_argument("--role", choices=["app", "worker", "admin"], default="app",
                   help="with uri --tenant: app (the agent, default), worker (queued work) or admin (back office)")
    p.set_defaults(func=cmd_server)

    p = sub.add_parser("tenant", help="create, upgrade, list or drop tenants")
    p.add_argument("action", choices=["create", "upgrade", "drop", "list", "settings"])
    p.add_argument("name", nargs="?")
    p.set_defaults(func=cmd_tenant)

    p = sub.add_parser("sql", help="print a psql script that installs or upgrades a tenant")
    p.add_argument("--tenant", required=True)
    p.set_defaults(func=cmd_sql)

    def tenant_args(p: argparse.ArgumentParser, principal: bool = True) -> None:
        p.add_argument("--tenant", default=os.environ.get("PGRECALL_TENANT", "demo"),
                       help="tenant (default: $PGRECALL_TENANT or demo)")
        if principal:
            p.add_argument("--as", dest="principal", default=os.environ.get("PGRECALL_PRINCIPAL"),
                           required=not os.environ.get("PGRECALL_PRINCIPAL"),
                           help="the peer acting (default: $PGRECALL_PRINCIPAL)")
        p.add_argument("--scopes", type=lambda v: [s for s in v.split(",") if s], default=["default"],
                       help="authorised scopes, comma-separated (default: default)")

    p = sub.add_parser("peer", help="add a peer (a person, agent or other participant)")
    p.add_argument("action", choices=["add"])
    p.add_argument("name")
    p.add_argument("--kind", default="human", choices=["human", "agent", "other"])
    p.add_argument("--tenant", default=os.environ.get("PGRECALL_TENANT", "demo"))
    p.set_defaults(func=cmd_add)

    p = sub.add_parser("scope", help="add a scope (a project inside the tenant)")
    p.add_argument("action", choices=["add"])
    p.add_argument("name")
    p.add_argument("--description")
    p.add_argument("--tenant", default=os.environ.get("PGRECALL_TENANT", "demo"))
    p.set_defaults(func=cmd_add)

    p = sub.add_parser("remember", help="remember a text (appends it as the observation unless --evidence is given)")
    tenant_args(p)
    p.add_argument("text")
    p.add_argument("--purpose", dest="purposes", action="append", required=True,
                   choices=["converse", "act", "personalize", "review"], help="repeatable")
    p.add_argument("--evidence", type=int, action="append", help="log offset that stated it; repeatable")
    p.add_argument("--scope", help="scope to write (default: the first authorised one)")
    p.add_argument("--audience", help="the one peer who may see it (default: everyone in the scope)")
    p.add_argument("--kind", default="note", choices=["note", "fact", "decision", "summary"])
    p.add_argument("--title")
    p.add_argument("--about", action="append", default=[], help="entity name; repeatable")
    p.add_argument("--role", default="user", help="role of the appended observation (default: user)")
    p.set_defaults(func=cmd_remember)

    p = sub.add_parser("read", help="read one memory with its provenance")
    tenant_args(p)
    p.add_argument("memory_id", type=int)
    p.add_argument("--purpose", required=True, choices=["converse", "act", "personalize", "review"])
    p.add_argument("--include-superseded", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_read)

    p = sub.add_parser("forget", help="invalidate a memory, with a reason")
    tenant_args(p)
    p.add_argument("memory_id", type=int)
    p.add_argument("--reason", required=True)
    p.set_defaults(func=cmd_forget)

    p = sub.add_parser("import", help="load a conversation (JSON lines) as observations")
    tenant_args(p, principal=False)
    p.add_argument("file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("worker", help="embed queued memories (LISTEN/NOTIFY wakes it)")
    tenant_args(p, principal=False)
    p.add_argument("--once", action="store_true", help="drain the queue and exit")
    p.add_argument("--batch-size", type=int, default=64)
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser("deriver", help="process the derivation queue with the first-person extractor")
    tenant_args(p, principal=False)
    p.add_argument("--once", action="store_true", help="drain the queue and exit")
    p.add_argument("--batch-size", type=int, default=16)
    p.set_defaults(func=cmd_deriver)

    p = sub.add_parser("embeddings", help="embedding status, or re-embed (rebuild) with a progress bar")
    tenant_args(p, principal=False)
    p.add_argument("action", choices=["status", "rebuild"])
    p.add_argument("--all", action="store_true", help="re-embed every memory, not only missing or stale ones")
    p.add_argument("--model", help="switch the embedding model name (queues everything)")
    p.add_argument("--input-version", type=int, choices=[1, 2], help="switch the embedded text version")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_embeddings)

    p = sub.add_parser("erase", help="erase a data subject, a peer, a scope or one observation (as the tenant's "
                                     "admin role); prints the receipt")
    tenant_args(p, principal=False)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--subject", help="a data subject id")
    which.add_argument("--peer")
    which.add_argument("--scope")
    which.add_argument("--observation", help="SCOPE:OFFSET")
    p.add_argument("--reason", required=True)
    p.add_argument("--requested-by", help="whose request it is (e.g. the data subject's ticket)")
    p.add_argument("--actor", default=_default_actor(),
                   help="who runs the erasure, recorded in the receipt (default: $PGRECALL_ACTOR or your user name)")
    p.set_defaults(func=cmd_erase)

    p = sub.add_parser("demo", help="what `make run` shows")
    p.add_argument("--tenant", default="demo")
    p.set_defaults(func=cmd_demo)
    return parser


def importer_error() -> type[Exception]:
    from .importer import ImportFileError

    return ImportFileError


def one_line(text: str) -> str:
    """``text`` fit for one terminal line: line breaks, control and format characters (ESC, bidi
    overrides, ...) and unusual spaces are shown escaped, never sent raw to the terminal."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text.strip())


def _fail(message: str, hint: str | None = None) -> int:
    print(one_line(message) + (f" (hint: {one_line(hint)})" if hint else ""), file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "tenant" and args.action != "list" and args.name is None:
        parser.error(f"tenant {args.action} needs a NAME")
    try:
        # Every command that names a tenant, checked before anything connects or composes SQL.
        if getattr(args, "tenant", None) is not None:
            names.check_tenant_name(args.tenant)
        if args.command == "tenant" and args.action != "list":
            names.check_tenant_name(args.name)
        result: int = args.func(args)
        return result
    except errors.PgrecallError as exc:
        return _fail(f"pgrecall: error: {exc.args[0] if exc.args else exc}", exc.hint)
    except importer_error() as exc:
        return _fail(f"pgrecall: error: {exc}")
    except psycopg.OperationalError as exc:
        return _fail(f"pgrecall: cannot reach the database: {exc}")
    except psycopg.Error as exc:  # one line, not a traceback; ours by its class, others with their SQLSTATE
        ours = errors.translate(exc)
        if isinstance(ours, errors.PgrecallError):
            return _fail(f"pgrecall: error: {ours.args[0]}", ours.hint)
        return _fail(f"pgrecall: database error {exc.sqlstate or ''}: {exc.diag.message_primary or exc}",
                     exc.diag.message_hint)


if __name__ == "__main__":
    sys.exit(main())
