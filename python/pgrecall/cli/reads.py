"""pgrecall recall, search, facts, bundle and mcp: what an agent (or its harness) asks of its memory."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC
from typing import TYPE_CHECKING

from ._common import PURPOSES, Subparsers, _memory, _principal_args, _print_json, _range_text, _timestamp, tenant_args

if TYPE_CHECKING:
    pass


def cmd_recall(args: argparse.Namespace) -> int:
    from ..render import count, jsonable, source_lines

    with _memory(args) as mem:
        r = mem.recall(args.query, purpose=args.purpose, mode=args.mode, limit=args.limit,
                       include_superseded=args.include_superseded, as_of=args.as_of)
    if args.json:
        # the moment asked about beside the meta, so that a saved answer says which memory it was
        as_of = args.as_of.astimezone(UTC) if args.as_of is not None else None  # one spelling per moment
        return _print_json({"items": r.items, "meta": {**jsonable(r.meta), "as_of": as_of}})
    m = r.meta
    dense = "dense arm on" if m.dense_available else f"dense arm off ({m.dense_reason})"
    dropped = f"; dropped terms {', '.join(m.dropped_terms)}" if m.dropped_terms else ""
    print(f"{count(m.fused_count, 'candidate')} after the permission walk ({m.lexical_count} lexical, "
          f"{m.dense_count} dense, {m.fact_count} facts); {dense}{dropped}")
    if not r.items:
        print("nothing this principal may see matches")
    for item in r.items:
        fact = item.fact_provenance
        if fact is not None:
            print(f"{item.rank}. [fact {item.fact_id}] {item.body}   (valid {_range_text(fact.valid)})")
            for e in fact.evidence:
                print(f"    quote from {e.scope}#{e.offset}: withheld (a turn you may not see)" if e.withheld
                      else f"    quote from {e.scope}#{e.offset}: \"{e.quote}\"")
            continue
        why = [f"lexical #{item.lexical_rank}"] if item.lexical_rank else []
        if item.dense_rank:
            why.append(f"dense #{item.dense_rank}, cosine {item.cosine:.2f}")
        print(f"{item.rank}. [memory {item.memory_id}, {item.kind}] {item.body}   ({'; '.join(why)})")
        for line in source_lines(jsonable(item.provenance)):
            print(line)
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    from ..render import clip, count

    with _memory(args) as mem:
        found = mem.search_messages(args.query, mode=args.mode, session_id=args.session, peer=args.peer,
                                    limit=args.limit)
    if args.json:
        return _print_json({"items": found.items, "meta": found.meta})
    semantic = "semantic arm on" if found.semantic_available else \
        f"semantic arm off ({found.meta.semantic_reason or 'not asked'})"
    print(f"{count(len(found.items), 'passage')}; {semantic}")
    for hit in found.items:
        session = f", session {hit.session_id}" if hit.session_id else ""
        print(f"{hit.rank}. {hit.scope}#{hit.log_offset} ({hit.actor}, {hit.source_role}, "
              f"{hit.occurred_at:%Y-%m-%d %H:%M}{session}): {clip(hit.body)}")
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
    from ..agent import AgentMemory

    agent = AgentMemory(args.tenant, args.principal, args.scopes, purpose=args.purpose)
    try:
        bundle = agent.bundle(session=args.session, recent=args.recent, entities=args.entities)
    finally:
        agent.close()
    if args.json:
        return _print_json({"tenant": args.tenant, "principal": args.principal, "scopes": agent.scopes,
                            "purpose": args.purpose, "session": args.session, **bundle})
    from ..render import bundle_text

    sys.stdout.write(bundle_text(bundle, principal=args.principal, tenant=args.tenant, scopes=agent.scopes,
                                 purpose=args.purpose, session=args.session))
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from ..mcp_server import serve

    return serve(args.tenant, args.principal, args.scopes, args.purpose, http=args.http,
                 preload=not args.no_preload)


def add_recall(sub: Subparsers) -> None:
    p = sub.add_parser("recall", help="ranked recall: the memories (and facts) nearest a query, with provenance")
    tenant_args(p, reads=True)
    p.add_argument("query")
    p.add_argument("--purpose", default="converse", choices=PURPOSES)
    p.add_argument("--limit", type=int, default=10)
    p.add_argument("--mode", choices=["hybrid", "lexical", "dense"], help="default: the tenant's (hybrid)")
    p.add_argument("--include-superseded", action="store_true")
    p.add_argument("--as-of", type=_timestamp,
                   help="answer as the memory stood at this past time (ISO 8601, UTC without an offset): its "
                        "text then, nothing written, corrected, superseded or forgotten after it; who may see "
                        "what is today's rule")
    p.add_argument("--json", action="store_true", help="one JSON document: items and meta")
    p.set_defaults(func=cmd_recall)


def add_search(sub: Subparsers) -> None:
    p = sub.add_parser("search", help="search what was said (the log's passages), not what was remembered")
    tenant_args(p, reads=True)
    p.add_argument("query")
    p.add_argument("--session", type=int, help="only this session")
    p.add_argument("--peer", help="only what this peer said")
    p.add_argument("--limit", type=int, default=10)
    p.add_argument("--mode", choices=["hybrid", "lexical", "semantic"], help="default: the tenant's settings")
    p.add_argument("--json", action="store_true", help="one JSON document: items and meta")
    p.set_defaults(func=cmd_search)


def add_facts(sub: Subparsers) -> None:
    p = sub.add_parser("facts", help="what is believed about an entity, now or at another time (bitemporal)")
    tenant_args(p, reads=True)
    p.add_argument("subject", help="an entity name or alias")
    p.add_argument("predicate", nargs="?", help="one predicate, e.g. lives_in (default: all)")
    p.add_argument("--valid-at", type=_timestamp,
                   help="true at this time (ISO 8601, UTC without an offset; default: now)")
    p.add_argument("--known-at", type=_timestamp, help="as believed at this time (default: now)")
    p.add_argument("--purpose", default="converse", choices=PURPOSES)
    p.add_argument("--json", action="store_true", help="one JSON document")
    p.set_defaults(func=cmd_facts)


def add_bundle(sub: Subparsers) -> None:
    p = sub.add_parser("bundle", help="the session-start bundle, as text for a model's context (a harness "
                                      "hook injects it)")
    _principal_args(p)
    p.add_argument("--session", type=int, help="a session id: adds the principal's working representation there")
    p.add_argument("--recent", type=int, default=10, help="recent memories (default: 10)")
    p.add_argument("--entities", type=int, default=5, help="top entities (default: 5)")
    p.add_argument("--json", action="store_true", help="one JSON document")
    p.set_defaults(func=cmd_bundle)


def add_mcp(sub: Subparsers) -> None:
    p = sub.add_parser("mcp", help="serve a principal's memory to an MCP client (stdio, or streamable HTTP on "
                                   "localhost)")
    _principal_args(p)
    p.add_argument("--http", metavar="HOST:PORT",
                   help="streamable HTTP on a loopback address (127.0.0.1, localhost or [::1]) instead of stdio")
    p.add_argument("--no-preload", action="store_true",
                   help="do not load the embedding model at start (the first recall then waits for it)")
    p.set_defaults(func=cmd_mcp)
