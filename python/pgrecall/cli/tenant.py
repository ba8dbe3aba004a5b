"""pgrecall tenant, peer and scope: creating, upgrading, listing and dropping tenants, and what is in them."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from .. import errors, retry
from ._common import EXIT_USAGE, PEER_KINDS, Subparsers, _fail, _print_json, _print_rows


def cmd_tenant(args: argparse.Namespace) -> int:
    from .. import db

    if args.action in ("dump", "restore"):
        return _dump_or_restore(args)
    with db.connect_admin(autocommit=True) as conn:
        if args.action == "list":
            return _list(conn, args)
        if args.action == "settings":
            return _settings(conn, args)
        if args.action == "move":
            return _move(conn, args)
        if args.action == "rebalance":
            return _rebalance(conn, args)
        if args.action == "drop":
            if not _drop_confirmed(conn, args):
                return 1
            _call(conn, "select pgrecall.drop_tenant(%s)", (args.name,))
            done: dict[str, Any] = {"tenant": args.name, "dropped": True}
            said = f"pgrecall: dropped tenant {args.name}"
        elif args.action == "create":
            _ensure_control(conn)
            _call(conn, "select pgrecall.create_tenant(%s)", (args.name,))
            # The scope a command writes when none is named, so that a new tenant takes turns at once.
            _call(conn, sql.SQL("select {}.add_scope('default', %s)").format(sql.Identifier(args.name)),
                  ("the scope commands write when --scopes names none",))
            done = {"tenant": args.name, "created": True, "scopes": ["default"]}
            said = f"pgrecall: created tenant {args.name}, with scope default"
        else:
            from .. import install

            applied = install.install(conn, [args.name])
            done = {"tenant": args.name, "applied": [n for _, n in applied]}
            said = f"pgrecall: tenant {args.name}: " + (", ".join(n for _, n in applied) or "already current")
    if args.json:
        return _print_json(done)
    print(said)
    return 0


def _dump_or_restore(args: argparse.Namespace) -> int:
    """tenant dump NAME FILE, tenant restore FILE [--as NAME] (pgrecall.tenant_dump)."""
    from .. import db, tenant_dump

    if args.action == "dump":
        if not args.name or not args.file:
            return _fail("pgrecall tenant dump: error: name the tenant and the file, e.g. pgrecall tenant dump "
                         "acme acme.dump", code=EXIT_USAGE)
        header = tenant_dump.dump_to_file(db.admin_conninfo(), args.name, Path(args.file))
        if args.json:
            return _print_json(header)
        print(f"pgrecall: dumped tenant {args.name} (schema version {header['schema_version']}, taken at "
              f"{header['taken_at']}) to {args.file}: {sum(header['rows'].values())} rows in "
              f"{len(header['rows'])} tables")
        return 0
    if not args.name:
        return _fail("pgrecall tenant restore: error: name the dump file, e.g. pgrecall tenant restore acme.dump "
                     "--as acme2", code=EXIT_USAGE)
    try:
        receipt = tenant_dump.restore_from_file(db.admin_conninfo(), Path(args.name), args.as_name)
    except errors.TenantExists as exc:
        if "upgrade_tenant" not in (exc.hint or ""):  # a schema or role of that name: its own hint stands
            raise
        said = re.search(r"tenant '(.+)' already exists", exc.args[0] if exc.args else "")
        name = args.as_name or (said.group(1) if said else "NAME")
        raise errors.TenantExists(exc.args[0], hint=(
            f"Restore it under another name (--as OTHER), or drop tenant {name} first "
            f"(pgrecall tenant drop {name}); nothing was restored.")) from exc
    if args.json:
        return _print_json(receipt)
    source = receipt["from"]
    replayed = [e for e in receipt["erasures"] if e["outcome"] == "replayed"]
    print(f"pgrecall: restored tenant {receipt['tenant']} from the dump of {source['tenant']} taken at "
          f"{source['taken_at']}: {sum(receipt['rows'].values())} rows; {len(replayed)} later erasure(s) replayed")
    for e in receipt["erasures"]:
        replay = f" as erasure {e['request_id']} here, {e['observations_erased']} observation(s) erased"
        print(f"  erasure {e['source_request_id']} of tenant {source['tenant']} ({e['kind']}, completed "
              f"{e['erased_at']}): {e['outcome']}" + (replay if e["outcome"] == "replayed" else ""))
    return 0


def _call(conn: psycopg.Connection[Any], statement: Any, params: tuple[Any, ...]) -> None:
    try:
        conn.execute(statement, params)
    except psycopg.Error as exc:
        raise errors.translate(exc) from exc


def _list(conn: psycopg.Connection[Any], args: argparse.Namespace) -> int:
    if not _control_installed(conn):
        if args.json:
            return _print_json([])
        print("pgrecall: no tenants (pgrecall is not installed in this database)")
        return 0
    if args.json:
        return _print_json(_tenant_list(conn))
    rows = conn.execute("select name, schema_version, latest_version, app_role, created_at::timestamp(0) "
                        "from pgrecall.list_tenants()").fetchall()
    _print_rows(["tenant", "version", "latest", "app_role", "created_at"], rows)
    return 0


def _move(conn: psycopg.Connection[Any], args: argparse.Namespace) -> int:
    """citus_schema_move of the tenant's schema to another worker, while the tenant stays in use."""
    host, _, port = (args.to or "").rpartition(":")
    if not host or not port.isdigit():
        return _fail(f"pgrecall: error: tenant move needs --to HOST:PORT of a Citus worker, not {args.to!r}",
                     code=2)
    node = _run_again_when_cancelled(conn, "select pgrecall.move_tenant(%s, %s, %s)", (args.name, host, int(port)),
                                     f"the move of {args.name}")
    if args.json:
        return _print_json({"tenant": args.name, "node": node[0] if node else args.to})
    print(f"pgrecall: tenant {args.name} is on {node[0] if node else args.to}")
    return 0


