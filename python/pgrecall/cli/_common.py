"""What the command modules share: printing, failing, exit codes, the arguments naming a tenant and a principal."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeAlias

from .. import errors
from ..vocabulary import MEMORY_KINDS as MEMORY_KINDS  # the catalog's closed sets, for argparse choices
from ..vocabulary import PEER_KINDS as PEER_KINDS
from ..vocabulary import PURPOSES as PURPOSES
from ..vocabulary import SOURCE_ROLES as SOURCE_ROLES

if TYPE_CHECKING:
    from ..driver import Memory

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"



def _print_rows(headers: list[str], rows: list[tuple[Any, ...]]) -> None:
    cells = [[("" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip())
    print("  ".join("-" * w for w in widths))
    for r in cells:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())


def _print_json(value: Any) -> int:
    """One JSON document with stable keys: what --json prints."""
    from ..render import dumps

    print(dumps(value))
    return 0


def one_line(text: str) -> str:
    """``text`` fit for one terminal line: line breaks, control and format characters (ESC, bidi
    overrides, ...) and unusual spaces are shown escaped, never sent raw to the terminal."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text.strip())


# Exit codes, documented in docs/cli.md: a script tells a typo from a missing
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


def tenant_args(p: argparse.ArgumentParser, principal: bool = True, reads: bool = False, scopes: bool = True) -> None:
    """--tenant, and unless principal is False --as, and unless scopes is False (a command of the whole tenant,
    which would ignore it) --scopes: the default scope, or with reads (a question asked of the whole memory, as
    bundle and mcp ask it) every scope of the tenant."""
    p.add_argument("--tenant", default=os.environ.get("PGRECALL_TENANT", "demo"),
                   help="tenant (default: $PGRECALL_TENANT or demo)")
    if principal:
        p.add_argument("--as", dest="principal", default=os.environ.get("PGRECALL_PRINCIPAL"),
                       required=not os.environ.get("PGRECALL_PRINCIPAL"),
                       help="the peer acting (default: $PGRECALL_PRINCIPAL)")
    if not scopes:
        return
    if reads:
        p.add_argument("--scopes", type=lambda v: [s for s in v.split(",") if s] or None, default=None,
                       help="authorised scopes, comma-separated (default: every scope of the tenant)")
    else:
        p.add_argument("--scopes", type=lambda v: [s for s in v.split(",") if s], default=["default"],
                       help="authorised scopes, comma-separated (default: default)")


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
    p.add_argument("--purpose", default="converse", choices=PURPOSES,
                   help="what the memories are used for (default: converse)")


def _timestamp(value: str) -> datetime:
    """An ISO 8601 time; one without an offset is UTC, as the docs say, not the database session's time zone
    (which PGTZ or the server's configuration decide, out of the user's sight)."""
    # RFC 3339 allows a lowercase t and z, which Python's parser does not take
    spelled = value[:-1] + "+00:00" if value.endswith(("z", "Z")) else value
    try:
        parsed = datetime.fromisoformat(spelled.replace("t", "T", 1) if "t" in spelled[8:11] else spelled)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {value!r}") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


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


def _range_text(value: Any) -> str:
    """A validity range from JSON ('[a,b)') or psycopg, as 'from A' or 'A to B'."""
    from ..render import jsonable

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
