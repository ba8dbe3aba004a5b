"""``make bench-as-of``: recall as of a past moment against recall now, on one tenant (issue #50, item 1).

The corpus (bench.run's, with the model's cached vectors) is ingested in two halves; the moment T falls
between them. After T, 1% of the first half changes (half corrected, half forgotten) and the second half is
written, so as of T half the tenant is not there yet and a few hundred memories are read from their history.
Then each query is recalled now and as of T, the two interleaved call by call so that load shifts land on
both, in each mode. Results: bench/results/latest-as-of.md, the runs in bench/results/archive/.

    python -m bench.as_of                       # 100k memories, 200 queries
    python -m bench.as_of --size 10000 --queries 100
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np
import psycopg

from . import corpus
from . import run as run_bench

HERE = Path(__file__).resolve().parent
TENANT = "asofbench"
CHANGED = 0.01  # of the first half, changed after the moment: half corrected, half forgotten


def changes_after(admin: str, app: str, memory_ids: list[int]) -> dict:
    """Correct the first half of memory_ids, forget the rest, as the agent; counts."""
    half = len(memory_ids) // 2
    with psycopg.connect(app, autocommit=True) as conn, psycopg.connect(admin, autocommit=True) as superuser:
        for memory_id in memory_ids[:half]:
            revision = superuser.execute(f"select revision from {TENANT}.memory where id = %s",
                                         (memory_id,)).fetchone()
            conn.execute(f"select {TENANT}.correct('agent', %s, %s, %s, %s)",
                         (run_bench.SCOPES, memory_id, revision[0], f"corrected later: note {memory_id}"))
        for memory_id in memory_ids[half:]:
            conn.execute(f"select {TENANT}.forget('agent', %s, %s, 'bench')", (run_bench.SCOPES, memory_id))
    return {"corrected": half, "forgotten": len(memory_ids) - half}


def interleaved(app: str, qtexts: list[str], qvecs: np.ndarray, as_of, mode: str) -> dict:
    """Each query now and as of the moment, one after the other; times in ms and the answers' sizes."""
    sql = (f"select count(*) from {TENANT}.recall('agent', %s, %s, 'converse', %b, %s, 10, "
           f"p_query_model => '{run_bench.MODEL}', p_as_of => %s)")
    now_ms, then_ms, rows_now, rows_then = [], [], [], []
    with psycopg.connect(app, autocommit=True) as conn:
        items = [(t, v.tolist() if mode != "lexical" else None) for t, v in zip(qtexts, qvecs)]
        for text, vec in items:  # an untimed pass for both
            conn.execute(sql, (run_bench.SCOPES, text, vec, mode, None))
            conn.execute(sql, (run_bench.SCOPES, text, vec, mode, as_of))
        for k, (text, vec) in enumerate(items):
            order = (None, as_of) if k % 2 == 0 else (as_of, None)
            for when in order:
                started = time.perf_counter()
                n = conn.execute(sql, (run_bench.SCOPES, text, vec, mode, when)).fetchone()[0]
                ms = (time.perf_counter() - started) * 1000
                (now_ms if when is None else then_ms).append(ms)
                (rows_now if when is None else rows_then).append(n)
    return {"now": run_bench.summary(now_ms), "as_of": run_bench.summary(then_ms),
            "ratio_p50": statistics.median(then_ms) / statistics.median(now_ms),
            "rows_now": statistics.fmean(rows_now), "rows_as_of": statistics.fmean(rows_then)}


