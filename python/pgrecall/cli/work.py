"""pgrecall import, worker, deriver and embeddings: loading conversations and the queued work."""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from .. import errors
from .._catalog import EMBEDDING_MODEL as MODEL_NAME
from ._common import EXIT_INTERRUPTED, Subparsers, _fail, _print_json, tenant_args

IMPORT_FORMAT = """\
The file holds one JSON object a line, one turn of a conversation each:

  {"speaker": "Ana", "role": "user", "text": "We moved to Porto!", "session_id": 1,
   "occurred_at": "2026-03-01T09:00:00+00:00"}

  speaker        who said it (a peer; created if it does not exist)            required
  role           user, assistant, system, tool or document                      required
  text           what was said                                                  required
  session_id     the file's label for a session (a number or a string): the turns of one label go to one
                 session, whose peers are everyone who speaks in it; without it a turn is seen by the
                 whole scope. 1 and "1" are two labels: a file that writes one both ways is refused
  occurred_at    when it was said (ISO 8601; without a zone, UTC; default: now)
  speaker_kind   human, agent or other (default: human if its first turn's role is user, else agent)
  audience       a list of peer names: only they (and the speaker) may see the turn
  kind           message (default), document, tool_result, event or note
  data_subject_id, payload (an object), lawful_basis, classification

The whole file is checked before anything is written, then imported in one transaction: all of it or
none. Each turn gets the next offset of the scope's log (1, 2, ... in a new scope), which remember
--evidence and fact assert --evidence cite. examples/sample_chat.jsonl is a short one to try."""


def cmd_import(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .. import importer

    if args.export is not None:  # a data subject's export (pgrecall export), replayed
        from .export import cmd_import_export

        if args.file is not None:
            return _fail("pgrecall: error: give a conversation FILE or --export FILE, not both")
        if not Path(args.export).is_file():
            return _fail(f"pgrecall: error: no file {args.export!r} to import",
                         "Give the path of a file pgrecall export wrote.")
        return cmd_import_export(args)
    if args.file is None:
        return _fail("pgrecall: error: nothing to import", "Give a conversation FILE, or --export FILE.")
    if not Path(args.file).is_file():
        return _fail(f"pgrecall: error: no file {args.file!r} to import",
                     "Give the path of a JSON lines file, one turn a line (pgrecall import --help shows the format); "
                     "examples/sample_chat.jsonl is one to try.")
    count = importer.import_jsonl(args.file, tenant=args.tenant, scope=args.scopes[0],
                                  progress=not (args.quiet or args.json))
    if args.json:
        return _print_json({"imported": count, "scope": args.scopes[0], "tenant": args.tenant})
    print(f"imported {count} observations into scope {args.scopes[0]} of tenant {args.tenant}")
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from ..embedder import get_embedder
    from ..worker import Worker

    # Run as a service, a worker loads the model once for its whole life (and keeps working when the
    # resident embedder is stopped); --once is a command like the others, and shares the resident one,
    # unless --threads asks for the model to run here on that many threads.
    local = not args.once or args.threads is not None
    worker = Worker(args.tenant, batch_size=args.batch_size, embedder=get_embedder() if local else None,
                    threads=args.threads)
    if args.once:
        stats = worker.drain()
        if args.json:
            return _print_json({"memories": stats.stored, "passages": stats.passages_stored,
                                "batches": stats.batches})
        print(f"pgrecall worker: embedded {stats.stored} memories and {stats.passages_stored} passages "
              f"in {stats.batches} batches")
        return 0
    print(f"pgrecall worker {worker.name}: waiting for work in tenant {args.tenant} (Ctrl-C stops)", flush=True)
    # As a service (systemd, a supervisor, `kill`): SIGTERM ends the batch in hand, gives back what is claimed
    # and exits 0.
    terminated = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: terminated.set())
    try:
        worker.run_forever(stop=terminated.is_set)
    except KeyboardInterrupt:
        print(f"pgrecall worker {worker.name}: stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(f"pgrecall worker {worker.name}: stopped (SIGTERM)", file=sys.stderr)
    return 0


def cmd_deriver(args: argparse.Namespace) -> int:
    from ..deriver import Deriver

    with Deriver(args.tenant, batch=args.batch_size) as deriver:
        if args.once:
            stats = deriver.drain()
            if args.json:
                _print_json({"completed": stats.completed, "memories": stats.memories, "failed": stats.failed,
                             "errors": [str(e) for e in stats.errors]})
                return 0 if not stats.failed else 1
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

    if args.action == "status" and (args.all or args.model is not None or args.input_version):
        return _fail("pgrecall: error: --all, --model and --input-version go with rebuild, not status",
                     "pgrecall embeddings rebuild --all re-embeds everything; status only reads.", 2)
    # rebuild embeds with this install's model: a switch to any other name committed the tenant to a model
    # no worker of this command runs, then failed, leaving the tenant's recall without a dense arm.
    if args.model is not None and args.model != MODEL_NAME:
        return _fail(f"pgrecall: error: --model {args.model!r} is not the model this install embeds with "
                     f"({MODEL_NAME}); nothing was switched",
                     "A worker running another model switches its tenant with set_embedding_version() "
                     "(docs/reference.md).", 2)
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
        if args.model is not None or args.input_version:
            queued = mem.set_embedding_version(args.model or status.model, args.input_version or status.input_version)
            # A switch queues what lacks a vector of the new stamp; --all asks for every one, also when the
            # stamp was already in force (it was ignored beside --model or --input-version).
            if args.all:
                queued = mem.rebuild_embeddings(True)
        else:
            queued = mem.rebuild_embeddings(args.all)
        status = mem.embedding_status()
    from ..worker import Worker

    worker = Worker(args.tenant, batch_size=args.batch_size)
    with tqdm(total=status.queued + status.passages_queued, desc="embedding", unit="text",
              disable=args.quiet or args.json) as bar:
        stats = worker.drain(progress=bar.update)
    if args.json:
        return _print_json({"queued": queued, "memories": stats.stored, "passages": stats.passages_stored})
    print(f"pgrecall: queued {queued}, embedded {stats.stored} memories and {stats.passages_stored} passages")
    return 0


def add_import(sub: Subparsers) -> None:
    p = sub.add_parser("import", help="load a conversation (JSON lines) as observations",
                       description="Load a conversation into a scope's log.\n\n" + IMPORT_FORMAT)
    tenant_args(p, principal=False)
    p.add_argument("file", nargs="?", help="a JSON lines file, one turn a line (the format is above)")
    p.add_argument("--export", metavar="FILE",
                   help="instead, a data subject's export (pgrecall export), replayed into --tenant in one "
                        "transaction: its turns, memories with their revisions, facts, aliases, peers, sessions")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="one JSON document")
    p.set_defaults(func=cmd_import)


