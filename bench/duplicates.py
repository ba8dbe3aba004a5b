"""Duplicate proposals at 100k memories: the median of several calls of duplicate_proposals_answer().

The design's budget is 50 ms for the 500-newest window. The proposals compare every pair of the window
exactly (500 x 499 / 2 cosines over a materialised CTE); no index helps, because the window is the
newest few hundred rows of any number and HNSW searches the whole table. So the cost is the window
(a backward scan of the memory primary key, filtered by eligibility: short for a principal who sees
most memories, longer for one who sees few) plus the pairs (quadratic in the window, independent of
the corpus). The bench measures both principals, the window sizes around the default, and the two
parts separately.

The corpus is the recall bench's templated memories (bench/corpus.py), written through
append_observations + remember_many: one memory in 50 goes to scope ``small`` (the narrow
principal's only scope), the rest round-robin to four scopes, 10% private to other peers and 10%
usable only to act, as in bench/run.py. The newest 30,000 memories get the model's embeddings of their
own texts; older ones reuse those vectors (no measured window reaches them). Vectors are written
straight into memory_embedding by the superuser, without the HNSW index (proposals do not use it),
instead of through the worker: the bench times proposals, not the embedding path.

    python -m bench.duplicates                   # 100,000 memories
    python -m bench.duplicates --size 20000 --calls 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from . import corpus
from .harness import embedded_server, new_report, write_report
from .run import HERE, OTHERS, SCOPES, cached_embeddings, install_tenant, log, percentile, vector_literals

SMALL = "small"
REAL_VECTORS = 30_000
WINDOWS = (250, 500, 1000)


def ingest(app: str, tenant: str, texts: list[str], batch: int = 500) -> dict:
    """Every 50th memory in scope SMALL, the others round-robin; chunks of `batch` consecutive texts, so
    ids interleave the scopes as a live tenant's would."""
    with psycopg.connect(app, autocommit=False) as conn:
        for s in SCOPES + [SMALL]:
            conn.execute(f"select {tenant}.add_scope(%s)", (s,))
        conn.execute(f"select {tenant}.add_peer('agent', 'agent')")
        for p in OTHERS:
            conn.execute(f"select {tenant}.add_peer(%s, 'human')", (p,))
        conn.commit()
        started, created = time.perf_counter(), 0
        for start in range(0, len(texts), batch):
            by_scope: dict[str, list[int]] = {}
            for i in range(start, min(start + batch, len(texts))):
                by_scope.setdefault(SMALL if i % 50 == 0 else SCOPES[i % len(SCOPES)], []).append(i)
            for scope, chunk in by_scope.items():
                rows = [{"body": texts[i], "source_role": "user", "actor": OTHERS[i % 10]} for i in chunk]
                offsets = [r[1] for r in conn.execute(
                    f"select * from {tenant}.append_observations('agent', %s, %s, %s)",
                    (SCOPES + [SMALL], scope, Jsonb(rows)))]
                items = [{"body": texts[i], "evidence": [o],
                          "purposes": ["act"] if i % 10 == 5 else ["converse", "personalize"],
                          "audience": OTHERS[i % 10] if i % 10 == 3 else None} for i, o in zip(chunk, offsets)]
                created += sum(r[0] == "created" for r in conn.execute(
                    f"select status from {tenant}.remember_many('agent', %s, %s, %s)",
                    (SCOPES + [SMALL], scope, Jsonb(items))))
            conn.commit()
    seconds = time.perf_counter() - started
    return {"memories": len(texts), "created": created, "seconds": round(seconds, 1)}


def store_vectors(admin: str, tenant: str, vectors: np.ndarray) -> dict:
    """Each live memory's text vector (and recall vector), by its body's text index, straight into the table."""
    started = time.perf_counter()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"drop index if exists {tenant}.memory_embedding_hnsw")
        ids = conn.execute(f"select id, body from {tenant}.memory order by id").fetchall()
        index = {t: i for i, t in enumerate(TEXTS)}
        with conn.cursor().copy(f"copy {tenant}.memory_embedding (memory_id, model, input_version, embedding, "
                                "text_embedding) from stdin") as copy:
            for start in range(0, len(ids), 5000):
                part = ids[start:start + 5000]
                literals = vector_literals(vectors[[index[body] % len(vectors) for _, body in part]])
                for (mid, _), lit in zip(part, literals):
                    copy.write_row((mid, "all-MiniLM-L6-v2", 2, lit, lit))
        conn.execute(f"delete from {tenant}.embedding_job")
        conn.execute(f"analyze {tenant}.memory")
        conn.execute(f"analyze {tenant}.memory_embedding")
    return {"stored": len(ids), "seconds": round(time.perf_counter() - started, 1)}


