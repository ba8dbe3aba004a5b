"""pgrecall import, worker, deriver and embeddings: loading conversations and the queued work."""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from ._common import EXIT_INTERRUPTED, Subparsers, _print_json, tenant_args


def cmd_import(args: argparse.Namespace) -> int:
    from .. import importer

    count = importer.import_jsonl(args.file, tenant=args.tenant, scope=args.scopes[0], progress=not args.quiet)
    print(f"imported {count} observations into scope {args.scopes[0]} of tenant {args.tenant}")
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from ..embedder import get_embedder
    from ..worker import Worker

    # Run as a service, a worker loads the model once for its whole life (and keeps working when the
    # resident embedder is stopped); --once is a command like the others, and shares the resident one.
    worker = Worker(args.tenant, batch_size=args.batch_size, embedder=None if args.once else get_embedder())
    if args.once:
        stats = worker.drain()
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
    from ..worker import Worker

    worker = Worker(args.tenant, batch_size=args.batch_size)
    with tqdm(total=status.queued + status.passages_queued, desc="embedding", unit="memory",
              disable=args.quiet) as bar:
        stats = worker.drain(progress=bar.update)
    print(f"pgrecall: queued {queued}, embedded {stats.stored} memories and {stats.passages_stored} passages")
    return 0


def add_import(sub: Subparsers) -> None:
    p = sub.add_parser("import", help="load a conversation (JSON lines) as observations")
    tenant_args(p, principal=False)
    p.add_argument("file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_import)


def add_worker(sub: Subparsers) -> None:
    p = sub.add_parser("worker", help="embed queued memories (LISTEN/NOTIFY wakes it)")
    tenant_args(p, principal=False)
    p.add_argument("--once", action="store_true", help="drain the queue and exit")
    p.add_argument("--batch-size", type=int, default=64)
    p.set_defaults(func=cmd_worker)


def add_deriver(sub: Subparsers) -> None:
    p = sub.add_parser("deriver", help="process the derivation queue with the first-person extractor")
    tenant_args(p, principal=False)
    p.add_argument("--once", action="store_true", help="drain the queue and exit")
    p.add_argument("--batch-size", type=int, default=16)
    p.set_defaults(func=cmd_deriver)


def add_embeddings(sub: Subparsers) -> None:
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
