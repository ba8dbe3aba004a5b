"""``make bench-erase``: erasing one data subject among N memories (default 1M), with the residual.

The corpus is the recall benchmark's, ingested the same way (append_observations + remember_many,
1,000 data subjects, so one subject is 0.1% of the rows), with term statistics refreshed. The
embedding queues are emptied before timing, as if the worker had caught up. With --vectors every
memory first gets a vector through the worker's claim and complete (random unit vectors: erasure
never reads them, but it deletes and re-queues the vectors whose input held an erased turn, and a
memory's input holds the turns around its evidence). Results: bench/results/latest-erase.md, the
runs in bench/results/archive/.

With --rewrite each erasure is followed by what `pgrecall erase --rewrite` does: rewrite_erased() once
per touched table, each in its own transaction (the table is locked ACCESS EXCLUSIVE for that whole
call, so its time is how long the table was locked), then pgrecall.flush_erasure() as the superuser
(pg_statistic rewritten, WAL switched, CHECKPOINT).

    python -m bench.erase                    # 1,000,000 memories (ingest takes a while)
    python -m bench.erase --size 100000
    python -m bench.erase --size 100000 --vectors
    python -m bench.erase --size 100000 --vectors --rewrite --subjects 1
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from . import corpus
from .harness import embedded_server, new_report, write_report
from .run import HERE, SUBJECTS, ingest, install_tenant, log, role_uri, store_embeddings, text_of_memory_index


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="make bench-erase")
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--subjects", type=int, default=3, help="how many subjects to erase, one at a time")
    parser.add_argument("--out", default=str(HERE / "results"))
    parser.add_argument("--vectors", action="store_true",
                        help="give every memory a (random) vector before erasing, as the worker would")
    parser.add_argument("--rewrite", action="store_true",
                        help="after each erasure, rewrite the tables it touched and flush (pgrecall erase --rewrite)")
    parser.add_argument("--explain", action="store_true",
                        help="log the plans of the erasures' nested statements slower than 100 ms")
    args = parser.parse_args(argv)

    from pgrecall import server

    tenant = f"erase{args.size}"
    report = new_report("make bench-erase BENCH_ARGS='{args}'", argv, size=args.size)
    with embedded_server("pgre-", {"maintenance_work_mem": "1GB", "shared_buffers": "2GB"}) as info:
        admin = info.uri()
        app = install_tenant(admin, tenant)
        log(f"ingesting {args.size} memories")
        texts = corpus.memories(args.size)
        report["ingest"], memory_of_text = ingest(app, tenant, texts)
        log(f"ingest: {report['ingest']['per_second']:.0f} memories/s")
        if args.vectors:
            vectors = np.random.default_rng(7).standard_normal((len(texts), 384)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            report["vectors"] = store_embeddings(role_uri(tenant, "worker"), tenant,
                                                 text_of_memory_index(memory_of_text), vectors)
            log(f"vectors: {report['vectors']['stored']} stored")
        with psycopg.connect(role_uri(tenant, "worker"), autocommit=True) as conn:
            conn.execute(f"select * from {tenant}.refresh_term_stats()")
        with psycopg.connect(admin, autocommit=True) as conn:
            for table in ("embedding_job", "passage_embedding_job"):
                if conn.execute("select to_regclass(%s)", (f"{tenant}.{table}",)).fetchone()[0]:
                    conn.execute(f"delete from {tenant}.{table}")
            conn.execute(f"vacuum analyze {tenant}.memory")
            report["rows"] = {t: conn.execute(f"select count(*) from {tenant}.{t}").fetchone()[0]
                              for t in ("observation", "memory", "memory_link", "memory_embedding",
                                        "projection_dependency")}
        runs = []
        with psycopg.connect(admin if args.explain else role_uri(tenant, "admin"), autocommit=True) as conn:
            if args.explain:
                conn.execute("load 'auto_explain'")
                for setting, value in (("log_min_duration", "100"), ("log_nested_statements", "on"),
                                       ("log_analyze", "on"), ("log_buffers", "on")):
                    conn.execute(f"set auto_explain.{setting} = {value}")
                conn.execute(f"set role pgrecall_{tenant}_admin")
                log_file = server.current_log_file()  # the server's log rotates by size
                log_start = log_file.stat().st_size
            for k in range(args.subjects):
                subject = f"subject-{(k * 397 + 11) % SUBJECTS}"
                started = time.perf_counter()
                row = conn.execute(f"select observations_erased, rows_erased, residual "
                                   f"from {tenant}.erase('bench', %s, 'bench')",
                                   (Jsonb({"data_subject": subject}),)).fetchone()
                seconds = time.perf_counter() - started
                runs.append({"subject": subject, "seconds": seconds, "observations": row[0], "rows_erased": row[1],
                             "residual_zero": set(row[2].values()) == {0}})
                log(f"{subject}: {seconds * 1000:.0f} ms, {row[0]} observations")
                if args.rewrite:
                    runs[-1]["rewrite"] = rewrite(conn, admin, tenant)
                    w = runs[-1]["rewrite"]
                    log(f"{subject}: rewrite {w['seconds']:.1f} s, longest lock {w['longest_lock_seconds']:.1f} s "
                        f"({w['longest_lock_table']}), flush {w['flush_seconds']:.1f} s")
        report["erasures"] = runs
        if args.explain:
            with open(log_file, encoding="utf-8", errors="replace") as fh:
                fh.seek(log_start)
                (Path(args.out) / "archive").mkdir(parents=True, exist_ok=True)
                (Path(args.out) / "archive" / f"erase-plans-{args.size}.txt").write_text(fh.read())
        report["median_seconds"] = statistics.median(r["seconds"] for r in runs)
    lines = [f"# pgrecall erasure benchmark ({report['started']})", "",
             f"Machine: {report['machine']}. Command: `{report['command']}`.", "",
             f"- corpus: {args.size:,} memories ({report['rows']}), "
             f"ingest {report['ingest']['per_second']:.0f} memories/s",
             *[f"- erase {r['subject']}: {r['seconds'] * 1000:.0f} ms for {r['observations']} observations, "
               f"{r['rows_erased'].get('memory', 0)} memories, {r['rows_erased'].get('memory_embedding', 0)} of their "
               f"vectors, {r['rows_erased'].get('embedding_input', 0)} neighbours' vectors re-queued; "
               f"residual zero: {r['residual_zero']}" for r in runs],
             *rewrite_lines(runs),
             "", f"Target: one subject among {args.size:,} in <= 1 s: median {report['median_seconds'] * 1000:.0f} ms, "
             f"{'met' if report['median_seconds'] <= 1 else 'NOT met'}."]
    md = "\n".join(lines) + "\n"
    write_report(Path(args.out), "erase", report, md)
    print(md)
    return 0


def rewrite(conn: psycopg.Connection, superuser: str, tenant: str) -> dict:
    """What `pgrecall erase --rewrite` does after the newest erasure, timed: one rewrite_erased() per touched
    table (each its own transaction, so its time is how long that table was locked ACCESS EXCLUSIVE), then
    pgrecall.flush_erasure() as the superuser."""
    request, touched = conn.execute(f"select id, tables_touched from {tenant}.erasure_requests(1)").fetchone()
    tables = []
    started = time.perf_counter()
    for table in touched:
        size = conn.execute("select pg_total_relation_size(%(t)s::regclass) + coalesce((select sum("
                            "pg_total_relation_size(p.relid)) from pg_partition_tree(%(t)s::regclass) p "
                            "where p.relid <> %(t)s::regclass), 0)::bigint", {"t": f"{tenant}.{table}"}).fetchone()[0]
        t0 = time.perf_counter()
        conn.execute(f"select id from {tenant}.rewrite_erased(%s, %s)", (request, [table]))
        tables.append({"table": table, "seconds": time.perf_counter() - t0, "bytes_before": size})
    seconds = time.perf_counter() - started
    with psycopg.connect(superuser, autocommit=True) as su:
        t0 = time.perf_counter()
        su.execute("select * from pgrecall.flush_erasure(%s, %s)", (tenant, request))
        flush = time.perf_counter() - t0
    longest = max(tables, key=lambda t: t["seconds"])
    return {"request": request, "seconds": seconds, "tables": tables, "flush_seconds": flush,
            "longest_lock_seconds": longest["seconds"], "longest_lock_table": longest["table"]}


def rewrite_lines(runs: list[dict]) -> list[str]:
    lines = []
    for r in runs:
        if "rewrite" not in r:
            continue
        w = r["rewrite"]
        lines += ["", f"Rewrite after erasing {r['subject']} (request {w['request']}): {w['seconds']:.1f} s for "
                      f"{len(w['tables'])} tables, one transaction each, then the flush {w['flush_seconds']:.1f} s; "
                      f"the longest a table was locked ACCESS EXCLUSIVE: {w['longest_lock_seconds']:.1f} s "
                      f"({w['longest_lock_table']}).", "",
                  "| table | size before | rewrite (= locked) |", "|---|---:|---:|",
                  *[f"| {t['table']} | {t['bytes_before'] / 1e6:.1f} MB | {t['seconds']:.2f} s |"
                    for t in sorted(w["tables"], key=lambda t: -t["seconds"])]]
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
