"""pgrecall erase: erasing a data subject, a peer, a scope or one observation, and the receipt."""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field
from typing import Any

from .. import errors
from ._common import EXIT_NOT_TIDIED, EXIT_RESIDUAL, Subparsers, _print_json, tenant_args


def _default_actor() -> str:
    import getpass

    try:
        return os.environ.get("PGRECALL_ACTOR") or getpass.getuser()
    except Exception:  # no user name (a container without a passwd entry)
        return "unknown"


def _selector(args: argparse.Namespace) -> dict[str, Any]:
    """What --subject, --peer, --scope or --observation SCOPE:OFFSET names, as erase() takes it."""
    if args.observation:
        scope, _, offset = args.observation.rpartition(":")
        if not scope or not offset.isdigit():
            raise errors.InvalidArgument(f"--observation takes SCOPE:OFFSET, not {args.observation!r}")
        return {"observation": {"scope": scope, "offset": int(offset)}}
    return {k: v for k, v in (("data_subject", args.subject), ("peer", args.peer), ("scope", args.scope)) if v}


@dataclass
class _Tidied:
    """What happened after the erasure committed: the tables vacuumed, the flush, and what refused."""

    vacuumed: list[str] = field(default_factory=list)
    vacuum_problem: errors.NotPermitted | None = None
    flushed: Any = None
    flush_problem: errors.PgrecallError | None = None


def _tidy(mem: Any, args: argparse.Namespace, receipt: Any, tidied: _Tidied) -> Any:
    """Committed: now the tables it touched lose the erased values from their statistics (and, if asked,
    their dead rows, or with --rewrite every page of theirs), which cannot happen inside the erasure's own
    transaction. Returns the receipt as it stands afterwards."""
    from .. import db
    from ..driver import admin

    if args.rewrite:
        # One table per transaction: each is locked only while it is copied.
        batches: list[list[str] | None] = [[t] for t in receipt.tables_touched or []] or [None]
        for tables in batches:
            receipt = mem.rewrite_erased(receipt.id, tables=tables)
    else:
        receipt = mem.refresh_erasure_statistics(receipt.id)
    if args.vacuum and not args.rewrite:
        try:
            tidied.vacuumed = mem.vacuum_erased(receipt)
        except errors.NotPermitted as exc:
            tidied.vacuum_problem = exc
    if args.rewrite:
        # The operator's step: pg_statistic and the WAL are the server's, not the tenant's.
        try:
            with db.connect_admin(autocommit=True) as operator:
                tidied.flushed = admin.flush_erasure(operator, args.tenant, receipt.id)
        except (errors.FlushNotPermitted, errors.ErasureNotRewritten, errors.NotPermitted) as exc:
            tidied.flush_problem = exc
        receipt = next((r for r in mem.erasure_requests(20) if r.id == receipt.id), receipt)
    return receipt


def _print_receipt(receipt: Any) -> None:
    completed = receipt.completed_at.isoformat() if receipt.completed_at else None
    print(f"erasure request {receipt.id} for {json.dumps(receipt.selector)}: "
          f"{receipt.observations_erased} observations erased at {completed} "
          f"by {receipt.actor} (role {receipt.actor_role})")
    residual, erased = receipt.residual or {}, receipt.rows_erased or {}
    width = max([len("projection kind")] + [len(k) for k in residual])
    print(f"  {'projection kind':<{width}}   erased  residual")
    for kind in sorted(residual):
        print(f"  {kind:<{width}}  {erased.get(kind, '-')!s:>7}  {residual[kind]:>8}")
    if not receipt.clean:
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


def _print_tidied(receipt: Any, args: argparse.Namespace, tidied: _Tidied) -> None:
    flushed, flush_problem = tidied.flushed, tidied.flush_problem
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
    elif tidied.vacuum_problem is not None:
        print(f"  NOT vacuumed: {tidied.vacuum_problem}")
    elif args.vacuum:
        print(f"  vacuumed the {len(tidied.vacuumed)} tables: their dead rows are gone (unless a transaction older "
              "than the erasure still runs); their freed space keeps the bytes until reused (--rewrite removes them)")
    else:
        print("  not vacuumed: dead rows keep the erased values until autovacuum runs (or pass --vacuum, "
              "or --rewrite to leave no page holding them)")


def cmd_erase(args: argparse.Namespace) -> int:
    import pgrecall

    selector = _selector(args)
    tidied = _Tidied()
    with pgrecall.connect(tenant=args.tenant, role="admin") as mem:
        receipt = mem.erase(selector, reason=args.reason, actor=args.actor, requested_by=args.requested_by)
        receipt = _tidy(mem, args, receipt, tidied)
    if args.json:
        _print_json({"receipt": receipt, "vacuumed": tidied.vacuumed,
                     "vacuum_problem": str(tidied.vacuum_problem.args[0]) if tidied.vacuum_problem else None,
                     "flushed": tidied.flushed,
                     "flush_problem": str(tidied.flush_problem.args[0]) if tidied.flush_problem else None})
    else:
        _print_receipt(receipt)
        _print_tidied(receipt, args, tidied)
    if not receipt.clean:
        return EXIT_RESIDUAL
    done = (tidied.flushed is not None and tidied.flush_problem is None) if args.rewrite \
        else tidied.vacuum_problem is None
    return 0 if receipt.statistics_refreshed_at is not None and done else EXIT_NOT_TIDIED


def add_erase(sub: Subparsers) -> None:
    p = sub.add_parser("erase", help="erase a data subject, a peer, a scope or one observation (as the tenant's "
                                     "admin role); prints the receipt")
    tenant_args(p, principal=False, scopes=False)
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
    p.add_argument("--json", action="store_true", help="one JSON document: the receipt and what followed it")
    p.set_defaults(func=cmd_erase)
