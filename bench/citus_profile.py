"""Where a call delegated through the Citus coordinator spends its time on the worker, statement by
statement (issue #29, item 4): pg_stat_statements with track = all and track_planning on every node of
a local cluster (and on one server, for the same calls), reset after a warm-up, then N remember() calls
and N recalls a mode through the coordinator; prints each call's statements by total time (planning +
execution, mean per call of the outer function), on the node that holds the tenant.

    python -m bench.citus_profile --memories 2000 --calls 50 [--single]

A development tool (the numbers go to docs/scale-out.md by hand); nested statements are counted inside
their callers too, so the rows do not add up to the call.
"""

from __future__ import annotations

import argparse
import time

import psycopg

from . import corpus
from .citus import HashedVectors, query_vectors, recall_sql
from .run import SCOPES, ingest

TENANT = "citusprof"
STATS = {"pg_stat_statements.track": "all", "pg_stat_statements.track_planning": "on",
         "pg_stat_statements.max": "10000"}


def prepare(admin: str, app: str, worker: str, memories: int) -> None:
    from pgrecall import install
    from pgrecall.worker import Worker

    with psycopg.connect(admin, autocommit=True) as conn:
        install.install(conn, [TENANT])
    ingest(app, TENANT, corpus.memories(memories))
    Worker(TENANT, conninfo=worker, embedder=HashedVectors()).drain(refresh_stats=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"select {TENANT}.refresh_term_stats()")
        conn.execute("analyze")


def calls(admin: str, app: str, kind: str, n: int, start: int, reset=lambda: None) -> float:
    """n calls of one kind (reset() after the turns a remember cites are appended); the mean wall time in ms."""
    qtexts = corpus.queries(n, 2000)
    qvecs = query_vectors(admin, TENANT, n)
    with psycopg.connect(app, autocommit=True) as conn:
        if kind == "remember":
            offsets = [conn.execute(f"select {TENANT}.append_observation('agent', %s, %s, %s, 'user')",
                                    (SCOPES, SCOPES[0], f"profile turn {start + i}")).fetchone()[0] for i in range(n)]
        reset()
        began = time.perf_counter()
        for i in range(n):
            if kind == "remember":
                conn.execute(f"select * from {TENANT}.remember('agent', %s, %s, %s, %s, array['converse'])",
                             (SCOPES, SCOPES[0], f"profile remembers fact {start + i} about zq{start + i}",
                              [offsets[i]])).fetchall()
            else:
                conn.execute(recall_sql(TENANT), ("agent", SCOPES, qtexts[i],
                                                   qvecs[i].tolist() if kind != "lexical" else None, kind)).fetchall()
        return (time.perf_counter() - began) * 1000 / n


def profile(admin: str, stats_dsn: str, app: str, kind: str, n: int, start: int, top: int) -> None:
    calls(admin, app, kind, 10, start + 10_000)  # warm: plans cached, connections open
    def reset():
        with psycopg.connect(stats_dsn, autocommit=True) as conn:
            conn.execute("select pg_stat_statements_reset()")

    reset()
    wall = calls(admin, app, kind, n, start, reset)
    with psycopg.connect(stats_dsn, autocommit=True) as conn:
        rows = conn.execute("""select calls, total_plan_time, total_exec_time, rows, toplevel,
                                      regexp_replace(query, '\\s+', ' ', 'g')
                                 from pg_stat_statements
                                where dbid = (select oid from pg_database where datname = current_database())
                                order by total_plan_time + total_exec_time desc limit %s""", (top,)).fetchall()
        statements = conn.execute("select coalesce(sum(calls), 0) from pg_stat_statements "
                                  "where not toplevel").fetchone()[0]
    print(f"\n## {kind}: {n} calls, {wall:.2f} ms a call at the client; {statements / n:.0f} nested statements a call")
    print("| calls/call | plan ms/call | exec ms/call | top | statement |\n|---|---|---|---|---|")
    for c, plan, exe, _, toplevel, q in rows:
        print(f"| {c / n:.1f} | {plan / n:.3f} | {exe / n:.3f} | {'y' if toplevel else ''} | `{q[:150]}` |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.citus_profile")
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--single", action="store_true", help="one server instead of the cluster")
    parser.add_argument("--kinds", default="remember,lexical,hybrid,dense")
    args = parser.parse_args(argv)
    kinds = args.kinds.split(",")
    if args.single:
        from .harness import embedded_server

        settings = {"shared_preload_libraries": "pg_stat_statements", **STATS,
                    "fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
        with embedded_server("pgrp-", settings) as info:
            with psycopg.connect(info.uri(), autocommit=True) as conn:
                conn.execute("create extension if not exists pg_stat_statements")
            prepare(info.uri(), info.uri(user=f"pgrecall_{TENANT}_app"), info.uri(user=f"pgrecall_{TENANT}_worker"),
                    args.memories)
            for k, kind in enumerate(kinds):
                profile(info.uri(), info.uri(), info.uri(user=f"pgrecall_{TENANT}_app"), kind, args.calls, 1000 * k,
                        args.top)
        return 0
    from pgrecall import cluster as citus

    citus.NODE_SETTINGS.update({"shared_preload_libraries": "'citus,pg_stat_statements'",
                                **{k: f"'{v}'" for k, v in STATS.items()}})
    with citus.LocalCluster(citus.find_citus_build(), workers=2) as running:
        c = running.coordinator
        prepare(c.dsn(), c.dsn(user=f"pgrecall_{TENANT}_app"), c.dsn(user=f"pgrecall_{TENANT}_worker"), args.memories)
        with psycopg.connect(c.dsn(), autocommit=True) as conn:
            node = conn.execute("select pgrecall.tenant_node(%s)", (TENANT,)).fetchone()[0]
        worker = next(w for w in running.worker_nodes if node.endswith(f":{w.port}"))
        for n in (c, worker):
            with psycopg.connect(n.dsn(), autocommit=True) as conn:
                conn.execute("set citus.enable_ddl_propagation = off")
                conn.execute("create extension if not exists pg_stat_statements")
        for k, kind in enumerate(kinds):
            profile(c.dsn(), worker.dsn(), c.dsn(user=f"pgrecall_{TENANT}_app"), kind, args.calls, 1000 * k, args.top)
            with psycopg.connect(c.dsn(), autocommit=True) as conn:
                print("coordinator:", conn.execute("""select sum(calls), round(sum(total_exec_time)::numeric, 1)
                                                          from pg_stat_statements where query like %s""",
                                                   (f"%{TENANT}.%",)).fetchone())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
