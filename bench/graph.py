"""``make bench-graph``: assert_fact throughput, and 2-hop traversal and bitemporal lookup latency
over a large graph. Results: bench/results/latest-graph.md, the runs in bench/results/archive/.

    python -m bench.graph                                  # 100k entities, 1M facts
    python -m bench.graph --entities 10000 --facts 100000  # quicker
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

import psycopg
from psycopg.types.json import Jsonb

from .harness import embedded_server, new_report, write_report

HERE = Path(__file__).resolve().parent
TENANT = "graphbench"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def percentiles(samples: list[float]) -> dict:
    ordered = sorted(samples)
    return {"p50_ms": statistics.median(ordered) * 1000, "p95_ms": ordered[int(0.95 * (len(ordered) - 1))] * 1000,
            "n": len(ordered)}


def assert_throughput(conn: psycopg.Connection, n: int) -> dict:
    """Single assert_fact calls (autocommit), each with a quote checked against its observation.
    A third are single-valued and contradict the subject's current value (close and split)."""
    people = 200
    rows = [{"body": f"I am person {i % people} and I live in town {i} and I like thing {i}",
             "source_role": "user", "actor": "user"} for i in range(n)]
    conn.execute(f"select * from {TENANT}.append_observations('bot', array['default'], 'default', %s)", (Jsonb(rows),))
    started = time.perf_counter()
    outcomes: dict[str, int] = {}
    for i in range(n):
        if i % 3 == 0:
            pred, obj, quote = "lives_in", f"town {i}", f"I live in town {i}"
        else:
            pred, obj, quote = "likes", f"thing {i}", f"I like thing {i}"
        outcome = conn.execute(
            f"select outcome from {TENANT}.assert_fact('bot', array['default'], 'default', %s, %s, %s, %s)",
            (f"person {i % people}", pred, obj, Jsonb([{"offset": i + 1, "quote": quote}]))).fetchone()[0]
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    seconds = time.perf_counter() - started
    # the same assertions again for other people, in batches of 500 (one statement, one commit each)
    items = []
    for i in range(n):
        pred, obj, quote = (("lives_in", f"town {i}", f"I live in town {i}") if i % 3 == 0
                            else ("likes", f"thing {i}", f"I like thing {i}"))
        items.append({"subject": f"batch person {i % people}", "predicate": pred, "object": obj,
                      "evidence": [{"offset": i + 1, "quote": quote}]})
    started = time.perf_counter()
    for b in range(0, n, 500):
        conn.execute(f"select count(*) from {TENANT}.assert_facts('bot', array['default'], 'default', %s)",
                     (Jsonb(items[b:b + 500]),))
    batch_seconds = time.perf_counter() - started
    # two writers at once (one per core), each batching its own people
    import threading

    uri = conn.info.dsn
    def writer(w: int, out: list) -> None:
        with psycopg.connect(uri, autocommit=True) as own:
            mine = [{**item, "subject": f"writer {w} {item['subject']}"} for item in items]
            for b in range(0, n, 500):
                own.execute(f"select count(*) from {TENANT}.assert_facts('bot', array['default'], 'default', %s)",
                            (Jsonb(mine[b:b + 500]),))
        out.append(w)
    done: list = []
    threads = [threading.Thread(target=writer, args=(w, done)) for w in range(2)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    parallel_seconds = time.perf_counter() - started
    assert len(done) == 2
    return {"facts": n, "seconds": seconds, "per_second": n / seconds, "outcomes": outcomes,
            "batched_seconds": batch_seconds, "batched_per_second": n / batch_seconds,
            "two_writers_seconds": parallel_seconds, "two_writers_per_second": 2 * n / parallel_seconds}


def bulk_graph(conn: psycopg.Connection, entities: int, facts: int) -> dict:
    """entities people in the default scope; each knows facts/entities - 1 others (random), and lives in one
    of 1,000 towns, with a closed earlier home for one in ten: history the time filters must skip."""
    per_person = max(1, facts // entities - 1)
    bot = conn.execute(f"select id from {TENANT}.peer where name = 'bot'").fetchone()[0]
    started = time.perf_counter()
    conn.execute(f"insert into {TENANT}.entity (scope, name, entity_type) "
                 f"select 'default', 'p' || i, 'person' from generate_series(1, {entities}) i")
    conn.execute(f"insert into {TENANT}.entity (scope, name, entity_type) "
                 f"select 'default', 'town' || i, 'place' from generate_series(1, 1000) i")
    first = conn.execute(f"select id from {TENANT}.entity where name = 'p1' and scope = 'default'").fetchone()[0]
    conn.execute(f"""
        insert into {TENANT}.fact (scope, subject_id, predicate, single_valued, object_id, statement, valid, known,
                                   asserted_by, salience)
        select 'default', {first} + s, 'knows', false,
               {first} + ((hashint8(s::bigint * 131 + k) & 2147483647) % {entities}),
               'knows', tstzrange('2020-01-01', null), tstzrange('2020-01-01', null), {bot}, 1
          from generate_series(0, {entities - 1}) s, generate_series(1, {per_person}) k
         where {first} + ((hashint8(s::bigint * 131 + k) & 2147483647) % {entities}) <> {first} + s""")
    conn.execute(f"""
        insert into {TENANT}.fact (scope, subject_id, predicate, single_valued, object_id, statement, valid, known,
                                   asserted_by, salience)
        select 'default', {first} + s, 'lives_in', true, t.id, 'lives in', tstzrange('2020-01-01', null),
               tstzrange('2020-01-01', null), {bot}, 1
          from generate_series(0, {entities - 1}) s
          join {TENANT}.entity t on t.name = 'town' || (1 + s % 1000)""")
    loaded = time.perf_counter() - started
    conn.execute(f"analyze {TENANT}.fact")
    conn.execute(f"analyze {TENANT}.entity")
    total = conn.execute(f"select count(*) from {TENANT}.fact").fetchone()[0]
    size = conn.execute(f"select pg_total_relation_size('{TENANT}.fact')").fetchone()[0]
    return {"entities": entities + 1000, "facts": total, "load_seconds": loaded, "fact_bytes_with_indexes": size}


def traversal_latency(conn: psycopg.Connection, entities: int, queries: int, hops: int) -> dict:
    rng = random.Random(7)
    samples, sizes = [], []
    for _ in range(queries):
        seed = f"p{rng.randint(1, entities)}"
        t0 = time.perf_counter()
        n = conn.execute(f"select count(*) from {TENANT}.neighbourhood('bot', array['default'], array[%s], %s)",
                         (seed, hops)).fetchone()[0]
        samples.append(time.perf_counter() - t0)
        sizes.append(n)
    return {**percentiles(samples), "facts_returned_median": statistics.median(sizes)}


def as_of_latency(conn: psycopg.Connection, entities: int, queries: int) -> dict:
    rng = random.Random(11)
    samples = []
    for _ in range(queries):
        seed = f"p{rng.randint(1, entities)}"
        t0 = time.perf_counter()
        conn.execute(f"select * from {TENANT}.facts_as_of('bot', array['default'], %s, 'lives_in', "
                     f"'2024-06-01', '2025-01-01')", (seed,)).fetchall()
        samples.append(time.perf_counter() - t0)
    return percentiles(samples)


def markdown(r: dict) -> str:
    a, g = r["assert_fact"], r["graph"]
    lines = [f"# pgrecall graph benchmark ({r['started']})", "",
             f"Machine: {r['machine']}. Command: `{r['command']}`.", "",
             f"- assert_fact, single calls with checked quotes: {a['per_second']:.0f} facts/s "
             f"({a['facts']} facts in {a['seconds']:.1f} s; outcomes {a['outcomes']})",
             f"- assert_facts, batches of 500: {a['batched_per_second']:.0f} facts/s; two such writers at once: "
             f"{a['two_writers_per_second']:.0f} facts/s together",
             f"- graph: {g['entities']:,} entities, {g['facts']:,} facts loaded in {g['load_seconds']:.0f} s; "
             f"fact table with indexes {g['fact_bytes_with_indexes'] / 2**20:.0f} MiB"]
    for hops, t in r["traversal"].items():
        lines.append(f"- neighbourhood, {hops} hop(s): p50 {t['p50_ms']:.2f} ms, p95 {t['p95_ms']:.2f} ms "
                     f"(median {t['facts_returned_median']:.0f} facts returned, {t['n']} seeds)")
    f = r["facts_as_of"]
    lines.append(f"- facts_as_of (valid at T1 as known at T2): p50 {f['p50_ms']:.2f} ms, p95 {f['p95_ms']:.2f} ms")
    two = r["traversal"]["2"]
    lines += ["", "Targets:",
              f"- single assert_fact calls >= 500 facts/s: {'met' if a['per_second'] >= 500 else 'NOT met'} "
              f"({a['per_second']:.0f})",
              f"- assert_facts, one batching writer >= 1,000 facts/s: "
              f"{'met' if a['batched_per_second'] >= 1000 else 'NOT met'} ({a['batched_per_second']:.0f}); "
              f"two batching writers: {'met' if a['two_writers_per_second'] >= 1000 else 'NOT met'} "
              f"({a['two_writers_per_second']:.0f})",
              f"- 2-hop p95 <= 10 ms at {g['entities']:,} entities / {g['facts']:,} facts: "
              f"{'met' if two['p95_ms'] <= 10 else 'NOT met'}"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="make bench-graph")
    parser.add_argument("--entities", type=int, default=100_000)
    parser.add_argument("--facts", type=int, default=1_000_000)
    parser.add_argument("--asserts", type=int, default=3000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--out", default=str(HERE / "results"))
    args = parser.parse_args(argv)

    from pgrecall import install

    report = new_report("make bench-graph BENCH_ARGS='{args}'", argv)
    with (embedded_server("pgrg-", {"maintenance_work_mem": "1GB", "shared_buffers": "2GB"}) as info,
          psycopg.connect(info.uri(), autocommit=True) as conn):
        install.install(conn, [TENANT])
        conn.execute(f"select {TENANT}.add_scope('default')")
        conn.execute(f"select {TENANT}.add_peer('bot', 'agent')")
        conn.execute(f"select {TENANT}.add_peer('user', 'human')")
        log(f"assert_fact x {args.asserts}")
        report["assert_fact"] = assert_throughput(conn, args.asserts)
        log(f"loading {args.entities} entities and {args.facts} facts")
        report["graph"] = bulk_graph(conn, args.entities, args.facts)
        report["traversal"] = {}
        for hops in (1, 2, 3):
            log(f"{hops}-hop traversal")
            report["traversal"][str(hops)] = traversal_latency(conn, args.entities, args.queries, hops)
        report["facts_as_of"] = as_of_latency(conn, args.entities, args.queries)
    md = markdown(report)
    write_report(Path(args.out), "graph", report, md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