def backend_cpu_ms(pid: int) -> float:
    """CPU time (user + system) the server process has used so far: unlike wall time, what a call costs
    does not grow with the other processes waiting for the same two cores."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def timed_calls(app: str, tenant: str, principal: str, scopes: list[str], calls: int, warmup: int = 3) -> dict:
    query = f"select items, meta from {tenant}.duplicate_proposals_answer(%s, %s, 20)"
    times = []
    with psycopg.connect(app, autocommit=True) as conn:
        pid = conn.execute("select pg_backend_pid()").fetchone()[0]
        for k in range(warmup + calls):
            if k == warmup:
                cpu_before = backend_cpu_ms(pid)
            started = time.perf_counter()
            items, meta = conn.execute(query, (principal, scopes)).fetchone()
            elapsed = (time.perf_counter() - started) * 1000
            if k >= warmup:
                times.append(elapsed)
        cpu = (backend_cpu_ms(pid) - cpu_before) / calls
    return {"principal": principal, "scopes": scopes, "calls": calls, "median_ms": statistics.median(times),
            "p95_ms": percentile(times, 0.95), "min_ms": min(times), "max_ms": max(times), "cpu_ms": cpu,
            "pairs": meta["pairs"], "returned": len(items), "in_window": meta["in_window"],
            "embedded": meta["embedded"], "times_ms": [round(t, 1) for t in times]}


def parts(admin: str, tenant: str, principal: str, scopes: list[str], calls: int) -> dict:
    """The window alone, and the pair loop alone over that window, timed as the superuser (same SQL)."""
    window_sql = (f"select array_agg(w.id order by w.id desc) from (select e.id from {tenant}._eligible_memories("
                  f"%s::bigint, %s, null, false, null) e order by e.id desc limit 500) w")
    pairs_sql = f"""
        with win as materialized (
            select m.id, m.revision, {tenant}._purpose_bits(m.purposes) as bits, me.text_embedding as embedding
              from unnest(%s::bigint[]) w(id) join {tenant}.memory m on m.id = w.id
              join {tenant}.memory_embedding me on me.memory_id = w.id and me.text_embedding is not null)
        select count(*) from win a join win b on a.id < b.id
         where (a.bits & b.bits) <> 0 and 1 - (a.embedding <=> b.embedding) >= 0.8"""
    out = {}
    with psycopg.connect(admin, autocommit=True) as conn:
        principal_id = conn.execute(f"select id from {tenant}.peer where name = %s", (principal,)).fetchone()[0]
        ids = conn.execute(window_sql, (principal_id, scopes)).fetchone()[0]
        for name, sql, params in (("window", window_sql, (principal_id, scopes)), ("pairs", pairs_sql, (ids,))):
            times = []
            for k in range(calls + 2):
                started = time.perf_counter()
                conn.execute(sql, params).fetchone()
                if k >= 2:
                    times.append((time.perf_counter() - started) * 1000)
            out[name + "_median_ms"] = statistics.median(times)
        plan = conn.execute("explain (analyze, costs off, timing off) " + pairs_sql, (ids,)).fetchall()
        out["pairs_plan"] = "\n".join(r[0] for r in plan)
    return out


def markdown(report: dict) -> str:
    lines = [
        "# Duplicate proposals at 100k memories",
        "",
        f"Run {report['started']} on {report['machine']}; `{report['command']}`.",
        f"Load average {report['load_before']} before, {report['load_after']} after (on a shared machine, other "
        "work may have run too). Wall times grow with the load; the CPU "
        "time the server spent per call (user + system, from /proc, averaged over the calls) does not, and is "
        "close to what a call takes on an idle core.",
        "",
        f"Corpus: {report['ingest']['created']} memories through append_observations + remember_many "
        f"({report['ingest']['seconds']} s), vectors for {report['vectors']['stored']} (the newest "
        f"{REAL_VECTORS} the model's own). Each figure is over {report['calls']} calls after 3 warm-up calls.",
        "",
        "## duplicate_proposals_answer(principal, scopes, 20): the window of 500",
        "",
        "| principal | scopes | sees | CPU ms per call | wall median ms | wall p95 ms | wall min ms "
        "| pairs >= 0.80 in the window |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in report["principals"]:
        lines.append(f"| {r['principal']} | {', '.join(r['scopes'])} | {r['sees']} | {r['cpu_ms']:.1f} | "
                     f"{r['median_ms']:.1f} | {r['p95_ms']:.1f} | {r['min_ms']:.1f} | {r['pairs']} |")
    lines += ["", "Where the time goes (the same SQL run alone, wall medians):", "",
              "| principal | window ms | pair loop ms |", "|---|---:|---:|"]
    for r in report["principals"]:
        lines.append(f"| {r['principal']} | {r['window_median_ms']:.1f} | {r['pairs_median_ms']:.1f} |")
    lines += ["", "## The window size (duplicate_window) for the wide principal", "",
              "| window | pairs compared | CPU ms per call | wall median ms | wall p95 ms | pairs >= 0.80 |",
              "|---:|---:|---:|---:|---:|---:|"]
    for r in report["windows"]:
        lines.append(f"| {r['window']} | {r['window'] * (r['window'] - 1) // 2} | {r['cpu_ms']:.1f} | "
                     f"{r['median_ms']:.1f} | {r['p95_ms']:.1f} | {r['pairs']} |")
    lines += ["", "The pair loop (wide principal, window 500):", "", "```", report["principals"][0]["pairs_plan"],
              "```", ""]
    return "\n".join(lines)


TEXTS: list[str] = []


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.duplicates")
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--out", default=str(HERE / "results"))
    args = parser.parse_args(argv)

    tenant = "dups"
    report = new_report("python -m bench.duplicates {args}", argv, size=args.size, calls=args.calls)
    with embedded_server("pgrd-") as info:
        admin = info.uri()
        app = install_tenant(admin, tenant)
        TEXTS[:] = corpus.memories(args.size)
        log(f"ingesting {args.size} memories")
        report["ingest"] = ingest(app, tenant, TEXTS)
        used: list = []
        newest = TEXTS[-REAL_VECTORS:]
        vectors = cached_embeddings("duplicates-newest", newest, used)
        # text i's vector: the model's own for the newest, a copy of one of those for older ones
        full = vectors[(np.arange(len(TEXTS)) - (len(TEXTS) - len(newest))) % len(newest)]
        log("storing vectors")
        report["vectors"] = store_vectors(admin, tenant, full)
        report["cache"] = used
        report["load_before"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
        report["principals"] = []
        for principal, scopes, sees in (("agent", SCOPES + [SMALL], "about 90% (all but other peers' private)"),
                                        ("agent", [SMALL], "2% (one small scope)")):
            log(f"timing {principal} over {scopes}")
            r = timed_calls(app, tenant, principal, scopes, args.calls)
            r.update(parts(admin, tenant, principal, scopes, args.calls))
            r["sees"] = sees
            report["principals"].append(r)
        report["windows"] = []
        with psycopg.connect(admin, autocommit=True) as conn:
            for window in WINDOWS:
                conn.execute("select pgrecall.set_tenant_setting(%s, 'duplicate_window', %s)", (tenant, str(window)))
                r = timed_calls(app, tenant, "agent", SCOPES + [SMALL], args.calls)
                report["windows"].append({"window": window,
                                          **{k: r[k] for k in ("median_ms", "p95_ms", "cpu_ms", "pairs")}})
            conn.execute("select pgrecall.set_tenant_setting(%s, 'duplicate_window', '500')", (tenant,))
        report["load_after"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
    md = markdown(report)
    write_report(Path(args.out), "duplicates", report, md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