# Waits before the second, third and fourth attempt of a move that a deadlock cancelled.
MOVE_PAUSES_S = (1.0, 3.0, 9.0)


def _run_again_when_cancelled(conn: psycopg.Connection[Any], query: str, params: tuple[Any, ...], what: str,
                              all_rows: bool = False) -> Any:
    """A move or rebalance, run again when it lost a deadlock to the tenant's own writers: at its last step
    citus_schema_move locks the tenant's shards in their order, a writer's transaction takes them in the order
    of its statements, and Citus cancels one side (40P01). A cancelled move rolled back whole (the tenant stays
    where it was), so trying again is what the operator would do. The cancelled attempt's copy on the target
    is dropped by Citus's cleaner, which may not have got it yet when the next attempt starts: that attempt
    refuses to start (shard_transfer.c, ErrorIfCleanupRecordForShardExists) and is run again after a pause."""
    for attempt, pause_s in enumerate((*MOVE_PAUSES_S, None), start=1):
        try:
            cur = conn.execute(query, params)
            return cur.fetchall() if all_rows else cur.fetchone()
        except psycopg.Error as exc:
            orphan_left = _previous_copy_not_cleaned_up(exc, conn)
            if pause_s is None or not (orphan_left or retry.may_run_again(exc, conn)):
                raise
            why = ("found the copy its previous attempt left not yet cleaned up" if orphan_left
                   else "lost a deadlock to the tenant's writers and was rolled back")
            print(f"pgrecall: {what} {why} (attempt {attempt} of {len(MOVE_PAUSES_S) + 1}); trying again",
                  file=sys.stderr)
            time.sleep(retry.jittered(pause_s))
    raise AssertionError("unreachable: the last attempt returns or raises")


def _previous_copy_not_cleaned_up(exc: psycopg.Error, conn: psycopg.Connection[Any]) -> bool:
    """Citus refused to start a move because an earlier, cancelled one left a shard copy its cleaner has not
    dropped yet (XX000; nothing was moved)."""
    message = exc.diag.message_primary or ""
    return (exc.sqlstate == "XX000" and "leftover from the previous move could not be cleaned up" in message
            and conn.autocommit and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE)


def _rebalance(conn: psycopg.Connection[Any], args: argparse.Namespace) -> int:
    """Citus's rebalancer over the workers (after adding one): each tenant moves whole, online."""
    try:
        rows = _run_again_when_cancelled(conn, "select tenant, node from pgrecall.rebalance_tenants()", (),
                                         "the rebalance", all_rows=True)
    except psycopg.Error as exc:
        raise errors.translate(exc) from exc
    if args.json:
        return _print_json([{"tenant": t, "node": n} for t, n in rows])
    _print_rows(["tenant", "node"], rows)
    return 0


