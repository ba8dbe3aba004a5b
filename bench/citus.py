"""``make bench-citus``: recall and remember through a Citus coordinator against the same tenant on one
server, interleaved call by call (issue #45, item 1: target <= 1.3x + 1 ms). Results:
bench/results/latest-citus.md, the runs in bench/results/archive/.

Both servers are up at once, and each call is made on one side then the other, the side that goes first
alternating from call to call, so that a change of the machine's load (2 shared cores) lands on both
sides alike; the report gives the load average at the start and the end.

Both sides get the same corpus (bench/corpus.py), the same vectors and the same queries, and run with
the same settings (fsync and synchronous_commit off, as the local cluster's nodes do). The cluster is
``pgrecall.cluster.LocalCluster`` from ``make citus`` (a coordinator and two workers on 127.0.0.1):
the application connects to the coordinator, which delegates each call to the worker holding the
tenant (one round trip; outside a transaction block). pgrecall's embedding worker stores the vectors
on both sides, with a stand-in model (HashedVectors: a unit vector seeded by each text's hash): the
model is not what is compared, and both sides search the same graph.

    python -m bench.citus                         # 10k memories, 200 queries a mode
    python -m bench.citus --memories 2000 --queries 100
    python -m bench.citus --load 120              # sustained load, 32 agents on 4 tenants (bench/citus_load.py)
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import psycopg

from pgrecall.embedder import MODEL_NAME

from . import corpus
from .harness import embedded_server, new_report, write_report
from .run import MODEL, SCOPES, ingest, summary

HERE = Path(__file__).resolve().parent
TENANT = "citusbench"
MODES = ("lexical", "hybrid", "dense")
SAME_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def recall_sql(tenant: str) -> str:
    """A recall as the driver sends one: ``select ... from recall(...)`` and nothing else. Citus delegates a
    call only in that form (or ``select f(...)``): with a WHERE or an ORDER BY around it (as bench/run.py's
    statement has: ``where memory_id is not null order by rank``) the coordinator runs the function itself
    and sends each of its statements to the worker, ~20 round trips a recall. recall() returns its rows in
    rank order; the fact rows (no memory_id) are dropped by the caller."""
    return (f"select memory_id from {tenant}.recall(%s, %s, %s, 'converse', %b, %s, 10, "
            f"p_query_model => '{MODEL}')")


def unit_vectors(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, 384)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def query_vectors(admin: str, tenant: str, n: int) -> np.ndarray:
    """Query vectors that find memories: each the normalised sum of three stored memory vectors (a cosine of ~0.58
    with each, above dense_floor 0.3), the memories chosen by a hash of their text, so both sides (the same texts, the
    same HashedVectors) get the same queries. A random unit vector's cosines (~0.05) all fall under the floor: the
    dense arm found nothing, and a dense recall read no rows nor provenance."""
    with psycopg.connect(admin) as conn:
        rows = conn.execute(f"""select me.embedding::real[] from {tenant}.memory_embedding me
                                  join {tenant}.memory m on m.id = me.memory_id
                                 order by md5(m.body), m.id limit %s""", (3 * n,)).fetchall()
    v = np.asarray([r[0] for r in rows], dtype=np.float32).reshape(n, 3, -1).sum(axis=1)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


class HashedVectors:
    """A stand-in model for the bench: a unit vector seeded by each text's hash, so both sides store the
    same vectors for the same inputs, through pgrecall's own embedding worker (its claim and store)."""

    name = MODEL_NAME

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.stack([unit_vectors(1, int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "big"))[0]
                         for t in texts])


def load_vectors(worker: str, tenant: str) -> dict:
    """The embedding worker drains both queues (memories and passages) against the node the app uses."""
    from pgrecall.worker import Worker

    started = time.perf_counter()
    stats = Worker(tenant, conninfo=worker, embedder=HashedVectors()).drain(refresh_stats=False)
    return {"stored": stats.stored, "passages": stats.passages_stored, "seconds": time.perf_counter() - started}


def prepare(admin: str, app: str, worker: str, texts: list[str]) -> dict:
    """Install the tenant, ingest the corpus, store the vectors and refresh the statistics (not compared)."""
    from pgrecall import install

    with psycopg.connect(admin, autocommit=True) as conn:
        install.install(conn, [TENANT])
    loaded, _ = ingest(app, TENANT, texts)
    stored = load_vectors(worker, TENANT)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"select {TENANT}.refresh_term_stats()")
        conn.execute("analyze")
    log(f"loaded {loaded['created']} memories in {loaded['seconds']:.0f} s; the worker stored {stored['stored']} "
        f"memory and {stored['passages']} passage vectors in {stored['seconds']:.0f} s")
    return {"ingest": loaded, "vectors": stored}


