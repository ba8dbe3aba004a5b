"""pgrecall fact: assert a fact quoting what was said (a single-valued predicate's old value is superseded, not
overwritten), retract one, walk the graph around entities, list the predicates. `pgrecall facts` reads them as of
a time."""

from __future__ import annotations

import argparse

from ._common import (
    PURPOSES,
    Subparsers,
    _fail,
    _memory,
    _print_json,
    _print_rows,
    _range_text,
    _timestamp,
    tenant_args,
)


def cmd_fact(args: argparse.Namespace) -> int:
    target = list(args.target)
    wants = {"assert": 3, "retract": 1, "traverse": None, "predicates": 0}[args.action]
    if (wants is None and not target) or (wants is not None and len(target) != wants):
        usage = {"assert": "fact assert SUBJECT PREDICATE OBJECT --evidence OFFSET --quote TEXT",
                 "retract": "fact retract FACT_ID --reason TEXT", "traverse": "fact traverse ENTITY ...",
                 "predicates": "fact predicates"}[args.action]
        return _fail(f"pgrecall: error: usage: pgrecall {usage}", "pgrecall fact --help shows every action.", 2)
    return int(ACTIONS[args.action](args, target))


def _assert(args: argparse.Namespace, target: list[str]) -> int:
    if args.evidence is None or not args.quote:
        return _fail("pgrecall: error: a fact quotes what was said: give --evidence OFFSET and --quote TEXT",
                     "The quote is words of the turn at that offset (pgrecall search --json shows offsets).", 2)
    subject, predicate, object_ = target
    args.scopes = args.scopes or ["default"]  # a write goes to the first scope named
    with _memory(args) as mem:
        r = mem.assert_fact(subject, predicate, object_, evidence=[{"offset": args.evidence, "quote": args.quote}],
                            statement=args.statement, valid_from=args.valid_from, valid_to=args.valid_to,
                            confidence=args.confidence, observer=args.observer, audience=args.audience,
                            widening_reason=args.widening_reason)
    if args.json:
        return _print_json(r)
    said = {"inserted": "recorded", "superseded": "recorded", "confirmed": "already known as"}[r.outcome] \
        if r.outcome in ("inserted", "superseded", "confirmed") else r.outcome
    print(f"{said} fact {r.fact_id}: {subject} {predicate} {object_}")
    if r.closed_facts:
        print(f"  it supersedes fact{'s' if len(r.closed_facts) > 1 else ''} "
              f"{', '.join(map(str, r.closed_facts))} (kept as history: pgrecall facts --known-at TIME)")
    return 0


def _retract(args: argparse.Namespace, target: list[str]) -> int:
    if not args.reason:
        return _fail("pgrecall: error: say why with --reason", "pgrecall fact retract FACT_ID --reason TEXT", 2)
    try:
        fact_id = int(target[0])
    except ValueError:
        return _fail(f"pgrecall: error: a fact is given by its id, not {target[0]!r}",
                     "pgrecall facts ENTITY shows the ids.", 2)
    args.scopes = args.scopes or ["default"]
    with _memory(args) as mem:
        r = mem.retract_fact(fact_id, reason=args.reason)
    if args.json:
        return _print_json(r)
    print(f"retracted fact {r.fact_id}: believed {_range_text(r.known)}")
    return 0


def _traverse(args: argparse.Namespace, target: list[str]) -> int:
    with _memory(args) as mem:
        edges = mem.neighbourhood(target, hops=args.hops, valid_at=args.valid_at, known_at=args.known_at,
                                  purpose=args.purpose)
    if args.json:
        return _print_json({"seeds": target, "hops": args.hops, "facts": edges})
    if not edges:
        print(f"no facts around {', '.join(target)} that this principal may see")
    for e in edges:
        print(f"{'  ' * (e.depth - 1)}[fact {e.fact_id}, {e.depth} hop{'s' if e.depth > 1 else ''}] "
              f"{e.subject} {e.predicate} {e.object}   (valid {_range_text(e.valid)})")
    return 0


def _predicates(args: argparse.Namespace, target: list[str]) -> int:
    with _memory(args) as mem:
        found = mem.predicates()
    if args.json:
        return _print_json(found)
    _print_rows(["predicate", "one value at a time", "object", "description"],
                [(p.name, "yes" if p.single_valued else "no", p.object_type or "", p.description or "")
                 for p in found])
    return 0


ACTIONS = {"assert": _assert, "retract": _retract, "traverse": _traverse, "predicates": _predicates}


def add_fact(sub: Subparsers) -> None:
    p = sub.add_parser("fact", help="facts of the graph: assert one (quoting a turn), retract one, traverse from "
                                    "entities, list the predicates")
    p.add_argument("action", choices=list(ACTIONS),
                   help="assert SUBJECT PREDICATE OBJECT; retract FACT_ID; traverse ENTITY...; predicates")
    p.add_argument("target", nargs="*", metavar="ARG", help="what the action takes (see above)")
    tenant_args(p, reads=True)
    p.add_argument("--evidence", type=int, help="with assert: the offset of the turn that says it")
    p.add_argument("--quote", help="with assert: the words of that turn that say it, exactly")
    p.add_argument("--statement", help="with assert: the fact as a sentence (default: made from its parts)")
    p.add_argument("--valid-from", type=_timestamp,
                   help="with assert: true from this time (ISO 8601, UTC without an offset; default: now)")
    p.add_argument("--valid-to", type=_timestamp, help="with assert: true until this time (default: open)")
    p.add_argument("--confidence", type=float, default=1.0, help="with assert: 0 to 1 (default: 1)")
    p.add_argument("--observer", help="with assert: whose view it is (default: everyone's)")
    p.add_argument("--audience", help="with assert: the one peer who may see it (default: everyone in the scope)")
    p.add_argument("--widening-reason", help="with assert: why it may reach more peers than the turn it quotes "
                   "(recorded; without it such a fact is refused)")
    p.add_argument("--reason", help="with retract: why it is withdrawn")
    p.add_argument("--hops", type=int, default=2, help="with traverse: how far, 1 to 3 (default: 2)")
    p.add_argument("--valid-at", type=_timestamp, help="with traverse: true at this time (default: now)")
    p.add_argument("--known-at", type=_timestamp, help="with traverse: as believed at this time (default: now)")
    p.add_argument("--purpose", default="converse", choices=PURPOSES,
                   help="with traverse: what it is used for (default: converse)")
    p.add_argument("--json", action="store_true", help="one JSON document")
    p.set_defaults(func=cmd_fact)
