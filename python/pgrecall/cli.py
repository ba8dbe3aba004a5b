"""The ``pgrecall`` command: server, tenants, the psql install script, and the demo."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.rows import dict_row

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
        if info.pending_restart:
            print(f"pgrecall: {', '.join(info.pending_restart)} take effect after a restart: "
                  "pgrecall server stop && pgrecall server start", file=sys.stderr)
    elif args.action == "stop":
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
    from . import install

    install.install(conn)


def cmd_sql(args: argparse.Namespace) -> int:
    from . import sources

    sys.stdout.write(sources.psql_script(args.tenant))
    return 0


def _memory(args: argparse.Namespace) -> Memory:
    import pgrecall

    mem = pgrecall.connect(tenant=args.tenant, principal=args.principal, scopes=args.scopes)
    if args.scopes is None:  # recall, search, facts without --scopes: every scope of the tenant
        mem.scopes = [s.name for s in mem.list_scopes()]
        if not mem.scopes:
            mem.close()
            raise errors.ScopeNotAuthorised(f"tenant {args.tenant!r} has no scopes",
                                            hint=f"Add one: pgrecall scope add default --tenant {args.tenant}")
    return mem


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


def _one_transaction(args: argparse.Namespace) -> Any:
    """A Memory whose calls share one transaction, committed when the block ends without an error: a turn a
    command appends and the write that cites it are one outcome (a refused write leaves no turn)."""
    from contextlib import contextmanager

    import pgrecall

    from . import db
    from .driver._handles import open_connection

    @contextmanager
    def opened() -> Any:
        conn = open_connection(db.tenant_conninfo(args.tenant, "app"), args.tenant, "app")
        try:
            with conn.transaction():
                yield pgrecall.connect(tenant=args.tenant, principal=args.principal, scopes=args.scopes, conn=conn)
        finally:
            conn.close()

    return opened()


def _cited(mem: Memory, args: argparse.Namespace, said: str) -> tuple[list[int], int | None]:
    """The offsets a write cites (--evidence) and, when none are given, what was said appended as a note
    and cited: by hand, what you ask to remember is itself what was said. Returns the offsets and the
    appended one (None when nothing was appended). Call it inside _one_transaction, with the write."""
    if args.evidence:
        return args.evidence, None
    appended = mem.append(said, role=args.role, kind="note", scope=args.scope)
    return [appended], appended


def cmd_remember(args: argparse.Namespace) -> int:
    with _memory(args) as mem:
        if args.evidence:
            r = mem.remember(args.text, evidence=args.evidence, purposes=args.purposes, scope=args.scope,
                             audience=args.audience, kind=args.kind, title=args.title, about=args.about,
                             widening_reason=args.widening_reason)
            evidence, appended = list(args.evidence), None
        else:
            # The words and the memory in one call (remember_said): nothing kept, no turn left.
            said = mem.remember(args.text, said=args.text, said_role=args.role, purposes=args.purposes,
                                scope=args.scope, audience=args.audience, kind=args.kind, title=args.title,
                                about=args.about, widening_reason=args.widening_reason)
            appended = getattr(said, "log_offset", None)
            r, evidence = said, ([appended] if appended is not None else [])
    # A duplicate is kept already (it names the memory); anything else not created was kept nowhere.
    kept = r.created or (r.reason or "").startswith("duplicate")
    code = 0 if kept else EXIT_NOTHING_KEPT
    if args.json:
        _print_json({"memory_id": r.memory_id, "status": r.status, "reason": r.reason,
                     "scope": args.scope or args.scopes[0], "evidence": evidence, "appended_offset": appended})
        return code
    if appended is not None:
        print(f"appended observation at offset {appended} of scope {args.scope or args.scopes[0]}")
    if r.created:
        print(f"remembered as memory {r.memory_id}")
    else:
        print(f"nothing remembered ({r.reason})" + (f": memory {r.memory_id}" if r.memory_id else ""))
    return code


def cmd_read(args: argparse.Namespace) -> int:
    with _memory(args) as mem:
        rec = mem.read(args.memory_id, purpose=args.purpose, include_superseded=args.include_superseded)
    if args.json:
        return _print_json(rec)
    print(f"memory {rec.id} (revision {rec.revision}, {rec.kind}, {rec.origin}) in scope {rec.scope}")
    if rec.title:
        print(f"  title:     {rec.title}")
    print(f"  body:      {rec.body}")
    print(f"  audience:  {rec.audience or 'everyone in the scope'}; purposes: {', '.join(rec.purposes)}")
    if rec.superseded_by:
        print(f"  superseded by memory {rec.superseded_by}")
    for o in rec.provenance.observations:
        revisions = ", ".join(map(str, o.corrections))
        cited = f" [cited by the correction to revision {revisions}]" if revisions else ""
        if o.withheld:
            print(f"  from {o.scope}#{o.offset}: withheld (a turn you may not see){cited}")
        else:
            print(f"  from {o.scope}#{o.offset} ({o.actor}, {o.source_role}): {o.text}{cited}")
    if rec.provenance.widening_reason:
        print(f"  widened past its turns: {rec.provenance.widening_reason}")
    for m in rec.provenance.memories:
        print(f"  from memory {m.id}")
    if rec.provenance.hidden_sources:
        print(f"  and {rec.provenance.hidden_sources} source memories you may not see")
    for h in rec.revisions:
        why = [h.reason] if h.reason else []
        if h.evidence:
            why.append(f"evidence {', '.join(f'{rec.scope}#{o}' for o in h.evidence)}")
        print(f"  revision {h.revision} was: {h.body}" + (f" ({'; '.join(why)})" if why else ""))
    return 0


def cmd_correct(args: argparse.Namespace) -> int:
    with _memory(args) as mem:
        revision = mem.correct(args.memory_id, args.text, revision=args.revision, evidence=args.evidence,
                               title=args.title, reason=args.reason, widening_reason=args.widening_reason)
    if args.json:
        return _print_json({"memory_id": args.memory_id, "revision": revision, "evidence": args.evidence})
    cited = f", citing offset{'s' if len(args.evidence) > 1 else ''} {', '.join(map(str, args.evidence))}" \
        if args.evidence else ""
    print(f"corrected memory {args.memory_id} (revision {revision}){cited}")
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    with _memory(args) as mem:
        revision = mem.forget(args.memory_id, reason=args.reason)
    if args.json:
        return _print_json({"memory_id": args.memory_id, "revision": revision, "forgotten": True})
    print(f"forgot memory {args.memory_id} (revision {revision})")
    return 0


def _print_json(value: Any) -> int:
    """One JSON document with stable keys: what --json prints."""
    from .render import dumps

    print(dumps(value))
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    from .driver import FactProvenance
    from .render import count, jsonable, source_lines

    with _memory(args) as mem:
        r = mem.recall(args.query, purpose=args.purpose, mode=args.mode, limit=args.limit,
                       include_superseded=args.include_superseded)
    if args.json:
        return _print_json({"items": r.items, "meta": r.meta})
    m = r.meta
    dense = "dense arm on" if m.dense_available else f"dense arm off ({m.dense_reason})"
    dropped = f"; dropped terms {', '.join(m.dropped_terms)}" if m.dropped_terms else ""
    print(f"{count(m.fused_count, 'candidate')} after the permission walk ({m.lexical_count} lexical, "
          f"{m.dense_count} dense, {m.fact_count} facts); {dense}{dropped}")
    if not r.items:
        print("nothing this principal may see matches")
    for item in r.items:
        p = item.provenance
        if isinstance(p, FactProvenance):
            print(f"{item.rank}. [fact {item.fact_id}] {item.body}   (valid {_range_text(p.valid)})")
            for e in p.evidence:
                print(f"    quote from {e.scope}#{e.offset}: withheld (a turn you may not see)" if e.withheld
                      else f"    quote from {e.scope}#{e.offset}: \"{e.quote}\"")
            continue
        why = [f"lexical #{item.lexical_rank}"] if item.lexical_rank else []
        if item.dense_rank:
            why.append(f"dense #{item.dense_rank}, cosine {item.cosine:.2f}")
        print(f"{item.rank}. [memory {item.memory_id}, {item.kind}] {item.body}   ({'; '.join(why)})")
        for line in source_lines(jsonable(p)):
            print(line)
    return 0


def _range_text(value: Any) -> str:
    """A validity range from JSON ('[a,b)') or psycopg, as 'from A' or 'A to B'."""
    from .render import jsonable

    def short(stamp: str | None) -> str | None:  # to the minute, as a person reads a date
        return stamp[:16].replace("T", " ") if stamp else stamp

    value = jsonable(value)
    if isinstance(value, dict):
        lower, upper = value.get("from"), value.get("to")
    elif isinstance(value, str) and "," in value:
        lower, upper = (x.strip(' "[]()') or None for x in value.split(",", 1))
    else:
        return str(value)
    lower, upper = short(lower), short(upper)
    return f"from {lower}" if not upper else f"{lower or 'always'} to {upper}"


def cmd_search(args: argparse.Namespace) -> int:
    from .render import clip

    with _memory(args) as mem:
        found = mem.search_messages(args.query, mode=args.mode, session_id=args.session, peer=args.peer,
                                    limit=args.limit)
    if args.json:
        return _print_json({"items": found.items, "meta": found.meta})
    semantic = "semantic arm on" if found.semantic_available else \
        f"semantic arm off ({found.meta.semantic_reason or 'not asked'})"
    print(f"{len(found.items)} passages; {semantic}")
    for hit in found.items:
        session = f", session {hit.session_id}" if hit.session_id else ""
        print(f"{hit.rank}. {hit.scope}#{hit.log_offset} ({hit.actor}, {hit.source_role}, "
              f"{hit.occurred_at:%Y-%m-%d %H:%M}{session}): {clip(hit.body)}")
    return 0


def cmd_supersede(args: argparse.Namespace) -> int:
    with _one_transaction(args) as mem:
        evidence, appended = _cited(mem, args, args.said or args.text)
        new_id = mem.supersede(args.memory_id, args.text, revision=args.revision, evidence=evidence,
                               title=args.title, about=args.about or None, widening_reason=args.widening_reason)
    if args.json:
        return _print_json({"memory_id": new_id, "superseded": args.memory_id, "evidence": evidence,
                            "appended_offset": appended})
    if appended is not None:
        print(f"appended observation at offset {appended} of scope {args.scope or args.scopes[0]}")
    print(f"memory {args.memory_id} is superseded by memory {new_id}, citing offset"
          f"{'s' if len(evidence) > 1 else ''} {', '.join(map(str, evidence))}")
    return 0


def cmd_derive(args: argparse.Namespace) -> int:
    with _memory(args) as mem:
        memory_id = mem.derive(args.sources, args.text, kind=args.kind, title=args.title, about=args.about,
                               widening_reason=args.widening_reason)
    if args.json:
        return _print_json({"memory_id": memory_id, "sources": args.sources})
    print(f"derived memory {memory_id} from memories {', '.join(map(str, args.sources))}")
    return 0


def cmd_facts(args: argparse.Namespace) -> int:
    with _memory(args) as mem:
        rows = mem.facts_as_of(args.subject, args.predicate, valid_at=args.valid_at, known_at=args.known_at,
                               purpose=args.purpose)
    if args.json:
        return _print_json({"subject": args.subject, "facts": rows})
    if not rows:
        print(f"no facts about {args.subject} that this principal may see")
    for f in rows:
        view = f"; {f.observer}'s view" if f.observer else ""
        print(f"[fact {f.fact_id}] {f.subject} {f.predicate} {f.object}   (valid {_range_text(f.valid)}; "
              f"known {_range_text(f.known)}; confidence {f.confidence:g}{view})")
        for e in f.evidence:
            print(f"    quote from {e.scope}#{e.offset}: withheld (a turn you may not see)" if e.withheld
                  else f"    quote from {e.scope}#{e.offset} ({e.source_role}): \"{e.quote}\"")
    return 0


def cmd_bundle(args: argparse.Namespace) -> int:
    from .agent import AgentMemory

    agent = AgentMemory(args.tenant, args.principal, args.scopes, purpose=args.purpose)
    try:
        bundle = agent.bundle(session=args.session, recent=args.recent, entities=args.entities)
    finally:
        agent.close()
    if args.json:
        return _print_json({"tenant": args.tenant, "principal": args.principal, "scopes": agent.scopes,
                            "purpose": args.purpose, "session": args.session, **bundle})
    from .render import bundle_text

    sys.stdout.write(bundle_text(bundle, principal=args.principal, tenant=args.tenant, scopes=agent.scopes,
                                 purpose=args.purpose, session=args.session))
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from .mcp_server import serve

    return serve(args.tenant, args.principal, args.scopes, args.purpose, http=args.http,
                 preload=not args.no_preload)


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
        print(f"pgrecall worker {worker.name}: stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
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
            print(f"pgrecall deriver {deriver.name}: stopped", file=sys.stderr)
            return EXIT_INTERRUPTED
    return 0


def cmd_embeddings(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    import pgrecall

    # Reading the status is the app's; queueing a rebuild or switching versions the admin's.
    with pgrecall.connect(tenant=args.tenant, role="app" if args.action == "status" else "admin") as mem:
        status = mem.embedding_status()
        if args.action == "status":
            if args.json:
                return _print_json(status)
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

    from . import db
    from .driver import admin

    if args.observation:
        scope, _, offset = args.observation.rpartition(":")
        if not scope or not offset.isdigit():
            raise errors.InvalidArgument(f"--observation takes SCOPE:OFFSET, not {args.observation!r}")
        selector = {"observation": {"scope": scope, "offset": int(offset)}}
    else:
        selector = {k: v for k, v in (("data_subject", args.subject), ("peer", args.peer), ("scope", args.scope)) if v}
    vacuum_problem: errors.NotPermitted | None = None
    flush_problem: errors.PgrecallError | None = None
    flushed = None
    with pgrecall.connect(tenant=args.tenant, role="admin") as mem:
        receipt = mem.erase(selector, reason=args.reason, actor=args.actor, requested_by=args.requested_by)
        # Committed: now the tables it touched lose the erased values from their statistics (and, if asked,
        # their dead rows, or with --rewrite every page of theirs), which cannot happen inside the erasure's
        # own transaction.
        vacuumed: list[str] = []
        if args.rewrite:
            # One table per transaction: each is locked only while it is copied.
            batches: list[list[str] | None] = [[t] for t in receipt.tables_touched or []] or [None]
            for tables in batches:
                receipt = mem.rewrite_erased(receipt.id, tables=tables)
        else:
            receipt = mem.refresh_erasure_statistics(receipt.id)
        if args.vacuum and not args.rewrite:
            try:
                vacuumed = mem.vacuum_erased(receipt)
            except errors.NotPermitted as exc:
                vacuum_problem = exc
        if args.rewrite:
            # The operator's step: pg_statistic and the WAL are the server's, not the tenant's.
            try:
                with db.connect_admin(autocommit=True) as operator:
                    flushed = admin.flush_erasure(operator, args.tenant, receipt.id)
            except (errors.FlushNotPermitted, errors.ErasureNotRewritten, errors.NotPermitted) as exc:
                flush_problem = exc
            receipt = next((r for r in mem.erasure_requests(20) if r.id == receipt.id), receipt)
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
    touched = receipt.tables_touched or []
    if receipt.statistics_refreshed_at:
        print(f"  statistics refreshed at {receipt.statistics_refreshed_at.isoformat()} for the {len(touched)} "
              "tables it touched: pg_stats holds none of the erased values")
    else:
        stale = ", ".join(receipt.statistics_stale or [])
        print(f"  statistics NOT refreshed: {stale} kept statistics ANALYZE cannot replace (no rows left) and "
              "PostgreSQL before 18 cannot clear; a superuser must delete their pg_statistic rows")
    if args.rewrite:
        rewritten = receipt.rewritten_tables or []
        print(f"  rewrote the {len(rewritten)} tables it touched at "
              f"{receipt.rewritten_at.isoformat() if receipt.rewritten_at else '-'} (their files, TOAST and indexes "
              f"anew): no page of theirs keeps the erased rows; WAL before {receipt.rewrite_lsn} may hold them")
        if flush_problem is not None or flushed is None:
            print(f"  NOT flushed: {flush_problem} (pg_statistic's old rows and the WAL still hold the words; "
                  "run select * from pgrecall.flush_erasure(tenant, id) as a superuser)")
        else:
            print(f"  flushed at {flushed.flushed_at.isoformat()}: pg_statistic rewritten, WAL switched and "
                  f"checkpointed (redo {flushed.flush_redo_lsn}, segment {flushed.wal_segment}); what may still "
                  "hold the words:")
            for what, until in sorted(flushed.still_held_by.items()):
                print(f"    {what}: {until}")
    elif vacuum_problem is not None:
        print(f"  NOT vacuumed: {vacuum_problem}")
    elif args.vacuum:
        print(f"  vacuumed the {len(vacuumed)} tables: their dead rows are gone (unless a transaction older than "
              "the erasure still runs); their freed space keeps the bytes until reused (--rewrite removes them)")
    else:
        print("  not vacuumed: dead rows keep the erased values until autovacuum runs (or pass --vacuum, "
              "or --rewrite to leave no page holding them)")
    if not clean:
        return EXIT_RESIDUAL
    tidied = receipt.statistics_refreshed_at is not None and (
        (flushed is not None and flush_problem is None) if args.rewrite else vacuum_problem is None)
    return 0 if tidied else EXIT_NOT_TIDIED


def cmd_review(args: argparse.Namespace) -> int:
    from . import review

    missing = review.missing_dependencies()
    if missing:
        return _fail(f"pgrecall: error: {missing}")
    review.serve(args.tenant, args.principal, args.scopes, port=args.port)
    return 0


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
    parser.add_argument("--version", action="version", version=f"pgrecall {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("server", help="the embedded PostgreSQL server")
    p.add_argument("action", choices=["start", "stop", "status", "uri"])
    p.add_argument("--tenant", help="with uri: the URI of one of this tenant's login roles")
    p.add_argument("--role", choices=["app", "worker", "admin"], default="app",
                   help="with uri --tenant: app (the agent, default), worker (queued work) or admin (back office)")
    p.add_argument("--json", action="store_true", help="with status: one JSON document")
    p.set_defaults(func=cmd_server)

    p = sub.add_parser("tenant", help="create, upgrade, list or drop tenants")
    p.add_argument("action", choices=["create", "upgrade", "drop", "list", "settings"])
    p.add_argument("name", nargs="?")
    p.add_argument("--yes", action="store_true", help="with drop: do not ask for confirmation")
    p.add_argument("--json", action="store_true", help="with list or settings: one JSON document")
    p.set_defaults(func=cmd_tenant)

    p = sub.add_parser("sql", help="print a psql script that installs or upgrades a tenant")
    p.add_argument("--tenant", required=True)
    p.set_defaults(func=cmd_sql)

    def tenant_args(p: argparse.ArgumentParser, principal: bool = True, reads: bool = False) -> None:
        p.add_argument("--tenant", default=os.environ.get("PGRECALL_TENANT", "demo"),
                       help="tenant (default: $PGRECALL_TENANT or demo)")
        if principal:
            p.add_argument("--as", dest="principal", default=os.environ.get("PGRECALL_PRINCIPAL"),
                           required=not os.environ.get("PGRECALL_PRINCIPAL"),
                           help="the peer acting (default: $PGRECALL_PRINCIPAL)")
        if reads:  # a question asked of the whole memory, as bundle and mcp ask it
            p.add_argument("--scopes", type=lambda v: [s for s in v.split(",") if s] or None, default=None,
                           help="authorised scopes, comma-separated (default: every scope of the tenant)")
        else:
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
    p.add_argument("--widening-reason", help="why it may reach more peers than a turn it cites (recorded; "
                                             "without it such a memory is refused)")
    p.add_argument("--json", action="store_true", help="one JSON document")
    p.set_defaults(func=cmd_remember)

    p = sub.add_parser("read", help="read one memory with its provenance")
    tenant_args(p)
    p.add_argument("memory_id", type=int)
    p.add_argument("--purpose", required=True, choices=["converse", "act", "personalize", "review"])
    p.add_argument("--include-superseded", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_read)

    p = sub.add_parser("correct", help="fix a memory in place, citing the observations that justify it")
    tenant_args(p)
    p.add_argument("memory_id", type=int)
    p.add_argument("text", help="the corrected text")
    p.add_argument("--revision", type=int, required=True, help="the revision you read (pgrecall read shows it)")
    p.add_argument("--evidence", type=int, action="append", default=[],
                   help="log offset, in the memory's scope, that justifies it; repeatable")
    p.add_argument("--reason")
    p.add_argument("--title", help="a new title (default: keep it)")
    p.add_argument("--widening-reason", help="why it may reach more peers than the evidence cited (recorded; "
                                             "without it such a correction is refused)")
    p.add_argument("--json", action="store_true", help="one JSON document")
    p.set_defaults(func=cmd_correct)

    p = sub.add_parser("forget", help="invalidate a memory, with a reason")
    tenant_args(p)
    p.add_argument("memory_id", type=int)
    p.add_argument("--reason", required=True)
    p.add_argument("--json", action="store_true", help="one JSON document")
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
    p.add_argument("--json", action="store_true", help="with status: one JSON document")
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
    p.add_argument("--vacuum", action="store_true",
                   help="after the commit, VACUUM the tables it touched (needs PostgreSQL 17+ or the tables' owner)")
    p.add_argument("--rewrite", action="store_true",
                   help="after the commit, rewrite the tables it touched (one at a time, each locked while copied) so "
                        "no page keeps the erased rows, then, on the PGRECALL_DSN connection (a superuser; the "
                        "embedded server's by default), rewrite pg_statistic and push the WAL past the erasure")
    p.set_defaults(func=cmd_erase)

    p = sub.add_parser("review", help="the web screen where a person decides about proposed duplicates "
                                      "(127.0.0.1 only, as the tenant's application role)")
    tenant_args(p)
    p.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (default: 8765)")
    p.set_defaults(func=cmd_review)

    p = sub.add_parser("demo", help="what `make run` shows")
    p.add_argument("--tenant", default="demo")
    p.set_defaults(func=cmd_demo)

    _add_agent_commands(sub, tenant_args)
    _add_examples(sub)
    return parser


def _version() -> str:
    from . import __version__

    return __version__


def _principal_args(p: argparse.ArgumentParser) -> None:
    """--tenant, --as, --scopes and --purpose of the commands that hand an agent its memory: without
    --scopes they authorise every scope of the tenant, as a single user's own install expects."""
    p.add_argument("--tenant", default=os.environ.get("PGRECALL_TENANT", "demo"),
                   help="tenant (default: $PGRECALL_TENANT or demo)")
    p.add_argument("--as", dest="principal", default=os.environ.get("PGRECALL_PRINCIPAL"),
                   required=not os.environ.get("PGRECALL_PRINCIPAL"),
                   help="the peer whose memory it is (default: $PGRECALL_PRINCIPAL)")
    p.add_argument("--scopes", type=lambda v: [s for s in v.split(",") if s] or None, default=None,
                   help="authorised scopes, comma-separated (default: every scope of the tenant)")
    p.add_argument("--purpose", default="converse", choices=["converse", "act", "personalize", "review"],
                   help="what the memories are used for (default: converse)")