def _setting(text: str) -> tuple[str, Any]:
    """KEY=VALUE, the value read as JSON when it is (a number, true, a quoted string), else as a string."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"not KEY=VALUE: {text!r}")
    try:
        return key, json.loads(raw)
    except json.JSONDecodeError:
        return key, raw


def _settings(conn: psycopg.Connection[Any], args: argparse.Namespace) -> int:
    changed = []
    for key, value in args.set or []:
        with conn.cursor() as cur:
            try:
                row = cur.execute("select pgrecall.set_tenant_setting(%s, %s, %s)",
                                  (args.name, key, Jsonb(value))).fetchone()
            except psycopg.Error as exc:
                raise errors.translate(exc) from exc
        changed.append({"key": key, "value": row[0] if row else value})
    if args.json:
        settings = _tenant_settings(conn, args.name)
        return _print_json({"changed": changed, "settings": settings} if args.set else settings)
    for c in changed:
        print(f"pgrecall: tenant {args.name}: {c['key']} is now {json.dumps(c['value'])}")
    if not args.set:
        rows = conn.execute("select key, value::text, description from pgrecall.tenant_settings(%s)",
                            (args.name,)).fetchall()
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

    role = "admin" if args.command == "scope" and args.action == "passages" else "app"
    with pgrecall.connect(tenant=args.tenant, role=role) as mem:
        if args.command == "peer":
            return _peer(mem, args)
        return _scope(mem, args)


def _needs_name(args: argparse.Namespace) -> None:
    if not args.name:
        raise errors.InvalidArgument(f"pgrecall {args.command} {args.action} needs a NAME",
                                     hint=f"pgrecall {args.command} {args.action} NAME --tenant {args.tenant}")


def _peer(mem: Any, args: argparse.Namespace) -> int:
    _needs_name(args)
    if args.action == "add":
        peer_id = mem.add_peer(args.name, args.kind)
        if args.json:
            return _print_json({"peer": args.name, "kind": args.kind, "id": peer_id})
        print(f"peer {args.name} ({args.kind}) is id {peer_id} in tenant {args.tenant}")
        return 0
    if args.observed_globally is not None:
        observed = None if args.observed_globally == "default" else args.observed_globally == "yes"
        c = mem.set_peer_config(args.name, observed_globally=observed)
    else:
        c = mem.peer_config(args.name)
    if args.json:
        return _print_json(c)
    follows = " (the tenant's default)" if c.follows_tenant_default else ""
    print(f"peer {c.peer} ({c.kind}): a global representation is "
          f"{'derived' if c.observed_globally else 'not derived'}{follows}")
    return 0


def _scope(mem: Any, args: argparse.Namespace) -> int:
    if args.action == "list":
        found = mem.list_scopes()
        if args.json:
            return _print_json(found)
        _print_rows(["scope", "description"], [(s.name, s.description or "") for s in found])
        return 0
    _needs_name(args)
    if args.action == "add":
        # add_scope keeps a scope that is there; say which it was, so "exists" is never read as "already existed"
        known = {s.name for s in mem.list_scopes()}
        mem.add_scope(args.name, args.description)
        if args.json:
            return _print_json({"scope": args.name, "description": args.description})
        if args.name not in known:
            print(f"scope {args.name} added to tenant {args.tenant}")
        else:
            updated = "; its description is now the one given" if args.description is not None else ""
            print(f"scope {args.name} exists in tenant {args.tenant}{updated}")
        return 0
    if args.embed is None:
        raise errors.InvalidArgument("pgrecall scope passages needs --embed all, messages, none or default",
                                     hint=f"pgrecall scope passages {args.name} --embed all --tenant {args.tenant}")
    policy = None if args.embed == "default" else args.embed
    row = mem.set_scope_passage_embedding(args.name, policy)
    if args.json:
        return _print_json(row)
    print(f"scope {args.name} embeds {row.policy} passages"
          f"{' (the tenant default)' if policy is None else ''}: {row.queued} queued, {row.dropped} dropped")
    return 0


def add_tenant(sub: Subparsers) -> None:
    p = sub.add_parser("tenant", help="create, upgrade, list, drop, move, rebalance, dump or restore tenants")
    p.add_argument("action", choices=["create", "upgrade", "drop", "list", "settings", "move", "rebalance", "dump",
                                      "restore"])
    p.add_argument("name", nargs="?", help="the tenant (with restore: the dump file)")
    p.add_argument("file", nargs="?", help="with dump: the file to write")
    p.add_argument("--as", dest="as_name", metavar="NAME",
                   help="with restore: the tenant's name here (default: the dumped tenant's); later erasures of "
                        "the dumped tenant are replayed either way")
    p.add_argument("--yes", action="store_true", help="with drop: do not ask for confirmation")
    p.add_argument("--set", action="append", type=_setting, metavar="KEY=VALUE",
                   help="with settings: change one setting (repeatable), e.g. --set max_peers_in_session=20")
    p.add_argument("--json", action="store_true", help="one JSON document")
    p.add_argument("--to", metavar="HOST:PORT", help="with move: the Citus worker to move the tenant to "
                   "(citus_schema_move, while the tenant stays in use)")
    p.set_defaults(func=cmd_tenant)


def add_peer(sub: Subparsers) -> None:
    p = sub.add_parser("peer", help="add a peer (a person, agent or other participant), or show and set its "
                                    "settings (config)")
    p.add_argument("action", choices=["add", "config"])
    p.add_argument("name")
    p.add_argument("--kind", default="human", choices=PEER_KINDS, help="with add (default: human)")
    p.add_argument("--observed-globally", choices=["yes", "no", "default"],
                   help="with config: whether a global representation of the peer is derived (default: the "
                        "tenant's setting)")
    p.add_argument("--tenant", default=os.environ.get("PGRECALL_TENANT", "demo"))
    p.add_argument("--json", action="store_true", help="one JSON document")
    p.set_defaults(func=cmd_add)


def add_scope(sub: Subparsers) -> None:
    p = sub.add_parser("scope", help="add a scope (a project inside the tenant), list them, or choose which of a "
                                     "scope's passages get vectors (passages)")
    p.add_argument("action", choices=["add", "list", "passages"])
    p.add_argument("name", nargs="?")
    p.add_argument("--description", help="with add")
    p.add_argument("--embed", choices=["all", "messages", "none", "default"],
                   help="with passages: which passages get vectors for semantic search (admin role; default: the "
                        "tenant's passage_embedding setting)")
    p.add_argument("--tenant", default=os.environ.get("PGRECALL_TENANT", "demo"))
    p.add_argument("--json", action="store_true", help="one JSON document")
    p.set_defaults(func=cmd_add)
