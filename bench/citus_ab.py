"""An A/B of function files inside ONE server or ONE Citus cluster (issue #45, item 1): two tenants, one with
the files as another git ref has them (A, "old"), one with this checkout's (B, "new"); calls alternate between
them (A then B, then B then A), so a shift of the shared machine's load lands on both.

    python -m bench.citus_ab serve --env /tmp/ab.json [--single] [--memories 1000] &   # up until killed
    python -m bench.citus_ab ab --env /tmp/ab.json --old main --files plpgsql/memory/remember.sql [--calls 150]
    python -m bench.citus_ab census --env /tmp/ab.json        # on Citus: each kind's local statements

Both tenants are installed once (serve); ``ab`` then puts the functions of ``--files`` as the old ref has them
in tenant A and as this checkout has them in tenant B, rendered for each, on every node with DDL propagation
off (CREATE OR REPLACE keeps the owner and the grants), so one cluster serves many A/Bs. A development tool:
the figures go to docs/scale-out.md by hand, with the load average it prints.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack

import psycopg
from psycopg.types.json import Jsonb

from . import corpus
from .citus import HashedVectors, query_vectors, recall_sql
from .run import SCOPES, ingest

TENANTS = ("abold", "abnew")
KINDS = ("remember", "lexical", "hybrid", "dense")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] load {os.getloadavg()[0]:.2f} {msg}", flush=True)


def prepare(admin: str, dsn, memories: int) -> None:
    from pgrecall import install
    from pgrecall.worker import Worker

    with psycopg.connect(admin, autocommit=True) as conn:
        install.install(conn, list(TENANTS))
    for t in TENANTS:
        ingest(dsn(f"pgrecall_{t}_app"), t, corpus.memories(memories))
        Worker(t, conninfo=dsn(f"pgrecall_{t}_worker"), embedder=HashedVectors()).drain(refresh_stats=False)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"select {t}.refresh_term_stats()")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("analyze")


def one_call(conn: psycopg.Connection, tenant: str, kind: str, i: int, offsets: list[int], qtexts, qvecs) -> None:
    if kind == "append":  # not in KINDS: --kinds append
        conn.execute(f"select {tenant}.append_observation('agent', %s, %s, %s, 'user')",
                     (SCOPES, SCOPES[0], f"ab appends turn number {i} about zq{i}")).fetchone()
    elif kind == "assert_fact":  # not in KINDS: --kinds assert_fact; 20 subjects, so most assertions supersede
        conn.execute(f"select * from {tenant}.assert_fact('agent', %s, %s, %s, 'lives_in', %s, %s)",
                     (SCOPES, SCOPES[0], f"person {i % 20}", f"Town {offsets[i]}",
                      Jsonb([{"offset": offsets[i], "quote": "I live in"}]))).fetchall()
    elif kind == "remember":
        conn.execute(f"select * from {tenant}.remember('agent', %s, %s, %s, %s, array['converse'])",
                     (SCOPES, SCOPES[0], f"ab remembers fact number {i} about zq{i}", [offsets[i]])).fetchall()
    else:
        q = i % len(qtexts)
        conn.execute(recall_sql(tenant), ("agent", SCOPES, qtexts[q], qvecs[q].tolist() if kind != "lexical" else None,
                                          kind)).fetchall()


def measure(admin: str, apps: list[str], kinds: list[str], calls: int, rounds: int, tenants: list[str]) -> None:
    qtexts = corpus.queries(100, 2000)
    qvecs = query_vectors(admin, tenants[0], len(qtexts))
    with ExitStack() as stack:
        conns = [stack.enter_context(psycopg.connect(a, autocommit=True)) for a in apps]
        for r in range(rounds):
            for kind in kinds:
                offsets = [[] for _ in conns]
                if kind in ("remember", "assert_fact"):
                    offsets = [[c.execute(f"select {t}.append_observation('agent', %s, %s, %s, 'user')",
                                          (SCOPES, SCOPES[0], f"ab turn {r} {i}: I live in a town")).fetchone()[0]
                                for i in range(calls + 20)] for c, t in zip(conns, tenants)]
                for i in range(20):  # warm, untimed
                    for c, t, o in zip(conns, tenants, offsets):
                        one_call(c, t, kind, calls + i, o, qtexts, qvecs)
                times: list[list[float]] = [[], []]
                for i in range(calls):
                    for k in range(2):
                        side = (i + k) % 2
                        began = time.perf_counter()
                        one_call(conns[side], tenants[side], kind, i, offsets[side], qtexts, qvecs)
                        times[side].append((time.perf_counter() - began) * 1000)
                q = [statistics.quantiles(t, n=10) for t in times]
                log(f"round {r + 1} {kind:8} old/new p50 {statistics.median(times[0]):.2f} / "
                    f"{statistics.median(times[1]):.2f} ms, p90 {q[0][8]:.2f} / {q[1][8]:.2f} ms ({calls} calls each)")


def census(admin: str, nodes: list[str], app: str, kinds: list[str], tenant: str) -> None:
    """Each kind once on the tenant with the new functions, with citus.log_local_commands: the statements its
    worker runs locally (and the INSERT ... SELECTs whose rows it copies into a shard)."""
    role = f"pgrecall_{tenant}_app"

    def set_all(action: str) -> None:
        for node in nodes:  # one node at a time: ALTER ROLE propagated from every node at once deadlocks
            with psycopg.connect(node, autocommit=True) as conn:
                conn.execute("set citus.enable_ddl_propagation = off")
                conn.execute(f"alter role {role} {action}")

    set_all("set citus.log_local_commands = on")
    qtexts = corpus.queries(5, 2000)
    qvecs = query_vectors(admin, tenant, 5)
    with psycopg.connect(app, autocommit=True) as conn:
        off = conn.execute(f"select {tenant}.append_observation('agent', %s, %s, 'census turn', 'user')",
                           (SCOPES, SCOPES[0])).fetchone()[0]
        notes: list[str] = []
        conn.add_notice_handler(lambda d: notes.append(d.message_primary or ""))
        for kind in kinds:
            one_call(conn, tenant, kind, 900, [off] * 1000, qtexts, qvecs)  # warm
            notes.clear()
            one_call(conn, tenant, kind, 901, [off] * 1000, qtexts, qvecs)
            local = [n for n in notes if n.startswith("executing the command locally")]
            copies = sum(1 for n in notes if n.startswith("executing the copy locally"))
            print(f"\n## {kind}: {len(local)} local statements, {copies} local copies")
            for n in local:
                print("  -", n[len("executing the command locally: "):][:int(os.environ.get("CENSUS_WIDTH", "160"))])
    set_all("reset citus.log_local_commands")


def restore(admin: str, nodes: list[str], ref: str, files: list[str], tenants: list[str]) -> None:
    """The first tenant's functions of each file as ref has them, the second's as this checkout has them, on
    every node."""
    for f in files:
        old = subprocess.run(["git", "show", f"{ref}:{f}"], check=True, capture_output=True, text=True).stdout
        with open(f) as new:
            put(admin, nodes, old, tenants[0])
            put(admin, nodes, new.read(), tenants[1])
        log(f"{f}: {tenants[0]} as of {ref}, {tenants[1]} as in this checkout")


def put(admin: str, nodes: list[str], body: str, tenant: str) -> None:
    with psycopg.connect(admin, autocommit=True) as conn:
        sql = conn.execute("select pgrecall._render(%s, %s)", (body, tenant)).fetchone()[0]
    for node in nodes:
        with psycopg.connect(node, autocommit=True) as conn:
            if conn.execute("select exists (select 1 from pg_extension where extname = 'citus')").fetchone()[0]:
                conn.execute("set citus.enable_ddl_propagation = off")
            conn.execute(sql.encode())


def serve(args) -> int:
    """Start a server or a cluster, install and load both tenants, write how to reach them to --env, and wait
    (until killed)."""
    settings = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # kill PID: the nodes are stopped on the way out
    with ExitStack() as stack:
        if args.single:
            from .harness import embedded_server

            info = stack.enter_context(embedded_server("pgab-", settings))
            env = {"admin": info.uri(), "nodes": [info.uri()], "app": info.uri(user="{user}")}
        else:
            from pgrecall import cluster

            running = stack.enter_context(cluster.LocalCluster(cluster.find_citus_build(), workers=2))
            c = running.coordinator
            env = {"admin": c.dsn(), "nodes": [n.dsn() for n in [c, *running.worker_nodes]],
                   "app": c.dsn(user="{user}")}
        prepare(env["admin"], lambda user: env["app"].replace("{user}", user), args.memories)
        with open(args.env, "w") as f:
            json.dump(env, f)
        log(f"ready: {args.env}")
        while True:
            time.sleep(60)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.citus_ab")
    p.add_argument("command", choices=("serve", "ab", "census"))
    p.add_argument("--env", required=True, help="serve writes it; ab and census read it")
    p.add_argument("--old", default="main", help="git ref of tenant A's function files")
    p.add_argument("--files", default="", help="comma-separated function files: A as --old has them, B as here")
    p.add_argument("--single", action="store_true", help="serve: one embedded server instead of a Citus cluster")
    p.add_argument("--memories", type=int, default=1000)
    p.add_argument("--calls", type=int, default=150)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--kinds", default=",".join(KINDS))
    p.add_argument("--swap", action="store_true", help="the old functions in the second tenant, the new in the first "
                   "(on Citus the tenants may sit on different workers)")
    args = p.parse_args(argv)
    if args.command == "serve":
        return serve(args)
    with open(args.env) as f:
        env = json.load(f)
    tenants = list(reversed(TENANTS)) if args.swap else list(TENANTS)
    app = [env["app"].replace("{user}", f"pgrecall_{t}_app") for t in tenants]
    kinds = args.kinds.split(",")
    restore(env["admin"], env["nodes"], args.old, [f for f in args.files.split(",") if f], tenants)
    if args.command == "census":
        census(env["admin"], env["nodes"], app[1], kinds, tenants[1])
    else:
        measure(env["admin"], app, kinds, args.calls, args.rounds, tenants)
    log("end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
