"""pgrecall session and document: sessions with their peers and messages, and documents cut into passages."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .. import errors
from ._common import SOURCE_ROLES, Subparsers, _fail, _memory, _print_json, _print_rows, tenant_args


def _flag(value: str | None) -> bool | None:
    return None if value is None else value == "yes"


def _metadata(value: str) -> dict[str, Any]:
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc.msg}") from None
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError("a JSON object, e.g. '{\"topic\": \"travel\"}'")
    return parsed


def cmd_session(args: argparse.Namespace) -> int:
    return int(SESSION_ACTIONS[args.action](args))


def _create(args: argparse.Namespace) -> int:
    with _memory(args) as mem:
        session = mem.create_session(args.name, metadata=args.metadata)
        added = mem.add_session_peers(session, _peers(args)) if args.peers else []
    if args.json:
        return _print_json({"session": session, "scope": args.scopes[0], "name": args.name,
                            "peers": added})
    print(f"session {session} in scope {args.scopes[0]}"
          + (f" ({args.name})" if args.name else ""))
    for p in added:
        print(f"  {p.peer} joined" + _flags_text(p.observe_others, p.observed_by_others))
    return 0


def _peers(args: argparse.Namespace) -> list[str | dict[str, Any]]:
    watchers = set(args.observe_others or [])
    return [{"peer": p, "observe_others": True} if p in watchers else p for p in args.peers]


def _flags_text(observe_others: bool, observed_by_others: bool) -> str:
    said = []
    if observe_others:
        said.append("observes the others")
    if not observed_by_others:
        said.append("is not observed by the others")
    return f" ({', '.join(said)})" if said else ""


def _add_peers(args: argparse.Namespace) -> int:
    if not args.peers:
        return _fail("pgrecall: error: name at least one peer to add", "pgrecall session add-peers SESSION PEER ...")
    with _memory(args) as mem:
        added = mem.add_session_peers(args.session, _peers(args))
    if args.json:
        return _print_json({"session": args.session, "peers": added})
    for p in added:
        print(f"{p.peer} is in session {args.session}" + _flags_text(p.observe_others, p.observed_by_others))
    return 0


def _list_peers(args: argparse.Namespace) -> int:
    with _memory(args) as mem:
        peers = mem.session_peers(args.session, include_left=args.include_left)
    if args.json:
        return _print_json({"session": args.session, "peers": peers})
    _print_rows(["peer", "kind", "joined", "left", "observes others", "observed by others"],
                [(p.peer, p.kind, f"{p.joined_at:%Y-%m-%d %H:%M}", f"{p.left_at:%Y-%m-%d %H:%M}" if p.left_at else "",
                  "yes" if p.observe_others else "no", "yes" if p.observed_by_others else "no") for p in peers])
    return 0


def _say(args: argparse.Namespace) -> int:
    message: dict[str, Any] = {"actor": args.speaker or args.principal, "body": args.text, "source_role": args.role}
    if args.audience:
        message["audience"] = args.audience
    with _memory(args) as mem:
        added = mem.add_messages(args.session, [message])
    offset, tasks = added[0].offset, added[0].tasks
    if args.json:
        return _print_json({"session": args.session, "offset": offset, "tasks": tasks})
    print(f"turn {offset} in session {args.session}, said by {message['actor']} "
          f"({tasks} derivation task{'s' if tasks != 1 else ''} queued)")
    return 0


def _config(args: argparse.Namespace) -> int:
    change = {k: v for k, v in (("observe_others", _flag(args.observe)),
                                ("observed_by_others", _flag(args.observed))) if v is not None}
    with _memory(args) as mem:
        if change:
            c = mem.set_session_peer_config(args.session, args.peer, change)
        else:
            c = mem.session_peer_config(args.session, args.peer)
    if args.json:
        return _print_json(c)
    print(f"{c.peer} in session {c.session}: observes others {'yes' if c.observe_others else 'no'}, "
          f"observed by others {'yes' if c.observed_by_others else 'no'}" + ("" if c.active else " (left)"))
    return 0


SESSION_ACTIONS = {"create": _create, "add-peers": _add_peers, "peers": _list_peers, "say": _say, "config": _config}


def cmd_document(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if not path.is_file():
        return _fail(f"pgrecall: error: no file {str(path)!r} to add",
                     "Give the path of a text file (UTF-8), e.g. examples/sample_document.md.")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise errors.InvalidArgument(f"{path}: not UTF-8 text (byte {exc.start} cannot be decoded)",
                                     hint="pgrecall document add takes a text file.") from exc
    with _memory(args) as mem:
        offset = mem.append(text, role="document", kind="document",
                            payload={"title": args.title or path.name})
    if args.json:
        return _print_json({"offset": offset, "scope": args.scopes[0], "title": args.title or path.name,
                            "characters": len(text)})
    print(f"added {path.name} ({len(text)} characters) as turn {offset} of scope {args.scopes[0]}; "
          "its passages are searchable now: pgrecall search")
    return 0


def add_session(sub: Subparsers) -> None:
    p = sub.add_parser("session", help="sessions: create one, add peers, list them, say something in one, "
                                       "set a peer's flags")
    p.add_argument("action", choices=list(SESSION_ACTIONS),
                   help="create [NAME]; add-peers SESSION PEER...; peers SESSION; say SESSION TEXT; "
                        "config SESSION PEER")
    p.add_argument("target", nargs="*", metavar="ARG", help="what the action takes (see above)")
    tenant_args(p)
    p.add_argument("--metadata", type=_metadata, help="with create: a JSON object kept with the session")
    p.add_argument("--peer", dest="initial_peers", action="append", default=[],
                   help="with create: a peer who joins at once; repeatable")
    p.add_argument("--observe-others", action="append", metavar="PEER",
                   help="with create or add-peers: this peer observes the others (its own view of them is "
                        "derived); repeatable")
    p.add_argument("--include-left", action="store_true", help="with peers: also those who left")
    p.add_argument("--speaker", help="with say: who says it (default: --as)")
    p.add_argument("--role", default="user", choices=[r for r in SOURCE_ROLES if r != "document"],
                   help="with say: the role of what is said (default: user)")
    p.add_argument("--audience", action="append", metavar="PEER",
                   help="with say: only this peer (and the speaker) may see it; repeatable")
    p.add_argument("--observe", choices=["yes", "no"], help="with config: whether the peer observes the others")
    p.add_argument("--observed", choices=["yes", "no"], help="with config: whether the others observe the peer")
    p.add_argument("--json", action="store_true", help="one JSON document")
    p.set_defaults(func=_session_entry)


def _session_entry(args: argparse.Namespace) -> int:
    """Spread the positional arguments over what each action takes, or say what is missing."""
    target = list(args.target)
    wants = {"create": (0, 1), "add-peers": (1, None), "peers": (1, 1), "say": (2, 2), "config": (2, 2)}
    least, most = wants[args.action]
    if len(target) < least or (most is not None and len(target) > most):
        usage = {"create": "session create [NAME]", "add-peers": "session add-peers SESSION PEER ...",
                 "peers": "session peers SESSION", "say": "session say SESSION TEXT",
                 "config": "session config SESSION PEER"}[args.action]
        return _fail(f"pgrecall: error: usage: pgrecall {usage}", "pgrecall session --help shows every action.", 2)
    if args.action == "create":
        args.name = target[0] if target else None
        args.peers = args.initial_peers
        return cmd_session(args)
    try:
        args.session = int(target[0])
    except ValueError:
        return _fail(f"pgrecall: error: a session is given by its id, not {target[0]!r}",
                     "pgrecall session create prints the id.", 2)
    if args.action == "add-peers":
        args.peers = target[1:] + args.initial_peers
    elif args.action == "say":
        args.text = target[1]
    elif args.action == "config":
        args.peer = target[1]
    return cmd_session(args)


def add_document(sub: Subparsers) -> None:
    p = sub.add_parser("document", help="add a document (a text file) to a scope's log: it is cut into passages "
                                        "that search finds")
    p.add_argument("action", choices=["add"])
    p.add_argument("file", help="a UTF-8 text file")
    tenant_args(p)
    p.add_argument("--title", help="kept with it (default: the file's name)")
    p.add_argument("--json", action="store_true", help="one JSON document")
    p.set_defaults(func=cmd_document)
