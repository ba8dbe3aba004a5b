"""``make bench-load``: many agents on one tenant at once, for a while, and whether anything was lost (#51 item 2).

``--clients`` connections of the tenant's app role, each its own thread with its own driver handle, run a mix
of operations back to back for ``--seconds``: recall (hybrid, with a precomputed query vector, so no model time
is counted), an append followed by a remember citing it, and a lexical message search. Every operation's
latency is kept; every error is counted by its class. Afterwards, as the superuser: every acknowledged append
is in the log with its words, every acknowledged memory is there, and the scope's offsets run from 1 to its
watermark without a gap. Results: bench/results/latest-load.md, the runs in bench/results/archive/.

    python -m bench.load                                   # 32 clients, 120 s, 70/20/10
    python -m bench.load --clients 8 --seconds 5 --mix 70,20,10
    python -m bench.load --mix 0,100,0 --no-remember       # appends alone: the log's own throughput
    python -m bench.load --rate 120                        # paced: 120 operations/s offered, whatever they take
    python -m bench.load --pooler 4                        # the clients through pgbouncer, 4 server connections

Each client runs back to back by default, so the load is closed: an operation that waits less leaves its
client more time for the others, and on saturated cores they get slower. ``--rate`` offers a fixed load
(each client starts one operation every clients/rate seconds, at once when late) to compare latencies at
the same throughput; the wait sampler counts, ten times a second, what the busy backends wait on.
``--pooler N`` puts pgbouncer (transaction mode, N server connections: bench/pooler.py) between the clients
and the server, as the README advises for many clients: at most N transactions run at once, the others wait
in pgbouncer's queue, not for the server's locks and cores.
"""

from __future__ import annotations

import argparse
import os
import random
import threading
import time
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from . import run as run_bench

HERE = Path(__file__).resolve().parent
TENANT = "loadbench"
USERS = 16
QUERIES = ["where does ana live", "what does ben like to cook", "the trip to Porto", "a birthday party",
           "which books were read", "the dog's name", "allergies", "the new job", "a concert next week",
           "the garden", "a recipe with miso", "the flat by the river"]


@dataclass
class Outcome:
    latencies: dict[str, list[float]] = field(default_factory=lambda: {"recall": [], "append": [], "remember": [],
                                                                       "search": []})
    errors: Counter[str] = field(default_factory=Counter)
    appended: list[tuple[int, str]] = field(default_factory=list)   # (offset, text) acknowledged
    remembered: list[int] = field(default_factory=list)             # memory ids acknowledged
    lock: threading.Lock = field(default_factory=threading.Lock)


def percentile(values: list[float], q: float) -> float:
    return run_bench.percentile(values, q) if values else float("nan")


def setup(superuser_uri: str, app_uri: str, tenant: str = TENANT) -> None:
    """The tenant, its users and a few hundred memories to recall from."""
    from pgrecall import install

    with psycopg.connect(superuser_uri, autocommit=True) as conn:
        install.install(conn, [tenant])
    populate(app_uri, tenant)


def populate(app_uri: str, tenant: str = TENANT) -> None:
    """An installed tenant's scope, its users and a few hundred memories to recall from."""
    import pgrecall

    with pgrecall.connect(app_uri, tenant=tenant, principal="bot", scopes=["default"]) as mem:
        mem.add_scope("default")
        mem.add_peer("bot", "agent")
        for u in range(USERS):
            mem.add_peer(f"user{u}", "human")
        rng = random.Random(7)
        for i in range(300):
            said = mem.append(f"note {i}: {rng.choice(QUERIES)} came up again", role="user",
                              actor=f"user{i % USERS}")
            mem.remember(f"user{i % USERS} mentioned {rng.choice(QUERIES)} (note {i})", evidence=[said],
                         purposes=["converse"])


