"""``make bench-citus BENCH_ARGS='--load 120'``: many agents through the coordinator against one server (issue #45,
item 4). Results: bench/results/latest-citus-load.md, the runs in bench/results/archive/.

bench/load.py's clients (recall hybrid with a precomputed query vector, an append followed by a remember citing
it, a lexical message search; 70/20/10 by default) run for ``--load`` seconds on ``--tenants`` tenants, client n on
the n-th tenant round robin: first through the coordinator of a ``LocalCluster`` with two workers, the tenants
spread over both (moved with ``pgrecall.move_tenant`` if Citus placed them unevenly), then on one embedded
server of the same PostgreSQL build with the same settings. Both sides run with ``synchronous_commit = on`` (and
fsync off, as the cluster's nodes do), so a write the client saw acknowledged was written out by the server. Per
operation p50/p95/p99 on both sides and their ratio, errors by class, and afterwards, per tenant, bench/load.py's
loss check (every acknowledged append in the log with its words, every acknowledged memory there, offsets
without a gap).

    python -m bench.citus --load 120                    # 32 clients on 4 tenants, 2 minutes a side
    python -m bench.citus --load 10 --clients 8 --tenants 2
"""

from __future__ import annotations

import argparse
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg

from . import load
from .harness import embedded_server, new_report, write_report

# Over the cluster's NODE_SETTINGS: acknowledged means written (tests/test_citus.py's lost-worker test has it).
CLUSTER_SETTINGS = {"synchronous_commit": "on"}
# One server as the cluster's nodes run (pgrecall.cluster.NODE_SETTINGS with the above).
SINGLE_SETTINGS = {"fsync": "off", "synchronous_commit": "on", "full_page_writes": "off", "max_connections": "100"}
OPS = ("recall", "append", "remember", "search")


def log(msg: str) -> None:
    import time

    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def tenant_names(n: int) -> list[str]:
    return [f"cload{i + 1}" for i in range(n)]


def populate_all(apps: dict[str, str]) -> None:
    """bench/load.py's few hundred memories in every tenant, the tenants in parallel."""
    failed: list[BaseException] = []

    def one(tenant: str) -> None:
        try:
            load.populate(apps[tenant], tenant)
        except BaseException as exc:  # re-raised below, in the caller's thread
            failed.append(exc)

    threads = [threading.Thread(target=one, args=(t,)) for t in apps]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failed:
        raise failed[0]


def spread(admin: str, tenants: list[str], workers: list[str]) -> dict[str, str]:
    """Each tenant's node (host:port), after moving tenants from the fuller workers to the emptier ones until no
    worker holds more than one tenant above another."""
    with psycopg.connect(admin, autocommit=True) as conn:
        def node(t: str) -> str:
            return str(conn.execute("select pgrecall.tenant_node(%s)", (t,)).fetchone()[0])

        where = {t: node(t) for t in tenants}
        while True:
            held = Counter(where.values())
            counts = {w: held[w] for w in workers}
            full, empty = max(counts, key=counts.__getitem__), min(counts, key=counts.__getitem__)
            if counts[full] - counts[empty] <= 1:
                return where
            moving = next(t for t in tenants if where[t] == full)
            host, port = empty.rsplit(":", 1)
            log(f"moving {moving} from {full} to {empty}")
            where[moving] = str(conn.execute("select pgrecall.move_tenant(%s, %s, %s)",
                                             (moving, host, int(port))).fetchone()[0])


def on_cluster(tenants: list[str], args: argparse.Namespace, vectors: list[Any]) -> dict[str, Any]:
    from pgrecall import install
    from pgrecall.cluster import LocalCluster, find_citus_build

    build = find_citus_build()
    if build is None:
        raise SystemExit("no Citus build in .citus/: run make citus")
    with LocalCluster(build, workers=2, settings=CLUSTER_SETTINGS) as cluster:
        c = cluster.coordinator
        with psycopg.connect(c.dsn(), autocommit=True) as conn:
            install.install(conn, tenants)
        nodes = spread(c.dsn(), tenants, [f"127.0.0.1:{w.port}" for w in cluster.worker_nodes])
        apps = {t: c.dsn(user=f"pgrecall_{t}_app") for t in tenants}
        populate_all(apps)
        log(f"coordinator: {args.clients} clients for {args.load:.0f} s on {nodes}")
        result = load.run_tenants(c.dsn(), apps, args.clients, args.load, args.mix, rate=args.rate,
                                  wait_uris=[w.dsn() for w in cluster.worker_nodes], vectors=vectors)
    result["nodes"] = nodes
    return result