def _add_agent_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                        tenant_args: Callable[..., None]) -> None:
    """recall, search, supersede, derive, facts, bundle and mcp: what an agent (or its harness) does."""
    purposes = ["converse", "act", "personalize", "review"]

    p = sub.add_parser("recall", help="ranked recall: the memories (and facts) nearest a query, with provenance")
    tenant_args(p, reads=True)
    p.add_argument("query")
    p.add_argument("--purpose", default="converse", choices=purposes)
    p.add_argument("--limit", type=int, default=10)
    p.add_argument("--mode", choices=["hybrid", "lexical", "dense"], help="default: the tenant's (hybrid)")
    p.add_argument("--include-superseded", action="store_true")
    p.add_argument("--json", action="store_true", help="one JSON document: items and meta")
    p.set_defaults(func=cmd_recall)

    p = sub.add_parser("search", help="search what was said (the log's passages), not what was remembered")
    tenant_args(p, reads=True)
    p.add_argument("query")
    p.add_argument("--session", type=int, help="only this session")
    p.add_argument("--peer", help="only what this peer said")
    p.add_argument("--limit", type=int, default=10)
    p.add_argument("--mode", choices=["hybrid", "lexical", "semantic"], help="default: the tenant's settings")
    p.add_argument("--json", action="store_true", help="one JSON document: items and meta")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("supersede", help="replace a memory because the world changed (the old one stays as history)")
    tenant_args(p)
    p.add_argument("memory_id", type=int)
    p.add_argument("text", help="the new memory")
    p.add_argument("--revision", type=int, required=True, help="the revision you read (pgrecall read shows it)")
    p.add_argument("--evidence", type=int, action="append", default=[],
                   help="log offset, in the memory's scope, that says what changed; repeatable "
                        "(default: append the text, or --said, as an observation and cite it)")
    p.add_argument("--said", help="the words appended as the observation when no --evidence is given")
    p.add_argument("--scope", help="scope of the appended observation (default: the first authorised one)")
    p.add_argument("--role", default="user", help="role of the appended observation (default: user)")
    p.add_argument("--title", help="a new title (default: keep it)")
    p.add_argument("--about", action="append", default=[], help="entity name; repeatable (default: the old memory's)")
    p.add_argument("--widening-reason", help="why it may reach more peers than a turn it cites (recorded; "
                                             "without it such a memory is refused)")
    p.add_argument("--json", action="store_true", help="one JSON document")
    p.set_defaults(func=cmd_supersede)

    p = sub.add_parser("derive", help="write a memory drawn from other memories (seen and used only as all of "
                                      "them allow)")
    tenant_args(p)
    p.add_argument("text", help="the conclusion")
    p.add_argument("--from", dest="sources", type=int, action="append", required=True,
                   help="a source memory id; repeatable")
    p.add_argument("--kind", default="summary", choices=["note", "fact", "decision", "summary"])
    p.add_argument("--title")
    p.add_argument("--about", action="append", default=[], help="entity name; repeatable")
    p.add_argument("--widening-reason", help="why it may reach more peers than a turn it cites (recorded; "
                                             "without it such a memory is refused)")
    p.add_argument("--json", action="store_true", help="one JSON document")
    p.set_defaults(func=cmd_derive)

    p = sub.add_parser("facts", help="what is believed about an entity, now or at another time (bitemporal)")
    tenant_args(p, reads=True)
    p.add_argument("subject", help="an entity name or alias")
    p.add_argument("predicate", nargs="?", help="one predicate, e.g. lives_in (default: all)")
    p.add_argument("--valid-at", type=_timestamp, help="true at this time (ISO 8601; default: now)")
    p.add_argument("--known-at", type=_timestamp, help="as believed at this time (default: now)")
    p.add_argument("--purpose", default="converse", choices=purposes)
    p.add_argument("--json", action="store_true", help="one JSON document")
    p.set_defaults(func=cmd_facts)

    p = sub.add_parser("bundle", help="the session-start bundle, as text for a model's context (a harness "
                                      "hook injects it)")
    _principal_args(p)
    p.add_argument("--session", type=int, help="a session id: adds the principal's working representation there")
    p.add_argument("--recent", type=int, default=10, help="recent memories (default: 10)")
    p.add_argument("--entities", type=int, default=5, help="top entities (default: 5)")
    p.add_argument("--json", action="store_true", help="one JSON document")
    p.set_defaults(func=cmd_bundle)

    p = sub.add_parser("mcp", help="serve a principal's memory to an MCP client (stdio, or streamable HTTP on "
                                   "localhost)")
    _principal_args(p)
    p.add_argument("--http", metavar="HOST:PORT",
                   help="streamable HTTP on a loopback address (127.0.0.1, localhost or [::1]) instead of stdio")
    p.add_argument("--no-preload", action="store_true",
                   help="do not load the embedding model at start (the first recall then waits for it)")
    p.set_defaults(func=cmd_mcp)


