"""Recall latency of two trees of function files on ONE tenant and corpus, interleaved.

    python -m bench.ab --other /path/to/another/checkout [--size 10000] [--rounds 4]

On a shared, noisy machine two bench runs minutes apart are not comparable; this loads one corpus (the
bench's, through the same public paths), then switches the tenant's function files between this
checkout's and the other's (migrations must be the same: only plpgsql/ differs) and times the three
recall modes for each, round after round, so both see the same machine. Prints p50/p95 per tree and
mode over all rounds. Not part of CI.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import psycopg

from . import corpus
from .run import (MODES, SCOPES, _recall_sql, cached_embeddings, corpus_for, ingest, install_tenant, log, role_uri,
                  store_embeddings, summary, text_of_memory_index)


def use_functions(admin: str, tenant: str, root: Path) -> list:
    """Install the function files under root/plpgsql (this checkout's control plane and migrations)."""
    from pgrecall import install, sources

    original = sources.functions

    def functions():
        return [sources.Source("function", p.name, None, p.read_text(encoding="utf-8"))
                for p in sorted((root / "plpgsql").glob("*.sql"))]

    sources.functions = functions
    try:
        with psycopg.connect(admin, autocommit=True) as conn:
            return install.install(conn, [tenant])
    finally:
        sources.functions = original


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--other", required=True, help="a checkout whose plpgsql/ is compared with this one's")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--modes", default=",".join(MODES))
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="pgrab-"))
    os.environ["PGRECALL_HOME"] = str(home)
    os.environ.pop("PGRECALL_DSN", None)
    from pgrecall import server

    info = server.start()
    admin = info.uri()
    tenant = "ab"
    try:
        used: list = []
        texts, vectors, _ = corpus_for(args.size, 100_000, used)
        qtexts = corpus.queries(args.queries, args.size)
        qvecs = cached_embeddings("queries", qtexts, used)
        app = install_tenant(admin, tenant)
        log(f"ab: ingest {args.size}")
        _, memory_of_text = ingest(app, tenant, texts)
        store_embeddings(role_uri(tenant, "worker"), tenant, text_of_memory_index(memory_of_text), vectors)
        with psycopg.connect(role_uri(tenant, "worker"), autocommit=True) as conn:
            conn.execute(f"select * from {tenant}.refresh_term_stats()")
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"vacuum analyze {tenant}.memory, {tenant}.memory_embedding")
        trees = {"this": Path(__file__).resolve().parents[1], "other": Path(args.other).resolve()}
        modes = args.modes.split(",")
        times: dict = {(t, m): [] for t in trees for m in modes}
        sql = _recall_sql(tenant)
        items = [("agent", t, v.tolist()) for t, v in zip(qtexts, qvecs)]
        for r in range(args.rounds):
            order = list(trees) if r % 2 == 0 else list(reversed(trees))
            for name in order:
                use_functions(admin, tenant, trees[name])
                for mode in modes:
                    def call(conn, item, mode=mode):
                        principal, text, vec = item
                        return conn.execute(sql, (principal, SCOPES, text, vec if mode != "lexical" else None,
                                                  mode)).fetchall()

                    with psycopg.connect(app, autocommit=True) as conn:
                        for q in items[:10]:
                            call(conn, q)
                        for q in items:
                            started = time.perf_counter()
                            call(conn, q)
                            times[(name, mode)].append((time.perf_counter() - started) * 1000)
                log(f"ab: round {r + 1} {name} done, load {os.getloadavg()[0]:.1f}")
        print(f"\n{args.size} memories, {args.queries} queries x {args.rounds} rounds per tree and mode, interleaved")
        print("| mode | this p50 / p95 ms | other p50 / p95 ms |")
        print("|---|---|---|")
        for mode in modes:
            a, b = summary(times[("this", mode)]), summary(times[("other", mode)])
            print(f"| {mode} | {a['p50_ms']:.2f} / {a['p95_ms']:.2f} | {b['p50_ms']:.2f} / {b['p95_ms']:.2f} |")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
