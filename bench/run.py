"""``make bench``: ingest, recall latency by mode, the same-run ratio against a bare baseline,
index sizes, and worker throughput against the raw model. Results: bench/results/.

Embeddings of the corpus and the queries are computed once and cached under
bench/cache/, so the recall timings measure the database, not the model.

    python -m bench.run                          # 10k and 100k
    python -m bench.run --sizes 10000            # quicker
    python -m bench.run --sizes 10000,100000,1000000   # the optional 1M size (about an hour)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import psycopg

from . import corpus

HERE = Path(__file__).resolve().parent
MODES = ("hybrid", "lexical", "dense")
SCOPES = ["s0", "s1", "s2", "s3"]
OTHERS = [f"p{i}" for i in range(10)]
BULK_INDEX_FROM = 50_000  # from this size the HNSW index is built after loading
SUBJECTS = 1000  # data subjects: erasing one touches 0.1% of the corpus


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def cached_embeddings(name: str, texts: list[str]) -> np.ndarray:
    from pgrecall.embedder import get_embedder

    path = HERE / "cache" / f"{name}.npy"
    if path.exists():
        vecs = np.load(path)
        if len(vecs) == len(texts):
            return vecs
    path.parent.mkdir(parents=True, exist_ok=True)
    log(f"embedding {len(texts)} texts for {name} (cached afterwards)")
    model = get_embedder().model
    vecs = model.encode(texts, batch_size=128, normalize_embeddings=True, convert_to_numpy=True,
                        show_progress_bar=False).astype(np.float32)
    np.save(path, vecs)
    return vecs


def literal(v) -> str:
    return "[" + ",".join(f"{x:.6g}" for x in v) + "]"


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def install_tenant(admin: str, tenant: str) -> str:
    from pgrecall import install, server

    with psycopg.connect(admin, autocommit=True) as conn:
        installed = conn.execute("select to_regnamespace('pgrecall') is not null").fetchone()[0]
        if installed and conn.execute("select 1 from pgrecall.tenant where name = %s", (tenant,)).fetchone():
            conn.execute("select pgrecall.drop_tenant(%s)", (tenant,))
        install.install(conn, [tenant])
    return server.status().uri(user=f"pgrecall_{tenant}_app")


def _setup(conn, tenant: str) -> None:
    for s in SCOPES:
        conn.execute(f"select {tenant}.add_scope(%s)", (s,))
    conn.execute(f"select {tenant}.add_peer('agent', 'agent')")
    for p in OTHERS:
        conn.execute(f"select {tenant}.add_peer(%s, 'human')", (p,))


def _item(i: int, text: str, offset: int) -> dict:
    # 10% are private to another peer (never eligible for 'agent'); 10% may not be used to converse.
    return {"body": text, "evidence": [offset], "purposes": ["act"] if i % 10 == 5 else ["converse", "personalize"],
            "audience": OTHERS[i % 10] if i % 10 == 3 else None}


def ingest(app: str, tenant: str, texts: list[str], batch: int = 500) -> dict:
    """Bulk ingest through append_observations + remember_many, batch rows a call, one transaction per batch."""
    from psycopg.types.json import Jsonb

    with psycopg.connect(app, autocommit=False) as conn:
        _setup(conn, tenant)
        conn.commit()
        started = time.perf_counter()
        created = 0
        for scope_index, scope in enumerate(SCOPES):
            mine = [(i, t) for i, t in enumerate(texts) if i % len(SCOPES) == scope_index]
            for start in range(0, len(mine), batch):
                chunk = mine[start:start + batch]
                rows = [{"body": t, "source_role": "user", "actor": OTHERS[i % 10],
                         "data_subject_id": f"subject-{i % SUBJECTS}"} for i, t in chunk]
                offsets = [r[1] for r in conn.execute(
                    f"select * from {tenant}.append_observations('agent', %s, %s, %s)", (SCOPES, scope, Jsonb(rows)))]
                items = [_item(i, t, o) for (i, t), o in zip(chunk, offsets)]
                created += sum(r[0] == "created" for r in conn.execute(
                    f"select status from {tenant}.remember_many('agent', %s, %s, %s)", (SCOPES, scope, Jsonb(items))))
                conn.commit()
        seconds = time.perf_counter() - started
    return {"memories": len(texts), "created": created, "seconds": seconds, "per_second": len(texts) / seconds,
            "batch": batch}


def ingest_single(app: str, tenant: str, texts: list[str]) -> dict:
    """One append_observation + one remember per memory, each its own transaction (an agent's live path)."""
    with psycopg.connect(app, autocommit=True) as conn:
        _setup(conn, tenant)
        started = time.perf_counter()
        for i, text in enumerate(texts):
            off = conn.execute(f"select {tenant}.append_observation('agent', %s, 's0', %s, 'user', p_actor => %s)",
                               (SCOPES, text, OTHERS[i % 10])).fetchone()[0]
            it = _item(i, text, off)
            conn.execute(f"select * from {tenant}.remember('agent', %s, 's0', %s, %s, %s, p_audience => %s)",
                         (SCOPES, text, it["evidence"], it["purposes"], it["audience"]))
        seconds = time.perf_counter() - started
    return {"memories": len(texts), "seconds": seconds, "per_second": len(texts) / seconds}


def store_embeddings(app: str, tenant: str, ids_to_index: dict[int, int], vectors: np.ndarray) -> dict:
    """Claim every job and complete it with the cached vector: the database side of the worker."""
    started = time.perf_counter()
    stored = 0
    with psycopg.connect(app, autocommit=True) as conn:
        while True:
            jobs = conn.execute(f"select memory_id, generation, model, input_version "
                                f"from {tenant}.claim_embedding_jobs('bench', 1000)").fetchall()
            if not jobs:
                break
            stored += conn.execute(
                f"select {tenant}.complete_embedding_jobs('bench', %s, %s, %s, %s, %s)",
                ([j[0] for j in jobs], [j[1] for j in jobs], [literal(vectors[ids_to_index[j[0]]]) for j in jobs],
                 jobs[0][2], jobs[0][3])).fetchone()[0]
    seconds = time.perf_counter() - started
    return {"stored": stored, "seconds": seconds, "per_second": stored / seconds}


def build_baseline(admin: str, tenant: str, n: int) -> dict:
    """One table with GIN and HNSW, loaded with the same rows."""
    table = f"baseline.docs_{n}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("create schema if not exists baseline")
        conn.execute(f"drop table if exists {table}")
        conn.execute(f"create table {table} (id bigint primary key, body text, tsv tsvector, embedding vector(384))")
        conn.execute(f"insert into {table} select m.id, m.body, m.tsv, e.embedding from {tenant}.memory m "
                     f"join {tenant}.memory_embedding e on e.memory_id = m.id")
        conn.execute(f"create index on {table} using gin (tsv)")
        started = time.perf_counter()
        conn.execute(f"create index docs_{n}_hnsw on {table} using hnsw (embedding vector_cosine_ops) "
                     "with (m = 16, ef_construction = 64)")
        build = time.perf_counter() - started
        conn.execute(f"vacuum analyze {table}")
    return {"table": table, "hnsw_build_seconds": build}


BASELINE_SQL = """
with lex as (
    select id, row_number() over (order by ts_rank_cd(tsv, q) desc, id) as r
      from {table}, to_tsquery('simple', %(orq)s) q
     where tsv @@ q
     order by ts_rank_cd(tsv, q) desc, id limit 100
), dense as (
    select id, row_number() over (order by d, id) as r
      from (select id, embedding <=> %(v)b::float8[]::vector as d from {table} order by embedding <=> %(v)b::float8[]::vector limit 100) x
)
select id, sum(1.0 / (60 + r)) as s from (select * from lex union all select * from dense) f
 group by id order by s desc, id limit 10
"""


def time_queries(app: str, fn, queries: list, warmup: int = 10) -> dict:
    with psycopg.connect(app, autocommit=True) as conn:
        for q in queries[:warmup]:
            fn(conn, q)
        times = []
        for q in queries:
            started = time.perf_counter()
            fn(conn, q)
            times.append((time.perf_counter() - started) * 1000)
    return {"p50_ms": statistics.median(times), "p95_ms": percentile(times, 0.95), "mean_ms": statistics.fmean(times),
            "queries": len(times)}


def recall_latency(app: str, tenant: str, qtexts: list[str], qvecs: np.ndarray) -> dict:
    out = {}
    pairs = list(zip(qtexts, [v.tolist() for v in qvecs]))
    counts = {}
    for mode in MODES:
        def call(conn, pair, mode=mode):
            text, vec = pair
            return conn.execute(
                f"select count(*) from {tenant}.recall('agent', %s, %s, 'converse', %b, %s, 10, "
                f"p_query_model => 'all-MiniLM-L6-v2')", (SCOPES, text, vec if mode != "lexical" else None, mode)
            ).fetchone()[0]
        out[mode] = time_queries(app, call, pairs)
        with psycopg.connect(app, autocommit=True) as conn:
            call(conn, pairs[0])
            meta = conn.execute(f"select {tenant}.last_recall()").fetchone()[0]
            counts[mode] = {k: meta.get(k) for k in ("dense_method", "term_stats", "dense_available")}
    out["_sample_meta"] = counts
    return out


def baseline_latency(admin: str, table: str, qtexts: list[str], qvecs: np.ndarray) -> dict:
    sql = BASELINE_SQL.format(table=table)

    def call(conn, pair):
        text, vec = pair
        terms = conn.execute("select array_agg(distinct lexeme) from unnest(to_tsvector('english', %s))",
                             (text,)).fetchone()[0] or ["nothing"]
        conn.execute("set hnsw.ef_search = 400")
        return conn.execute(sql, {"orq": " | ".join(f"'{t}'" for t in terms), "v": vec.tolist()}).fetchall()

    return time_queries(admin, call, list(zip(qtexts, qvecs)))


def sizes(admin: str, tenant: str, table: str) -> dict:
    with psycopg.connect(admin, autocommit=True) as conn:
        def size(rel):
            return conn.execute("select pg_relation_size(%s::regclass)", (rel,)).fetchone()[0]
        n = table.split("_")[-1]
        return {
            "memory_table_bytes": size(f"{tenant}.memory"),
            "memory_tsv_gin_bytes": size(f"{tenant}.memory_tsv"),
            "memory_embedding_table_bytes": size(f"{tenant}.memory_embedding"),
            "memory_embedding_hnsw_bytes": size(f"{tenant}.memory_embedding_hnsw"),
            "projection_dependency_bytes": size(f"{tenant}.projection_dependency"),
            "baseline_table_bytes": size(table),
            "baseline_hnsw_bytes": size(f"baseline.docs_{n}_hnsw"),
        }


def capture_plans(admin: str, tenant: str, text: str, vec) -> dict:
    """The nested statements' plans of one recall per mode, from auto_explain in the server log."""
    from pgrecall import server

    plans = {}
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("load 'auto_explain'")
        for setting, value in (("log_min_duration", "0"), ("log_nested_statements", "on"), ("log_analyze", "on"),
                               ("log_buffers", "on"), ("log_timing", "on")):
            conn.execute(f"set auto_explain.{setting} = {value}")
        conn.execute(f"set role pgrecall_{tenant}_app")
        for mode in MODES:
            log_file = server.current_log_file()  # the server's log rotates by size
            start = log_file.stat().st_size
            conn.execute(f"select count(*) from {tenant}.recall('agent', %s, %s, 'converse', %s, %s, 10, "
                         f"p_query_model => 'all-MiniLM-L6-v2')", (SCOPES, text, vec.tolist() if mode != "lexical" else None, mode))
            with open(log_file, encoding="utf-8", errors="replace") as fh:
                fh.seek(start)
                plans[mode] = fh.read()[-400000:]
        conn.execute("reset role")
    return plans


def worker_throughput(admin: str, sample: int = 2000) -> dict:
    """The worker end to end (claim, embed, store) against the raw model embedding the same inputs in the
    same batches: every memory's input under the tenant's input version, and every passage (each append
    also writes passages, which the same worker embeds)."""
    from pgrecall.embedder import get_embedder
    from pgrecall.worker import Worker

    texts = corpus.memories(sample, seed=99)
    app = install_tenant(admin, "benchworker")
    single = ingest_single(app, "benchworker", texts)
    with psycopg.connect(admin, autocommit=True) as conn:
        version = conn.execute("select value::int from benchworker.setting where key = 'embedding_input_version'").fetchone()[0]
        inputs = [r[0] for r in conn.execute(
            "select input from benchworker._embedding_inputs(array(select id from benchworker.memory order by id), %s)",
            (version,))]
        passages = [r[0] for r in conn.execute("select body from benchworker.passage order by id")]
    embedder = get_embedder()
    embedder.embed(inputs[:64])  # warm
    started = time.perf_counter()
    for batch in (inputs, passages):
        for start in range(0, len(batch), 64):
            embedder.embed(batch[start:start + 64], batch_size=64)
    raw = time.perf_counter() - started
    worker = Worker("benchworker", conninfo=app, batch_size=64)
    started = time.perf_counter()
    stats = worker.drain(refresh_stats=False)
    end_to_end = time.perf_counter() - started
    raw_rate = (len(inputs) + len(passages)) / raw
    worker_rate = (stats.stored + stats.passages_stored) / end_to_end
    return {"texts": len(inputs), "passages": len(passages), "input_version": version,
            "raw_model_per_second": raw_rate, "worker_per_second": worker_rate, "ratio": worker_rate / raw_rate,
            "stored": stats.stored, "passages_stored": stats.passages_stored,
            "model_seconds_in_worker": stats.embed_seconds, "worker_seconds": end_to_end, "raw_seconds": raw,
            "single_call_ingest": single}


def run_size(admin: str, n: int, n_queries: int) -> dict:
    tenant = f"bench{n}"
    log(f"size {n}: corpus and cached embeddings")
    texts = corpus.memories(n)
    vectors = cached_embeddings(f"corpus-{n}", texts)
    qtexts = corpus.queries(n_queries, n)
    qvecs = cached_embeddings(f"queries-{n}-{n_queries}", qtexts)
    app = install_tenant(admin, tenant)
    log(f"size {n}: ingest through append_observations + remember_many")
    ing = ingest(app, tenant, texts)
    log(f"size {n}: {ing['per_second']:.0f} memories/s; storing cached embeddings")
    with psycopg.connect(admin, autocommit=True) as conn:
        ids = [r[0] for r in conn.execute(f"select id from {tenant}.memory order by id")]
        bulk = n >= BULK_INDEX_FROM
        if bulk:
            # Building the HNSW index once after loading is what a bulk load does; inserting
            # 100k vectors one by one into a live index runs at ~85/s here (measured).
            conn.execute(f"drop index {tenant}.memory_embedding_hnsw")
    emb = store_embeddings(app, tenant, {mid: i for i, mid in enumerate(ids)}, vectors)
    if bulk:
        with psycopg.connect(admin, autocommit=True) as conn:
            started = time.perf_counter()
            conn.execute(f"create index memory_embedding_hnsw on {tenant}.memory_embedding "
                         "using hnsw (embedding vector_cosine_ops) with (m = 16, ef_construction = 64)")
            emb["index_built_after_load_seconds"] = time.perf_counter() - started
    log(f"size {n}: {emb['per_second']:.0f} embeddings/s stored; refreshing statistics")
    with psycopg.connect(app, autocommit=True) as conn:
        started = time.perf_counter()
        conn.execute(f"select * from {tenant}.refresh_term_stats()")
        stats_seconds = time.perf_counter() - started
    with psycopg.connect(admin, autocommit=True) as conn:
        # Every table the load wrote (the log, passages, queues, registry too): left to
        # autovacuum, it ran during the first timed mode and doubled its median once.
        conn.execute("vacuum analyze")
    log(f"size {n}: baseline table")
    base = build_baseline(admin, tenant, n)
    log(f"size {n}: recall latency, {n_queries} queries per mode")
    lat = recall_latency(app, tenant, qtexts, qvecs)
    blat = baseline_latency(admin, base["table"], qtexts, qvecs)
    log(f"size {n}: query plans (auto_explain) for one query per mode")
    result_plans = capture_plans(admin, tenant, qtexts[0], qvecs[0])
    log(f"size {n}: erase one data subject")
    with psycopg.connect(app, autocommit=True) as conn:
        started = time.perf_counter()
        receipt = conn.execute(f"select observations_erased, rows_erased, residual "
                               f"from {tenant}.erase(%s, 'bench')", ('{"data_subject": "subject-7"}',)).fetchone()
        erase = {"seconds": time.perf_counter() - started, "observations": receipt[0], "rows_erased": receipt[1],
                 "residual_zero": all(v == 0 for v in receipt[2].values())}
    result = {
        "plans": result_plans,
        "erase_one_subject": erase,
        "size": n, "ingest": ing, "embedding_store": emb, "term_stats_refresh_seconds": stats_seconds,
        "recall": lat, "baseline": {**blat, **base}, "index_sizes": sizes(admin, tenant, base["table"]),
        "hybrid_vs_baseline_p50": lat["hybrid"]["p50_ms"] / blat["p50_ms"],
        "hybrid_vs_baseline_p95": lat["hybrid"]["p95_ms"] / blat["p95_ms"],
    }
    log(f"size {n}: hybrid p50 {lat['hybrid']['p50_ms']:.1f} ms p95 {lat['hybrid']['p95_ms']:.1f} ms; "
        f"baseline p50 {blat['p50_ms']:.1f} ms; ratio {result['hybrid_vs_baseline_p50']:.2f}")
    return result


TARGETS = {  # size -> (hybrid p50 ms, hybrid p95 ms)
    100_000: (10, 25),
    1_000_000: (20, 50),
}


def markdown(report: dict) -> str:
    lines = [f"# pgrecall bench, {report['started']}", "",
             f"Machine: {report['machine']}. Command: `{report['command']}`.", "",
             "| size | ingest memories/s | embeddings stored/s | mode | p50 ms | p95 ms | baseline p50 / p95 ms | hybrid / baseline (p50, p95) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in report["sizes"]:
        for mode in MODES:
            lat = r["recall"][mode]
            lines.append(
                f"| {r['size']:,} | {r['ingest']['per_second']:.0f} | {r['embedding_store']['per_second']:.0f} | {mode} "
                f"| {lat['p50_ms']:.2f} | {lat['p95_ms']:.2f} | {r['baseline']['p50_ms']:.2f} / {r['baseline']['p95_ms']:.2f} "
                f"| {r['hybrid_vs_baseline_p50']:.2f}x, {r['hybrid_vs_baseline_p95']:.2f}x |")
    lines += ["", "Index sizes (MiB):", "", "| size | memory | GIN (tsv) | embeddings | HNSW | registry | baseline table | baseline HNSW |",
              "|---|---|---|---|---|---|---|---|"]
    for r in report["sizes"]:
        s = {k: v / 2**20 for k, v in r["index_sizes"].items()}
        lines.append(f"| {r['size']:,} | {s['memory_table_bytes']:.1f} | {s['memory_tsv_gin_bytes']:.1f} | "
                     f"{s['memory_embedding_table_bytes']:.1f} | {s['memory_embedding_hnsw_bytes']:.1f} | "
                     f"{s['projection_dependency_bytes']:.1f} | {s['baseline_table_bytes']:.1f} | {s['baseline_hnsw_bytes']:.1f} |")
    lines += ["", "Erasing one data subject (0.1% of the rows):", ""]
    for r in report["sizes"]:
        e = r["erase_one_subject"]
        lines.append(f"- {r['size']:,}: {e['seconds'] * 1000:.0f} ms for {e['observations']} observations and "
                     f"{e['rows_erased'].get('memory', 0)} memories; residual zero: {e['residual_zero']}")
    w = report.get("worker")
    if w:
        lines += ["", f"Worker: {w['worker_per_second']:.0f} texts/s end to end vs raw model "
                  f"{w['raw_model_per_second']:.0f} texts/s on the same {w['texts']} memory inputs and "
                  f"{w.get('passages', 0)} passages, in batches of 64: {w['ratio']:.0%}.",
                  "", f"Single-call ingest (append_observation + remember per memory, autocommit): "
                  f"{w['single_call_ingest']['per_second']:.0f} memories/s on {w['texts']} memories."]
    lines += ["", "Targets:"]
    for r in report["sizes"]:
        if r["size"] in TARGETS:
            p50, p95 = TARGETS[r["size"]]
            lat = r["recall"]["hybrid"]
            lines.append(f"- {r['size']:,}: hybrid p50 {lat['p50_ms']:.1f} <= {p50} ms: "
                         f"{'met' if lat['p50_ms'] <= p50 else 'NOT met'}; p95 {lat['p95_ms']:.1f} <= {p95} ms: "
                         f"{'met' if lat['p95_ms'] <= p95 else 'NOT met'}; ratio {r['hybrid_vs_baseline_p50']:.2f} <= 1.5: "
                         f"{'met' if r['hybrid_vs_baseline_p50'] <= 1.5 else 'NOT met'}")
        lines.append(f"- {r['size']:,}: ingest {r['ingest']['per_second']:.0f} >= 2000/s: "
                     f"{'met' if r['ingest']['per_second'] >= 2000 else 'NOT met'}")
    if w:
        lines.append(f"- worker {w['ratio']:.0%} of raw model >= 90%: {'met' if w['ratio'] >= 0.9 else 'NOT met'}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="make bench")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--out", default=str(HERE / "results"))
    parser.add_argument("--no-worker", action="store_true")
    args = parser.parse_args(argv)

    home = Path(tempfile.mkdtemp(prefix="pgrb-"))
    os.environ["PGRECALL_HOME"] = str(home)
    os.environ.pop("PGRECALL_DSN", None)
    from pgrecall import server

    info = server.start()
    admin = info.uri()
    report = {"started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "machine": f"{platform.machine()}, {os.cpu_count()} cores, PostgreSQL 18 (embedded)",
              "command": "make bench BENCH_ARGS='" + " ".join(argv or []) + "'", "sizes": []}
    try:
        with psycopg.connect(admin, autocommit=True) as conn:
            # Room for a 1M-vector HNSW graph to be built in memory (~1.7 GB), and
            # for the indexes recall reads to stay in shared buffers.
            conn.execute("alter system set maintenance_work_mem = '4GB'")
            conn.execute("alter system set shared_buffers = '4GB'")
            conn.execute("alter system set max_parallel_maintenance_workers = 1")
        server.stop()
        server.start()
        for n in [int(s) for s in args.sizes.split(",") if s]:
            report["sizes"].append(run_size(admin, n, args.queries))
            partial = {**report, "sizes": [{k: v for k, v in r.items() if k != "plans"} for r in report["sizes"]]}
            Path(args.out).mkdir(parents=True, exist_ok=True)
            (Path(args.out) / "partial.json").write_text(json.dumps(partial, indent=2))
        if not args.no_worker:
            log("worker throughput against the raw model")
            report["worker"] = worker_throughput(admin)
    finally:
        server.stop()
        shutil.rmtree(home, ignore_errors=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = report["started"].replace(":", "").replace("-", "")[:15]
    for r in report["sizes"]:
        plans = r.pop("plans", {})
        (out / f"plans-{stamp}-{r['size']}.txt").write_text(
            "\n\n".join(f"===== {mode} =====\n{text}" for mode, text in plans.items()))
    (out / f"bench-{stamp}.json").write_text(json.dumps(report, indent=2))
    md = markdown(report)
    (out / f"bench-{stamp}.md").write_text(md)
    (out / "latest.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
