"""Where ingest spends its time, statement by statement (issue #46 items 1 and 4), model excluded.

    python -m bench.ingest_profile [--n 5000] [--batch 500] [--top 15] [--phase write|drain] [--without-graph]
                                   [--out FILE.md]

The side-by-side bench's ingest (bench/peers.py), alone and on a throwaway embedded server with
pg_stat_statements (track = all, so the statements inside the tenant's functions are counted too): per
batch of --batch items, append_many + remember_many as the application role, then Worker.drain() as the
worker role, at input version 1, with the model replaced by a lookup of precomputed MiniLM vectors (the
peers bench's cache in bench/cache/peers when it is there, else seeded random unit vectors). Reports the
client-side split (the worker's _store timed as the peers bench times it) and the statements that took
the server's time in one phase: the application's writes (append_many + remember_many, where a memory's
vector is stored since remember takes it inline) or the worker's drains. --without-graph drops the memories'
HNSW index first: the graph insert (75-80% of the writes, the one the bare statement pays too) is then out of
the figures, and what pgrecall does besides it is measured without its noise.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from .harness import embedded_server

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / "bench" / "cache" / "peers"
TENANT = "prof"


def corpus(n: int) -> tuple[list[str], np.ndarray, str]:
    """The peers bench's first n texts and their cached vectors, or generated texts and random vectors."""
    cache = PEERS / "cache"
    if (PEERS / "corpus.py").exists() and any(cache.glob("items_*.npy")):
        sys.path.insert(0, str(PEERS))
        import corpus as peers_corpus  # type: ignore[import-not-found]
        import embed  # type: ignore[import-not-found]

        texts = [it["text"] for it in peers_corpus.make_corpus(n)]
        return texts, np.asarray(embed.cached(f"items_{n}", texts, progress=False)), "peers bench MiniLM cache"
    rng = np.random.default_rng(46)
    vecs = rng.standard_normal((n, 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return [f"memory number {i}: person {i % 997} likes item {i % 13}" for i in range(n)], vecs, "random unit vectors"


class Lookup:
    name = "all-MiniLM-L6-v2"

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table

    def embed(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        return np.stack([self.table[t] for t in texts])


def backend_cpu(pid: int) -> float:
    """CPU seconds (user + system) a server backend has used so far: what the server did for one connection,
    much less moved by other jobs on the machine than wall time is."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def statements(conn: psycopg.Connection[Any]) -> dict[tuple[int, int], tuple[int, float, int, str]]:
    """pg_stat_statements now, every role's (a security definer function's statements count as its owner's)."""
    return {(r[0], r[1]): (r[2], r[3], r[4], r[5]) for r in conn.execute(
        "select userid::bigint, queryid, calls, total_exec_time, rows, regexp_replace(query, '\\s+', ' ', 'g') "
        "from pg_stat_statements where queryid is not null")}


def profile(n: int, batch: int, top: int, phase: str = "write", without_graph: bool = False) -> str:
    import pgrecall
    import pgrecall.worker
    from pgrecall import install

    texts, vecs, source = corpus(n)
    lookup = Lookup(dict(zip(texts, vecs)))
    settings = {"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "all",
                "pg_stat_statements.max": "5000"}
    with embedded_server("pgrecall-ingest-profile-", settings) as info:
        uri = info.uri()
        admin = psycopg.connect(uri, autocommit=True)
        admin.execute("create extension if not exists pg_stat_statements")
        install.install(admin, [TENANT])
        if without_graph:
            admin.execute(f"drop index {TENANT}.memory_embedding_hnsw")
        role = {r: uri.replace("postgresql://postgres@", f"postgresql://pgrecall_{TENANT}_{r}@", 1)
                .replace("postgresql://postgres:@", f"postgresql://pgrecall_{TENANT}_{r}@", 1)
                for r in ("app", "worker", "admin")}
        assert role["app"] != uri, uri
        app = psycopg.connect(role["app"], autocommit=True)
        app_pid = app.info.backend_pid
        mem = pgrecall.connect(tenant=TENANT, conn=app, principal="agent", scopes=["default"], embedder=lookup)
        mem.add_scope("default")
        mem.add_peer("agent", "agent")
        mem.add_peer("user-0", "human")
        with pgrecall.connect(role["admin"], tenant=TENANT, role="admin") as back:
            back.set_embedding_version("all-MiniLM-L6-v2", 1)
        t: dict[str, float] = {"append_many": 0.0, "remember_many": 0.0, "worker_drain": 0.0, "store": 0.0}
        cpu: dict[str, float] = {"append_many": 0.0, "remember_many": 0.0, "worker_drain": 0.0}

        class TimedWorker(pgrecall.worker.Worker):
            def _store(self, runner: Any, queue: Any, jobs: Any, embedded: Any) -> int:
                started = time.perf_counter()
                try:
                    return super()._store(runner, queue, jobs, embedded)
                finally:
                    t["store"] += time.perf_counter() - started

            def drain(self, progress: Any = None, refresh_stats: bool = True) -> Any:
                # Worker.drain, with the CPU its connection's backend used during the drain
                conn = self._drain_connection()
                used = backend_cpu(conn.info.backend_pid)
                super().drain(progress, refresh_stats)
                cpu["worker_drain"] += backend_cpu(conn.info.backend_pid) - used
                return self.stats

        worker = TimedWorker(TENANT, conninfo=role["worker"], batch_size=batch, name="profile", embedder=lookup)
        admin.execute("select pg_stat_statements_reset()")
        seen: dict[tuple[int, int], list[Any]] = {}  # what the server did during the phase, by statement

        def add_since(before: dict[tuple[int, int], tuple[int, float, int, str]]) -> None:
            for key, (calls, ms, nrows, query) in statements(admin).items():
                was = before.get(key, (0, 0.0, 0, query))
                acc = seen.setdefault(key, [0, 0.0, 0, query])
                acc[0] += calls - was[0]
                acc[1] += ms - was[1]
                acc[2] += nrows - was[2]
        load0 = os.getloadavg()[0]
        for start in range(0, n, batch):
            chunk = texts[start:start + batch]
            before = statements(admin) if phase == "write" else {}
            c0 = backend_cpu(app_pid)
            t0 = time.perf_counter()
            offsets = mem.append_many([{"body": x, "source_role": "user", "actor": "user-0"} for x in chunk])
            t1 = time.perf_counter()
            c1 = backend_cpu(app_pid)
            mem.remember_many([{"body": x, "evidence": [off], "purposes": ["converse"], "audience": "user-0"}
                               for x, off in zip(chunk, offsets)])
            t2 = time.perf_counter()
            cpu["append_many"] += c1 - c0
            cpu["remember_many"] += backend_cpu(app_pid) - c1
            if phase == "write":
                add_since(before)
            before = statements(admin)
            worker.drain()
            t3 = time.perf_counter()
            if phase == "drain":
                add_since(before)
            t["append_many"] += t1 - t0
            t["remember_many"] += t2 - t1
            t["worker_drain"] += t3 - t2
        load1 = os.getloadavg()[0]
        status = mem.embedding_status()
        rows = sorted(seen.values(), key=lambda r: -r[1])[:top]
        # A plan made on an empty table and kept for the session shows here: rows read by whole-table scans.
        scanned = admin.execute(
            "select relname, seq_scan, seq_tup_read, coalesce(idx_scan, 0) from pg_stat_user_tables "
            "where schemaname = %s and seq_tup_read > 0 order by seq_tup_read desc limit 8", (TENANT,)).fetchall()
        mem.close()
        app.close()
        admin.close()
    total = sum(t.values()) - t["store"]
    lines = [f"`python -m bench.ingest_profile --n {n} --batch {batch} --phase {phase}"
             f"{' --without-graph' if without_graph else ''}` on "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; vectors: {source}; load average "
             f"{load0:.1f} -> {load1:.1f}.", "",
             f"Client side, s: append_many {t['append_many']:.2f}, remember_many {t['remember_many']:.2f}, "
             f"worker drain {t['worker_drain']:.2f} (of which storing memory vectors {t['store']:.2f}, "
             f"{1000 * t['store'] / n:.2f} ms a vector); {n / total:.0f} items/s all told.", "",
             f"Server CPU, s (the backend of each connection, from /proc): append_many {cpu['append_many']:.2f}, "
             f"remember_many {cpu['remember_many']:.2f}, worker drain {cpu['worker_drain']:.2f} "
             f"({1000 * cpu['worker_drain'] / n:.2f} ms a vector); all told {1000 * sum(cpu.values()) / n:.2f} ms "
             "an item.", "",
             f"embedding status after: {status}", "",
             f"The server's statements during the {'writes' if phase == 'write' else 'drains'}, by time "
             f"(pg_stat_statements deltas around each {'batch' if phase == 'write' else 'drain'}, track = all: "
             f"a function's time includes its statements'), top {top}:", "",
             "| calls | total ms | ms / call | rows | statement |", "|---:|---:|---:|---:|---|"]
    for calls, total_ms, nrows, query in rows:
        q = query if len(query) <= 160 else query[:157] + "..."
        lines.append(f"| {calls} | {total_ms:.0f} | {total_ms / max(calls, 1):.2f} | {nrows} "
                     f"| `{q.replace('|', '/')}` |")
    lines += ["", "The tenant's tables read by whole-table scans during the run (pg_stat_user_tables):", "",
              "| table | seq scans | rows read by them | index scans |", "|---|---:|---:|---:|"]
    lines += [f"| {name} | {n_seq} | {n_read} | {n_idx} |" for name, n_seq, n_read, n_idx in scanned]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--phase", choices=("write", "drain"), default="write",
                    help="whose statements to list: the application's append_many + remember_many, or the drains")
    ap.add_argument("--without-graph", action="store_true",
                    help="drop the memories' HNSW index: measure what the writes do besides the graph insert")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    text = profile(args.n, args.batch, args.top, args.phase, args.without_graph)
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
