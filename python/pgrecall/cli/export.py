"""pgrecall export: a data subject's export as JSON lines; and pgrecall import --export, its replay."""

from __future__ import annotations

import argparse
import sys

from ._common import Subparsers, _fail, _print_json, tenant_args


def _whose(selector: dict[str, str]) -> str:
    """An export's selector in words: data subject u-42, peer ana."""
    if "data_subject" in selector:
        return f"data subject {selector['data_subject']}"
    return f"peer {selector['peer']}" if "peer" in selector else str(selector)


def cmd_export(args: argparse.Namespace) -> int:
    from .. import exporter

    selector = {"data_subject": args.subject} if args.subject is not None else {"peer": args.peer}
    if args.json and args.out in (None, "-"):
        return _fail("pgrecall: error: --json describes an export written to a file: give --out FILE",
                     "Without --out the export itself is printed, one JSON document a line.", 2)
    head, rows = exporter.export_rows(args.tenant, selector)
    if args.out in (None, "-"):
        exporter.write_export(sys.stdout, head, rows)
        return 0
    exporter.write_export_file(args.out, head, rows)
    if args.json:
        return _print_json({"tenant": args.tenant, "selector": selector, "out": args.out, "rows": head["rows"],
                            "kinds": head["kinds"]})
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(head["kinds"].items())) or "nothing stored"
    print(f"exported {head['rows']} rows of {_whose(selector)} from tenant {args.tenant} to {args.out}: {kinds}",
          file=sys.stderr)
    return 0


def cmd_import_export(args: argparse.Namespace) -> int:
    from .. import exporter

    result = exporter.import_export(args.export, tenant=args.tenant)
    if args.json:
        return _print_json(result)
    imported = ", ".join(f"{n} {k}" for k, n in sorted(result["imported"].items())) or "nothing"
    print(f"imported the export of {_whose(result['selector'])} from tenant {result['from_tenant']} into tenant "
          f"{args.tenant}: {imported}")
    if result["not_imported"]:
        rebuilt = ", ".join(f"{n} {k}" for k, n in sorted(result["not_imported"].items()))
        print(f"  not imported: {rebuilt} (derived again here, or another subject's; "
              "pgrecall worker --once embeds the memories)")
    return 0


def add_export(sub: Subparsers) -> None:
    p = sub.add_parser("export", help="everything stored about a data subject (or a peer), as JSON lines: what an "
                                      "erasure of it would remove (as the tenant's admin role)")
    tenant_args(p, principal=False, scopes=False)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--subject", help="a data subject id")
    which.add_argument("--peer", help="a peer: its turns, private memories and facts, its name")
    p.add_argument("--out", help="write to this file (created mode 600, complete or not at all); default: stdout")
    p.add_argument("--json", action="store_true", help="with --out: one JSON document saying what was written")
    p.set_defaults(func=cmd_export)