def client(n: int, app_uri: str, vectors: list[Any], mix: tuple[int, int, int], deadline: float,
           outcome: Outcome, remember: bool = True, every: float = 0.0, tenant: str = TENANT,
           write_uri: str | None = None) -> None:
    import pgrecall

    rng = random.Random(n)
    user = f"user{n % USERS}"
    try:
        mem = pgrecall.connect(app_uri, tenant=tenant, principal="bot", scopes=["default"])
        # the writes through a way of their own (--write-pooler): they do not wait behind the reads
        writer = (pgrecall.connect(write_uri, tenant=tenant, principal="bot", scopes=["default"])
                  if write_uri else mem)
    except Exception as exc:
        with outcome.lock:
            outcome.errors[f"connect: {type(exc).__name__}"] += 1
        return
    with mem, writer:
        k = 0
        due = time.monotonic() + rng.uniform(0, every)
        while time.monotonic() < deadline:
            k += 1
            if every:  # paced: one operation every `every` s, whenever the last one ended
                time.sleep(max(0.0, due - time.monotonic()))
                due += every
            pick = rng.randrange(sum(mix))
            try:
                if pick < mix[0]:
                    q = rng.randrange(len(QUERIES))
                    started = time.perf_counter()
                    mem.recall(QUERIES[q], query_embedding=vectors[q], limit=10)
                    took = {"recall": time.perf_counter() - started}
                elif pick < mix[0] + mix[1]:
                    text = f"client {n} turn {k}: {rng.choice(QUERIES)}"
                    started = time.perf_counter()
                    offset = writer.append(text, role="user", actor=user)
                    middle = time.perf_counter()
                    made = (writer.remember(f"{user} said {text}", evidence=[offset], purposes=["converse"])
                            if remember else None)
                    done = time.perf_counter()
                    took = {"append": middle - started} | ({"remember": done - middle} if remember else {})
                    with outcome.lock:
                        outcome.appended.append((offset, text))
                        if made is not None and made.memory_id is not None:
                            outcome.remembered.append(made.memory_id)
                else:
                    started = time.perf_counter()
                    mem.search_messages(rng.choice(QUERIES), mode="lexical", limit=10)
                    took = {"search": time.perf_counter() - started}
            except Exception as exc:  # counted, by class: the load goes on
                with outcome.lock:
                    outcome.errors[type(exc).__name__] += 1
                continue
            with outcome.lock:
                for op, seconds in took.items():
                    outcome.latencies[op].append(seconds)


def loss_check(superuser_uri: str, outcome: Outcome, tenant: str = TENANT) -> dict[str, Any]:
    with psycopg.connect(superuser_uri, autocommit=True) as conn:
        logged = dict(conn.execute(f"select log_offset, body from {tenant}.observation where scope = 'default'")
                      .fetchall())
        watermark = conn.execute(f"select log_watermark from {tenant}.scope where name = 'default'").fetchone()[0]
        memories = {r[0] for r in conn.execute(f"select id from {tenant}.memory").fetchall()}
    missing_turns = [o for o, text in outcome.appended if logged.get(o) != text]
    missing_memories = [m for m in outcome.remembered if m not in memories]
    return {"acknowledged_appends": len(outcome.appended), "missing_appends": len(missing_turns),
            "acknowledged_memories": len(outcome.remembered), "missing_memories": len(missing_memories),
            "offsets_contiguous": sorted(logged) == list(range(1, watermark + 1)), "watermark": watermark}


def sample_waits(superuser_uri: str, deadline: float, waits: Counter[str], every: float = 0.1,
                 tenants: list[str] | None = None) -> None:
    """What the tenants' busy backends (their app roles') wait on, sampled every ``every`` s until the deadline: per
    sample, one count per backend by its wait event (``CPU`` when it waits on none: running, or runnable on a busy
    core)."""
    roles = [f"pgrecall_{t}_app" for t in tenants or [TENANT]]
    with psycopg.connect(superuser_uri, autocommit=True) as conn:
        while time.monotonic() < deadline:
            for event, n in conn.execute(
                    "select coalesce(wait_event_type || ':' || wait_event, 'CPU'), count(*) from pg_stat_activity"
                    " where state = 'active' and usename = any(%s) and pid <> pg_backend_pid() group by 1",
                    (roles,)).fetchall():
                waits[event] += n
            waits["(samples)"] += 1
            time.sleep(every)