def _batch_size(value: str) -> int:
    """--batch-size, checked as the command line is read: a claim takes 1 to 10000 jobs, and a bad size found
    by the first claim came after rebuild had queued (or switched) already."""
    try:
        size = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
    if not 1 <= size <= 10000:
        raise argparse.ArgumentTypeError(f"a batch is 1 to 10000 texts, not {size}")
    return size


def _threads(value: str) -> int:
    """--threads, checked as the command line is read: before a server starts or a model loads."""
    from ..embedder import embed_threads

    try:
        return embed_threads(value)
    except errors.InvalidSetting as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def add_worker(sub: Subparsers) -> None:
    p = sub.add_parser("worker", help="embed queued memories (LISTEN/NOTIFY wakes it)")
    tenant_args(p, principal=False, scopes=False)
    p.add_argument("--once", action="store_true", help="drain the queue and exit")
    p.add_argument("--batch-size", type=_batch_size, default=64)
    p.add_argument("--threads", type=_threads, help="threads the model may use (default: $PGRECALL_EMBED_THREADS, "
                                               "else half the cores, so the server it feeds keeps the rest)")
    p.add_argument("--json", action="store_true", help="with --once: one JSON document")
    p.set_defaults(func=cmd_worker)


def add_deriver(sub: Subparsers) -> None:
    p = sub.add_parser("deriver", help="process the derivation queue with the first-person extractor")
    tenant_args(p, principal=False, scopes=False)
    p.add_argument("--once", action="store_true", help="drain the queue and exit")
    p.add_argument("--batch-size", type=_batch_size, default=16)
    p.add_argument("--json", action="store_true", help="with --once: one JSON document")
    p.set_defaults(func=cmd_deriver)


def add_embeddings(sub: Subparsers) -> None:
    p = sub.add_parser("embeddings", help="embedding status, or re-embed (rebuild) with a progress bar")
    tenant_args(p, principal=False, scopes=False)
    p.add_argument("action", choices=["status", "rebuild"],
                   help="status: how many memories and passages have a current vector, a stale one or are queued "
                        "(the app role); rebuild: queue what is missing or stale (--all: everything) and embed it "
                        "now, with a progress bar (the admin role)")
    p.add_argument("--all", action="store_true",
                   help="with rebuild: re-embed every memory, not only missing or stale ones")
    p.add_argument("--model", help="with rebuild: switch the embedding model name (queues everything)")
    p.add_argument("--input-version", type=int, choices=[1, 2],
                   help="with rebuild: switch the embedded text version")
    p.add_argument("--batch-size", type=_batch_size, default=64)
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--json", action="store_true", help="one JSON document")
    p.set_defaults(func=cmd_embeddings)