def on_one_server(tenants: list[str], args: argparse.Namespace, vectors: list[Any]) -> dict[str, Any]:
    from pgrecall import install

    with embedded_server("pgrecall-bench-cload-", SINGLE_SETTINGS) as info:
        with psycopg.connect(info.uri(), autocommit=True) as conn:
            install.install(conn, tenants)
        apps = {t: info.uri(user=f"pgrecall_{t}_app") for t in tenants}
        populate_all(apps)
        log(f"one server: {args.clients} clients for {args.load:.0f} s")
        return load.run_tenants(info.uri(), apps, args.clients, args.load, args.mix, rate=args.rate,
                                vectors=vectors)


def loss_line(loss: dict[str, dict[str, Any]]) -> str:
    return "; ".join(f"{t}: {x['acknowledged_appends']} appends ({x['missing_appends']} missing), "
                     f"{x['acknowledged_memories']} memories ({x['missing_memories']} missing), offsets "
                     f"1..{x['watermark']} {'contiguous' if x['offsets_contiguous'] else 'WITH GAPS'}"
                     for t, x in loss.items())


def markdown(r: dict[str, Any]) -> str:
    one, cl = r["single"], r["citus"]
    load_avg = {side: f"{x['load_average']['before'][0]:.1f} before, {x['load_average']['after'][0]:.1f} after"
                for side, x in (("single", one), ("citus", cl))}
    offered = f", {r['rate']:g} operations/s offered" if r["rate"] else ""
    lines = [f"# Many agents through the Citus coordinator vs one server ({r['started']})", "",
             f"{r['machine']}. Command: `{r['command']}`. {r['clients']} clients for {r['seconds']:.0f} s a side "
             f"on {len(r['tenants'])} tenants (client n on tenant n mod {len(r['tenants'])}), mix recall / append "
             f"+ remember / message search = {','.join(map(str, r['mix']))}"
             f"{offered}. "
             "Both sides synchronous_commit on, fsync off. The coordinator side first (a coordinator and two "
             "workers, tenants on " + ", ".join(f"{t} {n}" for t, n in cl["nodes"].items()) + f"), load average "
             f"{load_avg['citus']}; then one server, load average {load_avg['single']}.", "",
             "| operation | count one / coord. | one server p50 / p95 / p99 ms | coordinator p50 / p95 / p99 ms "
             "| ratio p50 / p95 / p99 |", "|---|---:|---:|---:|---:|"]
    for op in OPS:
        a, b = one["ops"][op], cl["ops"][op]
        q = ("p50_ms", "p95_ms", "p99_ms")
        lines.append(f"| {op} | {a['count']} / {b['count']} | " + " / ".join(f"{a[k]:.1f}" for k in q) + " | "
                     + " / ".join(f"{b[k]:.1f}" for k in q) + " | "
                     + " / ".join(f"{b[k] / a[k]:.1f}x" if a[k] else "-" for k in q) + " |")
    for label, x in (("Coordinator", cl), ("One server", one)):
        lines += ["", f"{label}: errors by class {x['errors'] or 'none'}; clients still running at the end "
                      f"{x['hung_clients']}. Loss check: {loss_line(x['loss'])}. Backends of the app roles at "
                      f"work{' on the workers' if x is cl else ''}, by wait event: "
                      + ", ".join(f"{k} {v}" for k, v in x["waits"].items() if k != "(samples)") + "."]
    return "\n".join(lines) + "\n"


def main(args: argparse.Namespace, argv: list[str] | None) -> int:
    """The load on both sides, and the report (called by bench/citus.py's main for --load)."""
    from pgrecall.embedder import get_embedder

    mix = tuple(int(x) for x in args.mix.split(","))
    assert len(mix) == 3, "--mix takes three weights"
    args.mix = mix
    tenants = tenant_names(args.tenants)
    vectors = list(get_embedder().encode_array(load.QUERIES))
    report = new_report("make bench-citus BENCH_ARGS='{args}'", argv, clients=args.clients, seconds=args.load,
                        mix=list(mix), rate=args.rate, tenants=tenants)
    log("Citus: a coordinator and two workers")
    report["citus"] = on_cluster(tenants, args, vectors)
    log("one server")
    report["single"] = on_one_server(tenants, args, vectors)
    md = markdown(report)
    write_report(Path(args.out), "citus-load", report, md)
    print(md)
    return 0