def summarise(latencies: dict[str, list[float]], seconds: float) -> dict[str, dict[str, float]]:
    """Per operation: how many, per second, p50/p95/p99 and the longest, in ms."""
    return {op: {"count": len(v), "per_s": len(v) / seconds, "p50_ms": 1000 * percentile(v, 0.5),
                 "p95_ms": 1000 * percentile(v, 0.95), "p99_ms": 1000 * percentile(v, 0.99),
                 "max_ms": 1000 * max(v) if v else float("nan")}
            for op, v in latencies.items()}


def run_tenants(superuser_uri: str, apps: dict[str, str], clients: int, seconds: float, mix: tuple[int, int, int],
                remember: bool = True, rate: float = 0.0, wait_uris: list[str] | None = None,
                vectors: list[Any] | None = None, write_apps: dict[str, str] | None = None) -> dict[str, Any]:
    """The load on several tenants at once (``apps``: each tenant's app-role URI): client n works on the n-th
    tenant, round robin. Latencies and errors of all tenants together; the loss check per tenant. The wait
    sampler looks at ``wait_uris`` (superuser URIs; by default the one given), one thread each."""
    if vectors is None:
        from pgrecall.embedder import get_embedder

        vectors = list(get_embedder().encode_array(QUERIES))
    tenants = list(apps)
    outcomes = {t: Outcome() for t in tenants}
    deadline = time.monotonic() + seconds
    every = clients / rate if rate else 0.0
    threads = [threading.Thread(target=client, args=(n, apps[t], vectors, mix, deadline, outcomes[t], remember,
                                                     every, t, (write_apps or {}).get(t)))
               for n in range(clients) for t in [tenants[n % len(tenants)]]]
    waits: Counter[str] = Counter()
    samplers = [threading.Thread(target=sample_waits, args=(uri, deadline, waits, 0.1, tenants), daemon=True)
                for uri in wait_uris or [superuser_uri]]
    load_before = os.getloadavg()
    for t in threads + samplers:
        t.start()
    for t in threads:
        t.join(timeout=seconds + 300)
    load_after = os.getloadavg()
    for t in samplers:
        t.join(timeout=5)
    latencies = {op: [x for o in outcomes.values() for x in o.latencies[op]] for op in Outcome().latencies}
    return {"clients": clients, "seconds": seconds, "mix": list(mix), "tenants": tenants,
            "ops": summarise(latencies, seconds),
            "errors": dict(sum((o.errors for o in outcomes.values()), Counter())),
            "hung_clients": sum(t.is_alive() for t in threads),
            "waits": dict(waits.most_common(12)),
            "loss": {t: loss_check(superuser_uri, outcomes[t], t) for t in tenants},
            "load_average": {"before": load_before, "after": load_after}}


def run(superuser_uri: str, app_uri: str, clients: int, seconds: float, mix: tuple[int, int, int],
        remember: bool = True, rate: float = 0.0, write_uri: str | None = None) -> dict[str, Any]:
    """The load on bench/load.py's one tenant (TENANT)."""
    result = run_tenants(superuser_uri, {TENANT: app_uri}, clients, seconds, mix, remember, rate,
                         write_apps={TENANT: write_uri} if write_uri else None)
    result["loss"] = result["loss"][TENANT]
    del result["tenants"]
    return result


