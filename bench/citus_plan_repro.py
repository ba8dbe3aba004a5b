"""The Citus limit behind issue #45 item 1, reduced to one statement: inside a function on the worker, a statement
that joins (or wraps in a CTE or a subquery) tables of a distributed schema is planned by Citus, deparsed for the
shard and planned again for local execution on EVERY call; the same work as statements of one table each takes
Citus's fast path (no deparse) and costs a fraction.

    python -m bench.citus_plan_repro [--calls 2000] [--rounds 3]      # needs `make citus`

It starts a local cluster (a coordinator and one worker, pgrecall.cluster), makes schema ``dist`` with two tables
(``item``, 2,000 rows, and ``owner``, 50 rows), distributed by schema (single-shard tables, no distribution key,
as a pgrecall tenant is), and the same two tables in an ordinary schema ``plain`` on the worker, then defines on the
worker the same small PL/pgSQL functions in both schemas, each looking up 10 items and their owners' names:

- ``joined``: one statement, ``item`` joined to ``owner``;
- ``cte``: one statement, a CTE over ``item`` joined to ``owner``;
- ``subquery``: one statement over ``item`` with a scalar subquery on ``owner`` per row;
- ``one_table``: a statement of ``item`` alone into arrays, one of ``owner`` alone, and the same answer put
  together by a statement that reads no table.

Calls alternate between the shapes and schemas (``select dist.joined(...)`` on the worker, as a delegated call
runs there), and it prints each one's median ms per call and its cost over the same function on ``plain``. Why, in
Citus 14's source: a local plan is cached only when ``IsLocalPlanCachingSupported``
(planner/local_plan_cache.c) finds the job's pruning deferred, which ``RouterJob``
(planner/multi_router_planner.c) does only for a fast-path query with a parameter on the distribution key; a
single-shard table has none. Any other statement is deparsed and planned again per call, while a fast-path one
(``FastPathRouterQuery``, planner/fast_path_router_planner.c: one table, no CTE, no sublink, no set operation)
on a single-shard table avoids the deparse and takes the light planner.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import psycopg

from pgrecall import cluster

TABLES = """
create table {s}.owner (id bigint primary key, name text not null);
create table {s}.item (id bigint primary key, owner_id bigint not null, body text not null);
"""
FILL = """
insert into {s}.owner select g, 'owner ' || g from generate_series(1, 50) g;
insert into {s}.item select g, 1 + g % 50, 'item ' || g from generate_series(1, 2000) g;
"""
FUNCTIONS = """
create function {s}.joined(p_ids bigint[]) returns text[] language plpgsql stable as $$
declare v text[];
begin
    select array_agg(o.name order by i.id) into v from {s}.item i join {s}.owner o on o.id = i.owner_id
     where i.id = any (p_ids);
    return v;
end $$;
create function {s}.cte(p_ids bigint[]) returns text[] language plpgsql stable as $$
declare v text[];
begin
    with picked as (select i.id, i.owner_id from {s}.item i where i.id = any (p_ids))
    select array_agg(o.name order by p.id) into v from picked p join {s}.owner o on o.id = p.owner_id;
    return v;
end $$;
create function {s}.subquery(p_ids bigint[]) returns text[] language plpgsql stable as $$
declare v text[];
begin
    select array_agg((select o.name from {s}.owner o where o.id = i.owner_id) order by i.id) into v
      from {s}.item i where i.id = any (p_ids);
    return v;
end $$;
create function {s}.one_table(p_ids bigint[]) returns text[] language plpgsql stable as $$
declare v_item bigint[]; v_owner bigint[]; v_owners bigint[]; v_names text[]; v text[];
begin
    select array_agg(i.id), array_agg(i.owner_id) into v_item, v_owner from {s}.item i where i.id = any (p_ids);
    select array_agg(o.id), array_agg(o.name) into v_owners, v_names from {s}.owner o where o.id = any (v_owner);
    select array_agg(n.name order by k.id) into v
      from unnest(v_item, v_owner) k(id, owner_id) join unnest(v_owners, v_names) n(id, name) on n.id = k.owner_id;
    return v;
end $$;
"""
SHAPES = ("joined", "cte", "subquery", "one_table")
SCHEMAS = ("dist", "plain")


def build(running: cluster.LocalCluster) -> str:
    """The two schemas and their functions; returns the worker's DSN."""
    with psycopg.connect(running.coordinator.dsn(), autocommit=True) as conn:
        conn.execute("create schema dist")
        conn.execute(TABLES.format(s="dist"))
        conn.execute("select citus_schema_distribute('dist')")
        conn.execute(FILL.format(s="dist"))
        conn.execute("analyze dist.owner, dist.item")
    worker = running.worker_nodes[0].dsn()
    with psycopg.connect(worker, autocommit=True) as conn:
        conn.execute("set citus.enable_ddl_propagation = off")  # plain and the functions: the worker's alone
        conn.execute("create schema plain")
        conn.execute(TABLES.format(s="plain"))
        conn.execute(FILL.format(s="plain"))
        conn.execute("analyze plain.owner, plain.item")
        for s in SCHEMAS:
            conn.execute(FUNCTIONS.format(s=s))
    return worker


def measure(worker: str, calls: int, rounds: int) -> dict[tuple[str, str], list[float]]:
    ids = [[1 + (7 * i + j * 191) % 2000 for j in range(10)] for i in range(100)]
    medians: dict[tuple[str, str], list[float]] = {(s, f): [] for s in SCHEMAS for f in SHAPES}
    with psycopg.connect(worker, autocommit=True) as conn:
        answers = {(s, f): conn.execute(f"select {s}.{f}(%s)", (ids[0],)).fetchone()[0]
                   for s in SCHEMAS for f in SHAPES}
        assert len({tuple(a) for a in answers.values()}) == 1, answers  # every shape gives the same answer
        for f in SHAPES:  # warm: each statement's plans, the session's caches
            for s in SCHEMAS:
                for i in range(50):
                    conn.execute(f"select {s}.{f}(%s)", (ids[i % 100],)).fetchone()
        for r in range(rounds):
            times: dict[tuple[str, str], list[float]] = {k: [] for k in medians}
            order = [(s, f) for f in SHAPES for s in SCHEMAS]
            for i in range(calls):
                for s, f in order[i % len(order):] + order[:i % len(order)]:  # rotate: no shape always first
                    began = time.perf_counter()
                    conn.execute(f"select {s}.{f}(%s)", (ids[i % 100],)).fetchone()
                    times[(s, f)].append((time.perf_counter() - began) * 1000)
            for k, t in times.items():
                medians[k].append(statistics.median(t))
            print(f"round {r + 1}: load {os.getloadavg()[0]:.2f}", flush=True)
    return medians


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.citus_plan_repro", description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=2000, help="calls of each function a round")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    build_dir = cluster.find_citus_build()
    if build_dir is None:
        raise SystemExit("no Citus build: run `make citus` first")
    with cluster.LocalCluster(build_dir, workers=1) as running:
        worker = build(running)
        print(f"load {os.getloadavg()[0]:.2f}; {args.calls} calls of each function a round, on the worker")
        medians = measure(worker, args.calls, args.rounds)
    print("\n| one statement... | distributed schema, ms/call | ordinary schema, ms/call | extra on Citus |")
    print("|---|---:|---:|---:|")
    for f in SHAPES:
        d, o = statistics.median(medians[("dist", f)]), statistics.median(medians[("plain", f)])
        rounds = " / ".join(f"{x:.3f}" for x in medians[("dist", f)])
        print(f"| {f} | {d:.3f} ({rounds}) | {o:.3f} | {d - o:+.3f} |")
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
