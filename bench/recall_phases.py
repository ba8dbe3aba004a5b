"""Where an everything-eligible recall's time goes: the statements a recall runs, measured inside the server.

    python -m bench.recall_phases [--n 10000] [--queries 200] [--reps 2]

The side-by-side bench's corpus (../shared/bench-peers, copied by `make bench-peers` into bench/cache/peers
with its vector cache) is loaded as `make bench-peers` loads it: a turn and a memory per item for one user
peer, the worker storing the cached vectors, then ANALYZE. The server preloads pg_stat_statements with
`track = all`, so every statement a PL/pgSQL function runs is counted apart. The bare statement runs on
the same server beside it. Printed: client p50 of each side, then the nested statements by total time per
recall. Writes bench/results/latest-recall-phases.md (with --explain K, the plan of every statement of K
recalls too, beside the bench's copy).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEERS = Path(os.environ.get("PGRECALL_BENCH_CACHE", ROOT / "bench" / "cache")) / "peers"
OUT = ROOT / "bench" / "results" / "latest-recall-phases.md"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--explain", type=int, default=0, metavar="K",
                    help="also write the plan of every statement of K recalls (auto_explain) to a file")
    ap.add_argument("--keep", action="store_true", help="leave the server running afterwards, to look closer")
    args = ap.parse_args(argv)
    if not (PEERS / "bench.py").exists():
        sys.exit(f"bench.recall_phases: run `make bench-peers` once first (it copies the bench to {PEERS})")
    sys.path.insert(0, str(PEERS))
    os.chdir(PEERS)
    import importlib.util

    import adapters  # type: ignore[import-not-found]
    import corpus  # type: ignore[import-not-found]
    import embed  # type: ignore[import-not-found]
    import numpy as np
    import psycopg

    # the side-by-side bench's bench.py, under another name: `bench` is this package
    spec = importlib.util.spec_from_file_location("peers_bench", PEERS / "bench.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    items = corpus.make_corpus(args.n, users=1)
    queries = corpus.make_queries(items, args.queries)
    ivecs = np.asarray(embed.cached(f"items_{args.n}", [it["text"] for it in items]))
    qvecs = np.asarray(embed.cached(f"queries_{args.n}", [q["question"] for q in queries]))
    for it, v in zip(items, ivecs):
        it["vec"] = v
    lookup = adapters.LookupEmbedder({it["text"]: it["vec"] for it in items}
                                     | {q["question"]: qvecs[i] for i, q in enumerate(queries)})
    srv = bench.start_postgres(PEERS / f"pgdata-phases-{os.getpid()}",
                               {"shared_buffers": "2GB", "maintenance_work_mem": "1GB", "max_wal_size": "8GB",
                                "effective_cache_size": "8GB", "shared_preload_libraries": "pg_stat_statements",
                                "pg_stat_statements.track": "all"})
    try:
        base = srv.get_uri()
        admin = psycopg.connect(base, autocommit=True)
        for name in ("baseline_pg", "pgrecall"):
            admin.execute(f"create database bench_{name}")
        sides = {name: adapters.ADAPTERS[name](lookup=lookup, users=1) for name in ("baseline_pg", "pgrecall")}
        for name, side in sides.items():
            side.setup(bench.db_uri(base, f"bench_{name}"))
        for i in range(0, len(items), 500):
            for side in sides.values():
                side.add_batch(items[i:i + 500])
        for name in sides:
            with psycopg.connect(bench.db_uri(base, f"bench_{name}"), autocommit=True) as c:
                c.execute("analyze")
        with psycopg.connect(bench.db_uri(base, "bench_pgrecall"), autocommit=True) as c:
            c.execute("create extension if not exists pg_stat_statements")
            for q, qv in zip(queries, qvecs):     # warm-up, as the bench does
                for side in sides.values():
                    side.search(q["question"], qv, 5)
            c.execute("select pg_stat_statements_reset()")
            times: dict[str, list[float]] = {name: [] for name in sides}
            for _ in range(args.reps):
                for q, qv in zip(queries, qvecs):
                    for name, side in sides.items():
                        t = time.perf_counter()
                        side.search(q["question"], qv, 5)
                        times[name].append((time.perf_counter() - t) * 1000)
            calls = args.reps * len(queries)
            rows = c.execute("""
                select s.toplevel, s.calls, s.total_exec_time, s.rows,
                       left(regexp_replace(s.query, '\\s+', ' ', 'g'), 160)
                  from pg_stat_statements s join pg_database d on d.oid = s.dbid
                 where d.datname = 'bench_pgrecall'
                 order by s.total_exec_time desc limit %s""", (args.top,)).fetchall()
            if args.explain:
                plans: list[str] = []
                c.add_notice_handler(lambda d: plans.append(d.message_primary or ""))
                c.execute("load 'auto_explain'")
                for setting in ("log_min_duration = 0", "log_nested_statements = on", "log_analyze = on",
                                "log_buffers = on", "log_level = notice"):
                    c.execute(f"set auto_explain.{setting}")
                for q, qv in list(zip(queries, qvecs))[:args.explain]:
                    plans.append(f"==== {q['question']}")
                    c.execute("select bench.recall_answer('user-0', array['default'], %s, 'converse', %s::real[], "
                              "p_limit => 5, p_query_model => 'all-MiniLM-L6-v2')",
                              (q["question"], list(map(float, qv))))
                c.execute("set auto_explain.log_min_duration = -1")
                (PEERS / "recall-plans.txt").write_text("\n".join(plans))
                print(f"plans of every statement of {args.explain} recalls: {PEERS / 'recall-plans.txt'}")
            sides["pgrecall"].meta_sample = None
            sides["pgrecall"].search(queries[0]["question"], qvecs[0], 5)
            meta = sides["pgrecall"].meta_sample
        for side in sides.values():
            side.teardown()
        admin.close()
    finally:
        if args.keep:
            print(f"the server stays up: {srv.get_uri()} (databases bench_pgrecall, bench_baseline_pg)")
        else:
            srv.cleanup()
    p50 = {name: statistics.median(t) for name, t in times.items()}
    load = os.getloadavg()
    stamp = time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())
    lines = [f"# Where an everything-eligible recall's time goes ({stamp})",
             "", f"`python -m bench.recall_phases --n {args.n} --queries {args.queries} --reps {args.reps}`; "
             f"load average {load[0]:.1f}; {calls} calls a side, interleaved.", "",
             f"Client p50: bare statement {p50['baseline_pg']:.2f} ms, pgrecall {p50['pgrecall']:.2f} ms "
             f"({p50['pgrecall'] / p50['baseline_pg']:.2f}x). First recall's meta: {meta}.", "",
             "Statements inside pgrecall's database (pg_stat_statements, track = all), by total time; "
             "ms per recall = total / calls of recall:", "",
             "| top level | calls | ms per recall | rows | statement |", "|---|---:|---:|---:|---|"]
    for toplevel, n_calls, total, n_rows, query in rows:
        lines.append(f"| {'yes' if toplevel else ''} | {n_calls} | {total / calls:.3f} | {n_rows} | "
                     f"`{query.replace('|', '/')}` |")
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
