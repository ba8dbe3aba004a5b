"""``make bench-worker``: the embedding worker's texts/s by runtime (ONNX Runtime, torch) and thread count, idle
and beside a busy PostgreSQL, and what the server still does meanwhile (#31 item 4, #52 item 3).

torch's default is a thread per core. On a small machine the worker shares the cores with the PostgreSQL it
feeds; when the server holds a core, torch's threads wait on each other at every layer. Here the model embeds
the same texts with 1, 2, ... threads (up to the cores), first alone, then while ``--busy`` connections run
CPU-bound statements on an embedded server; the server's statements per second are counted at the same time,
so the table says both what the worker gets and what it takes. Results: bench/results/latest-worker.md, the
runs in bench/results/archive/.

    python -m bench.worker_threads                 # 512 texts, 2 busy connections
    python -m bench.worker_threads --texts 256 --busy 1
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from pathlib import Path

import psycopg

from . import corpus
from .harness import embedded_server, new_report, write_report
from .run import log

HERE = Path(__file__).resolve().parent
# One statement of the busy load: tens of ms of CPU in the server, no I/O.
BUSY_STATEMENT = "select sum(sqrt(g)) from generate_series(1, 300000) g"


def texts_per_second(embedder, texts: list[str], threads: int, rounds: int) -> float:
    embedder.threads = threads
    embedder.embed(texts[:64])  # warm this thread count
    rates = []
    for _ in range(rounds):
        start = time.perf_counter()
        embedder.embed(texts)
        rates.append(len(texts) / (time.perf_counter() - start))
    return statistics.median(rates)


class BusyServer:
    """``n`` connections running BUSY_STATEMENT back to back; ``count`` is how many finished."""

    def __init__(self, uri: str, n: int) -> None:
        self.uri, self.n, self.count = uri, n, 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(n)]

    def _run(self) -> None:
        with psycopg.connect(self.uri, autocommit=True) as conn:
            while not self._stop.is_set():
                conn.execute(BUSY_STATEMENT)
                with self._lock:
                    self.count += 1

    def __enter__(self) -> BusyServer:
        for t in self._threads:
            t.start()
        time.sleep(1.0)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()

    def rate_during(self, fn) -> tuple[float, float]:
        """fn()'s result, and the server's statements per second while it ran."""
        before, start = self.count, time.perf_counter()
        result = fn()
        return result, (self.count - before) / (time.perf_counter() - start)


def server_alone(uri: str, n: int, seconds: float = 5.0) -> float:
    with BusyServer(uri, n) as busy:
        before, start = busy.count, time.perf_counter()
        time.sleep(seconds)
        return (busy.count - before) / (time.perf_counter() - start)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="make bench-worker")
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--busy", type=int, default=2, help="connections keeping the server busy")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)

    from pgrecall.embedder import RUNTIMES, Embedder, embed_threads

    texts = corpus.memories(args.texts)  # the recall bench's synthetic memories
    cores = os.cpu_count() or 1
    counts = sorted({1, *range(2, cores + 1)})
    default = embed_threads()
    embedders = {runtime: Embedder(runtime=runtime) for runtime in RUNTIMES}  # ONNX Runtime and torch, side by side
    rows = []
    with embedded_server("pgrecall-bench-worker-") as info:
        uri = info.uri()
        alone = server_alone(uri, args.busy)
        log(f"server alone: {alone:.1f} statements/s on {args.busy} connections")
        for threads in counts:
            for runtime, embedder in embedders.items():  # interleaved: a shift in load lands on both
                idle = texts_per_second(embedder, texts, threads, args.rounds)
                with BusyServer(uri, args.busy) as busy:
                    busy_rate, server_rate = busy.rate_during(
                        lambda t=threads, e=embedder: texts_per_second(e, texts, t, args.rounds))
                rows.append({"runtime": runtime, "threads": threads, "default": threads == default,
                             "idle_texts_per_s": idle, "busy_texts_per_s": busy_rate,
                             "server_statements_per_s": server_rate})
                log(f"{runtime}, {threads} threads: {idle:.0f} texts/s idle, {busy_rate:.0f} beside the busy "
                    f"server, which then ran {server_rate:.1f} statements/s")
    report = new_report("python -m bench.worker_threads {args}", argv, texts=args.texts, busy=args.busy,
                        server_alone_statements_per_s=alone, default_threads=default, rows=rows)
    md = [f"# The worker's threads ({report['started']})", "",
          f"Machine: {report['machine']}. Command: `{report['command']}`. {args.texts} texts, medians of "
          f"{args.rounds} rounds; the busy server: {args.busy} connections running `{BUSY_STATEMENT}` back to "
          f"back ({alone:.1f} statements/s with the model idle). The default (PGRECALL_EMBED_THREADS unset) "
          f"is {default} thread(s).", "",
          "| runtime | threads | texts/s idle | texts/s beside the busy server | server statements/s meanwhile |",
          "|---|---:|---:|---:|---:|"]
    for r in rows:
        mark = " (default)" if r["default"] else ""
        md.append(f"| {r['runtime']} | {r['threads']}{mark} | {r['idle_texts_per_s']:.0f} | "
                  f"{r['busy_texts_per_s']:.0f} | "
                  f"{r['server_statements_per_s']:.1f} ({r['server_statements_per_s'] / alone:.0%} of alone) |")
    write_report(args.out, "worker", report, "\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
