"""Recall latency of two trees of function files on ONE tenant and corpus, interleaved.

    python -m bench.ab --other /path/to/another/checkout [--size 10000] [--rounds 4] [--scenario narrow]

On a shared, noisy machine two bench runs minutes apart are not comparable; this loads one corpus (the
bench's, through the same public paths), then switches the tenant's function files between this
checkout's and the other's (migrations must be the same: only plpgsql/ differs) and times the three
recall modes for each, round after round, so both see the same machine; the bare one-table statement
(bench.run's baseline) runs in the same rounds, so each tree's ratio to it is measured on the same machine
too. Scenarios: ``agent`` (80% of the memories eligible; the bare statement unfiltered), ``users`` (each
memory private to one of 50 users; the queries cycle over the users) and ``narrow`` (a principal who may
see 200), both against the bare statement filtered by its indexed user column. Prints p50/p95 per tree and
mode over all rounds, and the ratios of the medians. Not part of CI.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import psycopg

from . import corpus
from .harness import embedded_server
from .run import (
    BASELINE_SQL,
    MODES,
    SCOPES,
    USERS,
    _or_query,
    _recall_sql,
    assign_users,
    build_baseline,
    cached_embeddings,
    corpus_for,
    give_audiences,
    ingest,
    install_tenant,
    log,
    role_uri,
    store_embeddings,
    summary,
    tenant_ef,
    text_of_memory_index,
)


def use_functions(admin: str, tenant: str, root: Path) -> list:
    """Install the function files under root/plpgsql (this checkout's control plane and migrations)."""
    from pgrecall import install, sources

    original = sources.functions

    def functions():
        # the other checkout may predate plpgsql/install_order (a flat folder applied by name)
        folder = root / "plpgsql"
        order = folder / sources.INSTALL_ORDER
        named = ([line.strip() for line in order.read_text().splitlines()
                  if line.strip() and not line.startswith("#")] if order.exists()
                 else sorted(p.name for p in folder.glob("*.sql")))
        return [sources.Source("function", name, None, (folder / name).read_text(encoding="utf-8"), position)
                for position, name in enumerate(named, start=1)]

    sources.functions = functions
    try:
        with psycopg.connect(admin, autocommit=True) as conn:
            return install.install(conn, [tenant])
    finally:
        sources.functions = original


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--other", required=True, help="a checkout whose plpgsql/ is compared with this one's")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--scenario", choices=("agent", "users", "narrow"), default="agent")
    args = parser.parse_args()

    tenant = "ab"
    with embedded_server("pgrab-") as info:
        admin = info.uri()
        used: list = []
        texts, vectors, _ = corpus_for(args.size, 100_000, used)
        qtexts = corpus.queries(args.queries, args.size)
        qvecs = cached_embeddings("queries", qtexts, used)
        app = install_tenant(admin, tenant)
        log(f"ab: ingest {args.size}")
        _, memory_of_text = ingest(app, tenant, texts)
        store_embeddings(role_uri(tenant, "worker"), tenant, text_of_memory_index(memory_of_text), vectors)
        with psycopg.connect(role_uri(tenant, "worker"), autocommit=True) as conn:
            conn.execute(f"select * from {tenant}.refresh_term_stats()")
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"vacuum analyze {tenant}.memory, {tenant}.memory_embedding")
        text_of_memory = text_of_memory_index(memory_of_text)
        assignment = assign_users(memory_of_text)
        base = build_baseline(admin, tenant, args.size, texts, vectors, assignment, text_of_memory, False, args.size)
        if args.scenario == "agent":
            principal_of, user_of = ["agent"] * len(qtexts), None
        else:
            names = give_audiences(admin, app, tenant, assignment)
            user_of = [k % USERS if args.scenario == "users" else USERS for k in range(len(qtexts))]
            principal_of = [names[u] for u in user_of]
        bare_sql = BASELINE_SQL.format(table=base["table"],
                                       user_filter="" if user_of is None else "and user_id = %(u)s")
        ef = tenant_ef(admin, tenant)
        trees = {"this": Path(__file__).resolve().parents[1], "other": Path(args.other).resolve()}
        modes = args.modes.split(",")
        times: dict = {(t, m): [] for t in trees for m in modes}
        times["bare"] = []
        sql = _recall_sql(tenant)
        items = [(principal_of[k], t, v.tolist()) for k, (t, v) in enumerate(zip(qtexts, qvecs))]

        def bare_round():
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f"set hnsw.ef_search = {int(ef)}")
                if user_of is not None:
                    conn.execute("set hnsw.iterative_scan = relaxed_order")
                for k, v in enumerate(qvecs):
                    orq = _or_query(conn, qtexts[k])
                    started = time.perf_counter()
                    conn.execute(bare_sql, {"orq": orq, "v": v.tolist(),
                                            "u": None if user_of is None else user_of[k]}).fetchall()
                    if k >= 10 or r > 0:
                        times["bare"].append((time.perf_counter() - started) * 1000)

        for r in range(args.rounds):
            order = list(trees) if r % 2 == 0 else list(reversed(trees))
            for name in order:
                use_functions(admin, tenant, trees[name])
                for mode in modes:
                    def call(conn, item, mode=mode):
                        principal, text, vec = item
                        return conn.execute(sql, (principal, SCOPES, text, vec if mode != "lexical" else None,
                                                  mode)).fetchall()

                    with psycopg.connect(app, autocommit=True) as conn:
                        for q in items[:10]:
                            call(conn, q)
                        for q in items:
                            started = time.perf_counter()
                            call(conn, q)
                            times[(name, mode)].append((time.perf_counter() - started) * 1000)
                if name == order[0]:
                    bare_round()
                log(f"ab: round {r + 1} {name} done, load {os.getloadavg()[0]:.1f}")
        bare = summary(times["bare"])
        print(f"\n{args.size} memories, scenario {args.scenario}, {args.queries} queries x {args.rounds} rounds per "
              f"tree and mode, interleaved; load average at the end {os.getloadavg()}")
        print(f"bare statement{'' if user_of is None else ' filtered by user'}: "
              f"p50 {bare['p50_ms']:.2f} / p95 {bare['p95_ms']:.2f} ms")
        print("| mode | this p50 / p95 ms | other p50 / p95 ms | this / other p50 | this / bare p50 "
              "| other / bare p50 |")
        print("|---|---|---|---|---|---|")
        for mode in modes:
            a, b = summary(times[("this", mode)]), summary(times[("other", mode)])
            print(f"| {mode} | {a['p50_ms']:.2f} / {a['p95_ms']:.2f} | {b['p50_ms']:.2f} / {b['p95_ms']:.2f} | "
                  f"{a['p50_ms'] / b['p50_ms']:.2f} | {a['p50_ms'] / bare['p50_ms']:.2f} | "
                  f"{b['p50_ms'] / bare['p50_ms']:.2f} |")


if __name__ == "__main__":
    main()
