"""pgrecall remember, read, correct, forget, supersede and derive: writing and reading one memory."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ._common import EXIT_NOTHING_KEPT, MEMORY_KINDS, PURPOSES, Subparsers, _memory, _print_json, tenant_args

if TYPE_CHECKING:
    from ..driver import Memory


def _one_transaction(args: argparse.Namespace) -> Any:
    """A Memory whose calls share one transaction, committed when the block ends without an error: a turn a
    command appends and the write that cites it are one outcome (a refused write leaves no turn)."""
    from contextlib import contextmanager

    import pgrecall

    from .. import db
    from ..driver import open_connection

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


def add_remember(sub: Subparsers) -> None:
    p = sub.add_parser("remember", help="remember a text (appends it as the observation unless --evidence is given)")
    tenant_args(p)
    p.add_argument("text")
    p.add_argument("--purpose", dest="purposes", action="append", required=True,
                   choices=PURPOSES, help="repeatable")
    p.add_argument("--evidence", type=int, action="append", help="log offset that stated it; repeatable")
    p.add_argument("--scope", help="scope to write (default: the first authorised one)")
    p.add_argument("--audience", help="the one peer who may see it (default: everyone in the scope)")
    p.add_argument("--kind", default="note", choices=MEMORY_KINDS)
    p.add_argument("--title")
    p.add_argument("--about", action="append", default=[], help="entity name; repeatable")
    p.add_argument("--role", default="user", help="role of the appended observation (default: user)")
    p.add_argument("--widening-reason", help="why it may reach more peers than a turn it cites (recorded; "
                                             "without it such a memory is refused)")
    p.add_argument("--json", action="store_true", help="one JSON document")
    p.set_defaults(func=cmd_remember)


def add_read(sub: Subparsers) -> None:
    p = sub.add_parser("read", help="read one memory with its provenance")
    tenant_args(p)
    p.add_argument("memory_id", type=int)
    p.add_argument("--purpose", required=True, choices=PURPOSES)
    p.add_argument("--include-superseded", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_read)


def add_correct(sub: Subparsers) -> None:
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


def add_forget(sub: Subparsers) -> None:
    p = sub.add_parser("forget", help="invalidate a memory, with a reason")
    tenant_args(p)
    p.add_argument("memory_id", type=int)
    p.add_argument("--reason", required=True)
    p.add_argument("--json", action="store_true", help="one JSON document")
    p.set_defaults(func=cmd_forget)


def add_supersede(sub: Subparsers) -> None:
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


def add_derive(sub: Subparsers) -> None:
    p = sub.add_parser("derive", help="write a memory drawn from other memories (seen and used only as all of "
                                      "them allow)")
    tenant_args(p)
    p.add_argument("text", help="the conclusion")
    p.add_argument("--from", dest="sources", type=int, action="append", required=True,
                   help="a source memory id; repeatable")
    p.add_argument("--kind", default="summary", choices=MEMORY_KINDS)
    p.add_argument("--title")
    p.add_argument("--about", action="append", default=[], help="entity name; repeatable")
    p.add_argument("--widening-reason", help="why it may reach more peers than a turn it cites (recorded; "
                                             "without it such a memory is refused)")
    p.add_argument("--json", action="store_true", help="one JSON document")
    p.set_defaults(func=cmd_derive)
