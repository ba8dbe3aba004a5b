"""``make bench-driver``: what the Python driver adds to a recall, phase by phase (#31 item 3).

The same 10-result recall is timed three ways on one connection, interleaved query by query so that load on the
machine falls on all three alike (the driver and psycopg alone in turns, each first on every other query):
through the driver (``Memory.recall`` with the query's vector given, so no model time is counted), through
psycopg alone running the very statement the driver sends, in binary as the driver reads it, on a connection
of its own where the tenant's types are registered as psycopg does it (CompositeInfo.fetch, register_composite:
namedtuples; until #47 the driver read JSON and this baseline parsed the jsonb columns) and on another where
none is (the composite values received and parsed by nothing, the driver charged with reading them whole), and
the driver's own steps one at a time: the argument checks
(principal, scopes, the vector), composing the statement, executing it, and building the result dataclasses.
The driver's overhead is the median of (driver - psycopg) over the queries. That difference of two times of
tens of milliseconds carries the server's noise, so each path is also timed less the time its connection spent
waiting for the server (psycopg's ``Connection.wait``, where the statement is sent and its result received):
what is left is Python's, the driver's and psycopg's, and the median of (driver - psycopg) of those is the
driver's own cost, steady on a loaded machine. Results: bench/results/latest-driver.md, the runs in
bench/results/archive/.

    python -m bench.driver_overhead                   # 2,000 memories, 200 queries
    python -m bench.driver_overhead --memories 500 --queries 50
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import psycopg

from . import corpus
from .harness import embedded_server, new_report, write_report
from .run import (
    MODEL,
    SCOPES,
    cached_embeddings,
    ingest,
    install_tenant,
    role_uri,
    store_embeddings,
    text_of_memory_index,
)

HERE = Path(__file__).resolve().parent
TENANT = "bench"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="make bench-driver")
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)

    import pgrecall
    from pgrecall.driver import _calls, _types
    from pgrecall.driver.recall import Recalled, as_vector

    used: list = []
    texts = corpus.memories(args.memories)
    vectors = cached_embeddings("memories", texts, used)
    qtexts = corpus.queries(args.queries, args.memories)
    qvecs = cached_embeddings("queries", qtexts, used)
    phases: dict[str, list[float]] = {k: [] for k in ("driver", "psycopg", "raw", "checks", "statement", "execute",
                                                      "build", "driver_python", "psycopg_python", "raw_python")}
    returned: list[int] = []
    with embedded_server("pgrecall-bench-driver-"):
        from pgrecall import server

        admin = server.status().uri()
        app = install_tenant(admin, TENANT)
        _, memory_of_text = ingest(app, TENANT, texts)
        store_embeddings(role_uri(TENANT, "worker"), TENANT, text_of_memory_index(memory_of_text), vectors)
        setup = _registration_cost(app)
        with psycopg.connect(app, autocommit=True) as conn, psycopg.connect(app, autocommit=True) as plain, \
                psycopg.connect(app, autocommit=True) as raw:
            # psycopg alone runs on connections of its own, the statement's result read in binary as the driver
            # reads it: on ``plain`` the tenant's types registered by psycopg's own means (CompositeInfo.fetch and
            # register_composite, namedtuples), which is what psycopg alone does to read them; on ``raw`` none,
            # the composite values received and parsed by nothing (the driver charged with reading them whole)
            pgrecall.configure(plain)
            pgrecall.configure(raw)
            _register_as_psycopg_does(plain)
            waited = _time_waits(conn)
            waited_plain = _time_waits(plain)
            waited_raw = _time_waits(raw)
            mem = pgrecall.connect(conn=conn, tenant=TENANT, principal="agent", scopes=SCOPES)
            h = mem  # a Memory is the handle its calls are built on
            for _ in range(2):  # warm both paths, the plan cache and the vector type
                for q, v in zip(qtexts[:10], qvecs[:10], strict=True):
                    mem.recall(q, query_embedding=v, query_model=MODEL, limit=10)
                    call = _calls.one("recall_answer", {
                        "principal": "agent", "scopes": SCOPES, "query": q, "purpose": "converse",
                        "query_embedding": _calls.Cast(as_vector(v), _calls.REAL_ARRAY), "mode": None, "limit": 10,
                        "include_superseded": False, "at": None, "query_model": MODEL}, Recalled)
                    plain.cursor(binary=True).execute(call.query(TENANT), call.params).fetchone()
                    raw.cursor(binary=True).execute(call.query(TENANT), call.params).fetchone()
            for i, (q, v) in enumerate(zip(qtexts, qvecs, strict=True)):
                # The driver's steps, one at a time.
                t0 = time.perf_counter()
                principal, scopes = h.who(None, None)
                vector = as_vector(v)
                t1 = time.perf_counter()
                call = _calls.one("recall_answer", {
                    "principal": principal, "scopes": scopes, "query": q, "purpose": "converse",
                    "query_embedding": _calls.Cast(vector, _calls.REAL_ARRAY), "mode": None, "limit": 10,
                    "include_superseded": False, "at": None, "query_model": MODEL}, Recalled)
                statement = call.query(TENANT)
                params = call.params
                t2 = time.perf_counter()
                _types.ensure(conn, TENANT)  # registered at the first recall: a lookup
                with conn.cursor(binary=True) as cur:  # as the runner's typed cursor, rows as tuples
                    cur.adapters.register_loader("float4", _types.ShortFloat4BinaryLoader)
                    row = cur.execute(statement, params).fetchone()  # the composite values read as dicts
                t3 = time.perf_counter()
                built = _calls._build(Recalled, items=row[0], meta=row[1])
                t4 = time.perf_counter()
                phases["checks"].append((t1 - t0) * 1e3)
                phases["statement"].append((t2 - t1) * 1e3)
                phases["execute"].append((t3 - t2) * 1e3)
                phases["build"].append((t4 - t3) * 1e3)

                # The driver and psycopg alone (the same statement, already composed, and its parsed rows, or its
                # raw ones), in turn in a rotating order: a later one runs with the server's and Python's caches
                # warmer.
                order = ("driver", "psycopg", "raw")
                for path in order[i % 3:] + order[:i % 3]:
                    waited[0] = waited_plain[0] = waited_raw[0] = 0.0
                    t0 = time.perf_counter()
                    if path == "driver":
                        answer = mem.recall(q, query_embedding=v, query_model=MODEL, limit=10)
                    elif path == "psycopg":
                        plain.cursor(binary=True).execute(statement, params).fetchone()
                    else:
                        raw.cursor(binary=True).execute(statement, params).fetchone()
                    t1 = time.perf_counter()
                    phases[path].append((t1 - t0) * 1e3)
                    phases[path + "_python"].append((t1 - t0 - waited[0] - waited_plain[0] - waited_raw[0]) * 1e3)
                returned.append(len(answer.items))
                assert len(built.items) == len(answer.items)
    overhead = [d - p for d, p in zip(phases["driver"], phases["psycopg"], strict=True)]
    own = [d - p for d, p in zip(phases["driver_python"], phases["psycopg_python"], strict=True)]
    own_raw = [d - p for d, p in zip(phases["driver_python"], phases["raw_python"], strict=True)]
    med = {k: statistics.median(v) for k, v in phases.items()}
    p95 = {k: float(np.percentile(v, 95)) for k, v in phases.items()}
    report = new_report("python -m bench.driver_overhead {args}", argv, memories=args.memories,
                        queries=args.queries, median_ms=med, p95_ms=p95,
                        overhead_median_ms=statistics.median(overhead),
                        own_outside_wait_median_ms=statistics.median(own),
                        own_outside_wait_vs_unparsed_median_ms=statistics.median(own_raw),
                        own_phases_median_ms=med["checks"] + med["statement"] + med["build"],
                        results_median=statistics.median(returned), registration_ms=setup)
    md = [f"# The driver's cost on a recall ({report['started']})", "",
          f"Machine: {report['machine']}. Command: `{report['command']}`. {args.memories} memories with vectors, "
          f"{args.queries} queries, limit 10 (median {statistics.median(returned):.0f} results returned); the "
          "query's vector is given, so no model time is counted.", "",
          "| path or phase | median ms | p95 ms |", "|---|---:|---:|",
          f"| the driver: `Memory.recall` | {med['driver']:.3f} | {p95['driver']:.3f} |",
          f"| psycopg alone, the same statement (the tenant's types registered as psycopg does) | "
          f"{med['psycopg']:.3f} | {p95['psycopg']:.3f} |",
          f"| **driver overhead (median of driver - psycopg)** | **{statistics.median(overhead):.3f}** | |",
          f"| the driver, less its wait for the server | {med['driver_python']:.3f} | {p95['driver_python']:.3f} |",
          f"| psycopg alone, less its wait for the server | {med['psycopg_python']:.3f} | "
          f"{p95['psycopg_python']:.3f} |",
          f"| **the driver's own cost (median of the two less their waits)** | **{statistics.median(own):.3f}** | |",
          f"| psycopg alone, composite values unparsed, less its wait | {med['raw_python']:.3f} | "
          f"{p95['raw_python']:.3f} |",
          f"| the driver's cost beside psycopg reading nothing of the composite values (median, less waits) | "
          f"{statistics.median(own_raw):.3f} | |",
          f"| phase: argument checks (principal, scopes, vector) | {med['checks']:.3f} | {p95['checks']:.3f} |",
          f"| phase: composing the statement | {med['statement']:.3f} | {p95['statement']:.3f} |",
          f"| phase: executing it (server, wire, psycopg reading the composite values) | {med['execute']:.3f} | "
          f"{p95['execute']:.3f} |",
          f"| phase: building the result dataclasses | {med['build']:.3f} | {p95['build']:.3f} |",
          f"| **the driver's own phases (checks + statement + build)** | "
          f"**{med['checks'] + med['statement'] + med['build']:.3f}** | |",
          f"| once per connection and tenant: registering the tenant's {setup['types']} types (one catalog "
          f"query) | {setup['median']:.3f} | {setup['p95']:.3f} |",
          f"| once per connection: pgvector's type (pgrecall.configure), for scale | {setup['vector_median']:.3f} | "
          f"{setup['vector_p95']:.3f} |", "",
          "The difference of two times of tens of milliseconds carries the server's noise on a loaded machine; "
          "less the time each connection waited for the server (psycopg's Connection.wait: sending the statement, "
          "receiving its result), what is left is Python's, and the driver's own cost is the steadier figure. "
          "The phases are timed one by one, each with its own cold start."]
    write_report(args.out, "driver", report, "\n".join(md) + "\n")
    print("\n".join(md))
    return 0


def _register_as_psycopg_does(conn: psycopg.Connection) -> None:
    """The tenant's composite types registered on ``conn`` as a psycopg user would, one CompositeInfo.fetch
    each and register_composite with its default factory (namedtuples)."""
    from psycopg.types.composite import CompositeInfo, register_composite

    names = [r[0] for r in conn.execute(
        "select t.typname from pg_type t join pg_class c on c.oid = t.typrelid and c.relkind = 'c'"
        " where t.typnamespace = %s::regnamespace", (TENANT,)).fetchall()]
    for name in names:
        info = CompositeInfo.fetch(conn, f"{TENANT}.{name}")
        assert info is not None
        register_composite(info, conn)


def _registration_cost(app: str, connections: int = 30) -> dict:
    """What the first call of a tenant on a new connection pays to register the tenant's declared types (the
    catalog query and psycopg's registrations), on fresh connections; pgvector's registration beside it."""
    import pgrecall
    from pgrecall.driver import _types

    times: list[float] = []
    vector: list[float] = []
    for _ in range(connections):
        with psycopg.connect(app, autocommit=True) as conn:
            t0 = time.perf_counter()
            pgrecall.configure(conn)
            t1 = time.perf_counter()
            oids = _types.ensure(conn, TENANT)
            t2 = time.perf_counter()
        vector.append((t1 - t0) * 1e3)
        times.append((t2 - t1) * 1e3)
    return {"median": statistics.median(times), "p95": float(np.percentile(times, 95)), "types": len(oids) // 2,
            "vector_median": statistics.median(vector), "vector_p95": float(np.percentile(vector, 95))}


def _time_waits(conn: psycopg.Connection) -> list[float]:
    """Time what ``conn`` spends in psycopg's ``wait`` (the statement sent, the server's answer received): the
    returned one-item list accumulates the seconds; the caller resets it."""
    waited = [0.0]
    wait = conn.wait

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return wait(*args, **kwargs)
        finally:
            waited[0] += time.perf_counter() - t0

    conn.wait = timed  # type: ignore[method-assign]
    return waited


if __name__ == "__main__":
    raise SystemExit(main())