def _timestamp(value: str) -> datetime:
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {value!r}") from None


# One example per subcommand, shown under its --help (a test holds every subcommand to it).
EXAMPLES = {
    "server": "pgrecall server uri --tenant acme --role worker",
    "tenant": "pgrecall tenant create acme\n  pgrecall tenant list --json\n  pgrecall tenant drop acme --yes",
    "sql": "pgrecall sql --tenant acme > acme.sql && psql -v ON_ERROR_STOP=1 -f acme.sql \"$DATABASE_URL\"",
    "peer": "pgrecall peer add ana --kind human --tenant acme",
    "scope": "pgrecall scope add default --tenant acme --description \"Ana's assistant\"",
    "remember": "pgrecall remember --tenant acme --as ana --purpose converse --about Ana \"Ana is vegetarian\"",
    "read": "pgrecall read --tenant acme --as ana --purpose converse 1 --json",
    "correct": "pgrecall correct --tenant acme --as ana 1 \"Ana is vegan\" --revision 1 --evidence 2 "
               "--reason \"she said so\"",
    "forget": "pgrecall forget --tenant acme --as ana --reason \"she asked\" 1",
    "import": "pgrecall import chat.jsonl --tenant acme --scopes default",
    "worker": "pgrecall worker --tenant acme --once",
    "review": "pgrecall review --tenant demo --as Ana --scopes flat --port 8765   # then open http://127.0.0.1:8765/",
    "deriver": "pgrecall deriver --tenant acme --once",
    "embeddings": "pgrecall embeddings rebuild --tenant acme --all",
    "erase": "pgrecall erase --tenant acme --subject u-42 --reason \"request #7\"",
    "demo": "pgrecall demo",
    "recall": "pgrecall recall --tenant demo --as Ana --scopes flat \"Where do Ana and Ben live?\"",
    "search": "pgrecall search --tenant demo --as Ana --scopes flat \"moved to Porto\" --json",
    "supersede": "pgrecall supersede --tenant acme --as ana 1 \"Ana lives in Porto\" --revision 1 --evidence 3",
    "derive": "pgrecall derive --tenant acme --as ana --from 1 --from 2 --kind decision "
              "\"Shared meals are vegetarian\"",
    "facts": "pgrecall facts --tenant acme --as ana Ana lives_in --valid-at 2025-06-01",
    "bundle": "pgrecall bundle --tenant demo --as Ana        # what a SessionStart hook prints",
    "mcp": "pgrecall mcp --tenant demo --as Ana               # stdio, for .mcp.json\n"
           "  pgrecall mcp --tenant demo --as Ana --http 127.0.0.1:8765",
}