def interleaved(conns: list[psycopg.Connection], call, items: list) -> list[list[float]]:
    """Each item on every side in turn, the side that goes first rotating from one item to the next, so
    that a shift of the machine's load lands on every side alike. Returns each side's times in ms."""
    times: list[list[float]] = [[] for _ in conns]
    for i, item in enumerate(items):
        for k in range(len(conns)):
            side = (i + k) % len(conns)
            started = time.perf_counter()
            call(conns[side], item)
            times[side].append((time.perf_counter() - started) * 1000)
    return times


def measure(apps: list[str], qtexts: list[str], qvecs: np.ndarray, remembers: int) -> list[dict]:
    """Recall (each mode) and remember on every side (their app DSNs), interleaved call by call, each on one
    autocommit connection per side; an untimed pass over every query of a mode first, interleaved too."""
    sql = recall_sql(TENANT)
    items = [(t, v.tolist()) for t, v in zip(qtexts, qvecs)]
    results: list[dict] = [{"recall": {}} for _ in apps]
    with ExitStack() as stack:
        conns = [stack.enter_context(psycopg.connect(app, autocommit=True)) for app in apps]
        for mode in MODES:
            def call(conn, item, mode=mode):
                text, vec = item
                return conn.execute(sql, ("agent", SCOPES, text, vec if mode != "lexical" else None, mode)).fetchall()
            interleaved(conns, call, items)
            for r, times in zip(results, interleaved(conns, call, items)):
                r["recall"][mode] = {**summary(times), "warmup": len(items)}
            log(f"recall {mode}: " + " / ".join(f"{r['recall'][mode]['p50_ms']:.2f}" for r in results) + " ms p50")
        for r, conn in zip(results, conns):  # how many answers (ids differ between the sides)
            for mode in ("hybrid", "dense"):
                r["recall"][f"{mode}_answers"] = sum(1 for t, v in items
                                                     for (m,) in conn.execute(sql, ("agent", SCOPES, t, v, mode))
                                                     if m is not None)
        # Single remember() calls, each citing a turn appended on its side before the timing starts.
        offsets = [[conn.execute(f"select {TENANT}.append_observation('agent', %s, %s, %s, 'user')",
                                 (SCOPES, SCOPES[0], f"bench remember turn {i}")).fetchone()[0]
                     for i in range(remembers)] for conn in conns]

        def remember(conn, i):
            conn.execute(f"select * from {TENANT}.remember('agent', %s, %s, %s, %s, array['converse'])",
                         (SCOPES, SCOPES[0], f"bench remembers fact number {i} about zq{i}",
                          [offsets[conns.index(conn)][i]])).fetchall()
        for r, times in zip(results, interleaved(conns, remember, list(range(remembers)))):
            r["remember"] = summary(times)
        log("remember: " + " / ".join(f"{r['remember']['p50_ms']:.2f}" for r in results) + " ms p50")
    return results