def main(argv: list[str] | None = None) -> int:
    from .harness import embedded_server, new_report, write_report

    parser = argparse.ArgumentParser(prog="make bench-load")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--mix", default="70,20,10", help="recall,append+remember,message search (weights)")
    parser.add_argument("--no-remember", dest="remember", action="store_false",
                        help="the append operation appends only, without the remember citing it")
    parser.add_argument("--rate", type=float, default=0.0,
                        help="operations per second offered, all clients together (default: each as fast as it can)")
    parser.add_argument("--pooler", type=int, default=0, metavar="N",
                        help="the clients through pgbouncer in transaction mode with N server connections "
                             "(default: each client its own server connection)")
    parser.add_argument("--write-pooler", type=int, default=0, metavar="M",
                        help="with --pooler: the appends and remembers through a pgbouncer pool of their own with M "
                             "server connections, so that they do not wait behind the reads")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    mix = tuple(int(x) for x in args.mix.split(","))
    assert len(mix) == 3, "--mix takes three weights"
    if args.write_pooler and not args.pooler:
        parser.error("--write-pooler goes with --pooler")
    with embedded_server("pgrecall-bench-load-", {"max_connections": str(max(100, args.clients + 20))}) as info:
        superuser = info.uri()
        app = info.uri(user=f"pgrecall_{TENANT}_app")
        setup(superuser, app)
        with ExitStack() as stack:
            writes = None
            if args.pooler:
                from pgrecall import server

                from .pooler import pgbouncer

                writes = (stack.enter_context(pgbouncer(info.socket_dir, info.port, server.DATABASE,
                                                        f"pgrecall_{TENANT}_app", pool_size=args.write_pooler,
                                                        max_clients=args.clients + 20))
                          if args.write_pooler else None)
                app = stack.enter_context(pgbouncer(info.socket_dir, info.port, server.DATABASE,
                                                    f"pgrecall_{TENANT}_app", pool_size=args.pooler,
                                                    max_clients=args.clients + 20))
            result = run(superuser, app, args.clients, args.seconds, mix, args.remember,  # type: ignore[arg-type]
                         args.rate, writes)
    report = new_report("python -m bench.load {args}", argv, **result)
    loss = result["loss"]
    md = [f"# Many agents on one tenant ({report['started']})", "",
          f"Machine: {report['machine']}. Command: `{report['command']}`. {args.clients} clients for "
          f"{args.seconds:.0f} s{f' offering {args.rate:g} operations/s' if args.rate else ''}"
          f"{f' through pgbouncer (transaction mode, {args.pooler} server connections)' if args.pooler else ''}"
          f"{f', the writes through a pool of their own ({args.write_pooler})' if args.write_pooler else ''}"
          ", mix recall / "
          f"append{' + remember' if args.remember else ' (alone)'} / message "
          f"search = {args.mix}; load average "
          f"{result['load_average']['before'][0]:.1f} before, {result['load_average']['after'][0]:.1f} after.", "",
          "| operation | count | per s | p50 ms | p95 ms | p99 ms | max ms |", "|---|---:|---:|---:|---:|---:|---:|"]
    for op, r in result["ops"].items():
        md.append(f"| {op} | {r['count']} | {r['per_s']:.1f} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | "
                  f"{r['p99_ms']:.1f} | {r['max_ms']:.1f} |")
    md += ["", f"Errors by class: {result['errors'] or 'none'}; clients still running at the end: "
               f"{result['hung_clients']}.",
           f"Loss check: {loss['acknowledged_appends']} acknowledged appends, {loss['missing_appends']} missing; "
           f"{loss['acknowledged_memories']} acknowledged memories, {loss['missing_memories']} missing; offsets "
           f"1..{loss['watermark']} {'contiguous' if loss['offsets_contiguous'] else 'WITH GAPS'}.",
           "", "Backends of the app role at work, by wait event (counts over "
               f"{result['waits'].get('(samples)', 0)} samples, 10 a second): "
               + ", ".join(f"{k} {v}" for k, v in result["waits"].items() if k != "(samples)") + "."]
    write_report(args.out, "load", report, "\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