def _add_examples(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Each subcommand's help says what it does (its one-line help) and shows an example."""
    helps = {action.dest: action.help for action in sub._choices_actions}
    for name, p in sub.choices.items():
        p.formatter_class = argparse.RawDescriptionHelpFormatter
        said = helps.get(name)
        if p.description is None and said:
            p.description = said[0].upper() + said[1:] + "."
        if name in EXAMPLES:
            p.epilog = "example:\n  " + EXAMPLES[name]


def importer_error() -> type[Exception]:
    from .importer import ImportFileError

    return ImportFileError


def one_line(text: str) -> str:
    """``text`` fit for one terminal line: line breaks, control and format characters (ESC, bidi
    overrides, ...) and unusual spaces are shown escaped, never sent raw to the terminal."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text.strip())


# Exit codes, documented in README's command-line section: a script tells a typo from a missing
# memory, a lost race, a server that is down, and an erasure that did not finish, by the code alone.
EXIT_ERROR = 1            # any other refusal: bad input, a failed import, ...
EXIT_USAGE = 2            # the command line itself is wrong (argparse's code)
EXIT_UNREACHABLE = 3      # the server is down or unreachable (server status: not running)
EXIT_NOT_FOUND = 4        # what was named does not exist (or the principal may not see it)
EXIT_CONFLICT = 5         # someone else changed it first: re-read and try again
EXIT_NOT_PERMITTED = 6    # the login role (or the authorised scopes) may not do this
EXIT_RESIDUAL = 7         # erase: the residual is not zero, the erasure is incomplete
EXIT_NOT_TIDIED = 8       # erase: committed and complete, but statistics were not refreshed or VACUUM refused
EXIT_NOTHING_KEPT = 9     # remember: nothing was remembered (empty, no words, only a question); no turn was left
EXIT_INTERNAL = 70        # a bug in pgrecall (EX_SOFTWARE): please report the line it printed
EXIT_INTERRUPTED = 130    # Ctrl-C (128 + SIGINT), as shells report it


def _fail(message: str, hint: str | None = None, code: int = EXIT_ERROR) -> int:
    print(one_line(message) + (f" (hint: {one_line(hint)})" if hint else ""), file=sys.stderr)
    return code


def _exit_code(exc: BaseException) -> int:
    """The documented exit code for an error that ended a command."""
    if isinstance(exc, errors.ConcurrencyError):
        return EXIT_CONFLICT
    if isinstance(exc, LookupError):
        return EXIT_NOT_FOUND
    if isinstance(exc, PermissionError):
        return EXIT_NOT_PERMITTED
    if isinstance(exc, errors.EmbeddedServerError) or _unreachable(exc):
        return EXIT_UNREACHABLE
    return EXIT_ERROR


def _unreachable(exc: BaseException) -> bool:
    """A connection that failed or broke (class 08, the server shutting down), not a refused statement."""
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate or ""
    return state == "" or state.startswith("08") or state.startswith("57P")


def main(argv: list[str] | None = None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.command == "tenant" and args.action != "list" and args.name is None:
            parser.error(f"tenant {args.action} needs a NAME")
        # Every command that names a tenant, checked before anything connects or composes SQL.
        if getattr(args, "tenant", None) is not None:
            names.check_tenant_name(args.tenant)
        if args.command == "tenant" and args.action != "list":
            names.check_tenant_name(args.name)
        result: int = args.func(args)
        return result
    except KeyboardInterrupt:
        print("pgrecall: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except errors.PgrecallError as exc:
        return _fail(f"pgrecall: error: {exc.args[0] if exc.args else exc}", exc.hint, _exit_code(exc))
    except importer_error() as exc:
        return _fail(f"pgrecall: error: {exc}")
    except psycopg.Error as exc:  # one line, not a traceback; ours by its class, others with their SQLSTATE
        if _unreachable(exc):
            return _fail(f"pgrecall: cannot reach the database: {exc}", code=EXIT_UNREACHABLE)
        ours = errors.translate(exc)
        if isinstance(ours, errors.PgrecallError):
            return _fail(f"pgrecall: error: {ours.args[0]}", ours.hint, _exit_code(ours))
        return _fail(f"pgrecall: database error {exc.sqlstate or ''}: {exc.diag.message_primary or exc}",
                     exc.diag.message_hint)
    except BrokenPipeError:
        # `pgrecall ... | head`: the reader left; nothing more to say, and nowhere to say it.
        sys.stderr.close()
        return EXIT_ERROR
    except OSError as exc:  # a file to import or write that cannot be opened, a socket refused, ...
        return _fail(f"pgrecall: error: {exc}", code=_exit_code(exc))
    except Exception as exc:  # a bug: still one line, with the exception's type to report
        if os.environ.get("PGRECALL_TRACEBACK"):
            raise
        return _fail(f"pgrecall: internal error: {type(exc).__name__}: {exc}",
                     "Please report this line; PGRECALL_TRACEBACK=1 shows where it happened.", EXIT_INTERNAL)


if __name__ == "__main__":
    sys.exit(main())