def markdown(r: dict) -> str:
    one, cl = r["single"], r["citus"]
    lines = [f"# Citus: through the coordinator vs one server, interleaved ({r['started']})", "",
             f"{r['memories']} memories, {r['queries']} queries a mode, {r['remembers']} remember calls; "
             f"{r['machine']}. Both servers up at once (the embedded one-server PostgreSQL and a local Citus "
             f"cluster: a coordinator and two workers, the tenant on {cl['node']}); each call made on one side "
             "then the other, the side that goes first alternating from call to call, after an untimed "
             "interleaved pass over every query of a mode. Each query vector is the sum of three memories' vectors "
             "(dense and hybrid recall find them, and read their rows and provenance). "
             "Target: cluster p50 <= 1.3 x single p50 + 1 ms. "
             f"Load average (1 min) {r['load_start']:.2f} at the start, {r['load_timed']:.2f} when the timing "
             f"began, {r['load_end']:.2f} at the end.", "",
             "| call | single p50 | cluster p50 | ratio p50 | single p95 | cluster p95 | ratio p95 | p50 target "
             "| met |",
             "|---|---|---|---|---|---|---|---|---|"]
    rows = [(f"recall {m}", one["recall"][m], cl["recall"][m]) for m in MODES] + \
           [("remember", one["remember"], cl["remember"])]
    for label, a, b in rows:
        target = 1.3 * a["p50_ms"] + 1
        lines.append(f"| {label} | {a['p50_ms']:.2f} ms | {b['p50_ms']:.2f} ms | {b['p50_ms'] / a['p50_ms']:.2f}x | "
                     f"{a['p95_ms']:.2f} ms | {b['p95_ms']:.2f} ms | {b['p95_ms'] / a['p95_ms']:.2f}x | "
                     f"{target:.2f} ms | {'yes' if b['p50_ms'] <= target else 'no'} |")
    lines += ["", f"Command: `{r['command']}`. Memory rows over all queries, single / cluster: hybrid "
              f"{one['recall']['hybrid_answers']} / {cl['recall']['hybrid_answers']}, dense "
              f"{one['recall']['dense_answers']} / {cl['recall']['dense_answers']}. Loading (not compared, "
              f"one side after the other): single {one['ingest']['seconds']:.0f} s, cluster "
              f"{cl['ingest']['seconds']:.0f} s (remember_many in transactions, which Citus does not delegate)."]
    return "\n".join(lines) + "\n"


def parse_args(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="make bench-citus")
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--remembers", type=int, default=200)
    parser.add_argument("--out", default=str(HERE / "results"))
    parser.add_argument("--single-only", action="store_true",
                        help="the one-server side alone, printed as JSON (e.g. for another checkout's SQL)")
    parser.add_argument("--load", type=float, metavar="SECONDS",
                        help="instead: bench/load.py's agents for SECONDS a side, through the coordinator on tenants "
                             "spread over both workers, then on one server (bench/citus_load.py)")
    parser.add_argument("--clients", type=int, default=32, help="with --load: concurrent agents")
    parser.add_argument("--tenants", type=int, default=4, help="with --load: tenants the agents are spread over")
    parser.add_argument("--mix", default="70,20,10", help="with --load: recall,append+remember,message search")
    parser.add_argument("--rate", type=float, default=0.0, help="with --load: operations/s offered (default: closed)")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    from pgrecall.cluster import NODE_SETTINGS, LocalCluster, find_citus_build

    args = parse_args(argv)
    if args.load:
        from . import citus_load

        return citus_load.main(args, argv)
    build = find_citus_build()
    if build is None and not args.single_only:
        raise SystemExit("no Citus build in .citus/: run make citus")
    assert all(NODE_SETTINGS[k] == v for k, v in SAME_SETTINGS.items())
    report = new_report("make bench-citus BENCH_ARGS='{args}'", argv, memories=args.memories, queries=args.queries,
                        remembers=args.remembers, load_start=os.getloadavg()[0])
    texts = corpus.memories(args.memories)
    qtexts = corpus.queries(args.queries, args.memories)
    with ExitStack() as stack:
        log("one server")
        info = stack.enter_context(embedded_server("pgrc-", SAME_SETTINGS))
        sides = {"single": (info.uri(), info.uri(user=f"pgrecall_{TENANT}_app"),
                            info.uri(user=f"pgrecall_{TENANT}_worker"))}
        if not args.single_only:
            log("Citus: a coordinator and two workers")
            c = stack.enter_context(LocalCluster(build, workers=2)).coordinator
            sides["citus"] = (c.dsn(), c.dsn(user=f"pgrecall_{TENANT}_app"), c.dsn(user=f"pgrecall_{TENANT}_worker"))
        for name, (admin, app, worker) in sides.items():
            log(f"loading: {name}")
            report[name] = prepare(admin, app, worker, texts)
        qvecs = query_vectors(sides["single"][0], TENANT, len(qtexts))
        report["load_timed"] = os.getloadavg()[0]
        for name, measured in zip(sides, measure([app for _, app, _ in sides.values()], qtexts, qvecs,
                                                 args.remembers)):
            report[name].update(measured)
        report["load_end"] = os.getloadavg()[0]
        if args.single_only:
            import json

            print(json.dumps({k: report["single"][k] for k in ("recall", "remember")}, indent=1))
            return 0
        with psycopg.connect(sides["citus"][0]) as conn:
            report["citus"]["node"] = conn.execute("select pgrecall.tenant_node(%s)", (TENANT,)).fetchone()[0]
    md = markdown(report)
    write_report(Path(args.out), "citus", report, md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