def run(size: int, n_queries: int) -> dict:
    used: list = []
    texts, vectors, _ = run_bench.corpus_for(size, max(size, 100_000), used)
    qtexts = corpus.queries(n_queries, size)
    qvecs = run_bench.cached_embeddings("queries", qtexts, used)
    admin = os.environ["PGRECALL_DSN"]
    app = run_bench.install_tenant(admin, TENANT)
    worker = run_bench.role_uri(TENANT, "worker")  # stores the vectors, as the embedding worker does
    half = size // 2
    run_bench.log(f"ingesting the first {half} memories")
    first, memory_of_first = run_bench.ingest(app, TENANT, texts[:half])
    run_bench.store_embeddings(worker, TENANT, run_bench.text_of_memory_index(memory_of_first), vectors[:half])
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"analyze {TENANT}.memory")
        time.sleep(0.05)
        as_of = conn.execute("select clock_timestamp()").fetchone()[0]
        time.sleep(0.05)
    created = [int(memory_of_first[i]) for i in range(half)  # those the agent may change
               if memory_of_first[i] >= 0 and run_bench.agent_may_see(i)]
    step = max(1, int(1 / CHANGED))
    changed = changes_after(admin, app, created[::step])
    run_bench.log(f"ingesting the second {size - half} memories")
    second, memory_of_second = run_bench.ingest(app, TENANT, texts[half:], setup=False)
    memory_of_text = np.concatenate([memory_of_first, memory_of_second])
    run_bench.store_embeddings(worker, TENANT, run_bench.text_of_memory_index(memory_of_text), vectors)
    with psycopg.connect(admin, autocommit=True) as conn:
        # As make bench does before it times recall: the term statistics' snapshot (without it every
        # lexical arm counts document frequencies live) and a vacuum (the visibility map, fresh statistics).
        conn.execute(f"select * from {TENANT}.refresh_term_stats()")
        conn.execute("vacuum analyze")
        history = conn.execute(f"select count(*) from {TENANT}.memory where updated_at > created_at "
                               f"and updated_at > %s and created_at <= %s", (as_of, as_of)).fetchone()[0]
    modes = {}
    for mode in run_bench.MODES:
        run_bench.log(f"{mode}: now and as of the moment, interleaved")
        modes[mode] = interleaved(app, qtexts, qvecs, as_of, mode)
    return {"size": size, "queries": n_queries, "ingest": [first, second], "changed_after": changed,
            "read_from_history": history, "modes": modes, "cache": used}


def markdown(report: dict) -> str:
    r = report["result"]
    md = [f"# pgrecall bench: recall as of a past moment, {report['started']}", "",
          f"Machine: {report['machine']}. Command: `{report['command']}`. Load average at the start and end: "
          f"{report['load_start']} -> {report['load_end']}.", "",
          f"{r['size']:,} memories ingested in two halves; the moment falls between them. After it, "
          f"{r['changed_after']['corrected']} memories of the first half were corrected and "
          f"{r['changed_after']['forgotten']} forgotten, and the second half was written; as of the moment, "
          f"{r['read_from_history']} memories are read from their history. {r['queries']} queries per mode as the "
          "agent (80% of memories eligible), each recalled now and as of the moment one after the other "
          "(alternating which goes first), after an untimed pass.", "",
          "| mode | now p50 / p95 ms | as of p50 / p95 ms | as-of / now (p50) | rows now / as of |",
          "|---|---|---|---|---|"]
    for mode, m in r["modes"].items():
        md.append(f"| {mode} | {m['now']['p50_ms']:.2f} / {m['now']['p95_ms']:.2f} | "
                  f"{m['as_of']['p50_ms']:.2f} / {m['as_of']['p95_ms']:.2f} | {m['ratio_p50']:.2f}x | "
                  f"{m['rows_now']:.1f} / {m['rows_as_of']:.1f} |")
    md += ["", "Target (issue #50): as-of p50 at most 1.5x recall now, at 100k memories."]
    return "\n".join(md) + "\n"


def main(argv=None) -> int:
    from .harness import embedded_server, new_report, write_report

    parser = argparse.ArgumentParser(prog="make bench-as-of")
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    load_start = "/".join(f"{x:.1f}" for x in os.getloadavg())
    with embedded_server("pgrecall-bench-as-of-", {"shared_buffers": "2GB", "maintenance_work_mem": "2GB"}) as info:
        os.environ["PGRECALL_DSN"] = info.uri()
        result = run(args.size, args.queries)
    report = new_report("python -m bench.as_of {args}", argv, result=result, load_start=load_start,
                        load_end="/".join(f"{x:.1f}" for x in os.getloadavg()))
    write_report(args.out, "as-of", report, markdown(report), default=str)
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
