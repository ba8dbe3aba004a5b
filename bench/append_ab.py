"""Append latency of two trees of function files on ONE tenant, interleaved: the live conversation's write path.

    python -m bench.append_ab --other /path/to/another/checkout [--turns 300] [--rounds 6] [--function-times]

A conversation as a worker beside it sees it: each turn is appended, then remembered with its vector given
inline (stamped with the tenant's model and input version 2, as a worker that has kept up would have stored
it), so that the next append finds the previous turn's memory embedded. The tenant's function files are
switched between this checkout's and the other's every round (as bench.ab does for recall; only plpgsql/
may differ), and the appends alone are timed. Prints p50 / p95 per tree and the ratio of the medians.
``--function-times`` also has the server count each tenant function's time (track_functions = all) and
prints, per call of the function, the time of those whose own (self) time differs most between the trees:
what a change costs inside the server, apart from the round trip and the commit, which the wall time of
a noisy machine buries. Not part of CI.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import psycopg

from .ab import use_functions
from .harness import embedded_server
from .run import install_tenant

TENANT = "appendab"
APPEND = (f"select {TENANT}.append_observation('bot', array['chat'], 'chat', %s, 'user', 'message', %s, %s)")
REMEMBER = (f"select memory_id from {TENANT}.remember('bot', array['chat'], 'chat', %s, array[%s]::bigint[], "
            "array['converse'], p_audience => %s, p_embedding => %s::halfvec, p_embedding_model => 'all-MiniLM-L6-v2', "
            "p_embedding_input_version => 2)")


def vector(k: int) -> str:
    return "[" + ",".join(f"{((k * 31 + i * 7) % 97 + 1) / 97:.4f}" for i in range(384)) + "]"


def add_function_times(admin: str, into: dict[str, list[float]]) -> None:
    """The round's counts of the tenant's functions, added to into (the app session has ended: its counts are
    flushed as its backend exits, just after the client sees it close)."""
    time.sleep(1)
    with psycopg.connect(admin, autocommit=True) as conn:
        for name, calls, self_ms, total_ms in conn.execute(
                "select funcname, calls, self_time, total_time from pg_stat_user_functions where schemaname = %s",
                (TENANT,)):
            counts = into.setdefault(name, [0, 0.0, 0.0])
            counts[0] += calls
            counts[1] += self_ms
            counts[2] += total_ms


def print_function_times(times: dict[str, dict[str, list[float]]], top: int = 8) -> None:
    this, other = times["this"], times["other"]

    def per_call(counts: list[float] | None, column: int) -> float:
        return counts[column] / counts[0] if counts and counts[0] else 0.0

    def self_ms(tree: dict[str, list[float]], name: str) -> float:
        counts = tree.get(name)
        return counts[1] if counts else 0.0

    print("| function | this: calls, self / total ms a call | other: calls, self / total ms a call |")
    print("|---|---|---|")
    names = sorted(set(this) | set(other), key=lambda n: -abs(self_ms(this, n) - self_ms(other, n)))
    for name in ["_append_batch"] + [n for n in names if n != "_append_batch"][:top]:
        a, b = this.get(name), other.get(name)
        print(f"| {name} | {a[0] if a else 0}, {per_call(a, 1):.3f} / {per_call(a, 2):.3f} "
              f"| {b[0] if b else 0}, {per_call(b, 1):.3f} / {per_call(b, 2):.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--other", required=True, help="a checkout whose plpgsql/ is compared with this one's")
    parser.add_argument("--turns", type=int, default=300, help="turns appended per tree per round")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--function-times", action="store_true",
                        help="count each tenant function's time in the server and print where the trees differ")
    args = parser.parse_args()
    with embedded_server("pgr-append-ab-") as info:
        admin = info.uri()
        app = install_tenant(admin, TENANT)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"select {TENANT}.add_scope('chat')")
            for name, kind in (("bot", "agent"), ("ana", "human"), ("ben", "human")):
                conn.execute(f"select {TENANT}.add_peer(%s, %s)", (name, kind))
            if args.function_times:
                conn.execute("alter system set track_functions = 'all'")
                conn.execute("select pg_reload_conf()")
        function_times: dict[str, dict[str, list[float]]] = {}  # tree -> function -> [calls, self ms, total ms]
        trees = {"this": Path(__file__).resolve().parents[1], "other": Path(args.other).resolve()}
        times: dict[str, list[float]] = {t: [] for t in trees}
        queued: dict[str, int] = {t: 0 for t in trees}
        early: dict[str, list[float]] = {t: [] for t in trees}  # the first half of a conversation's turns
        late: dict[str, list[float]] = {t: [] for t in trees}
        k = 0
        for r in range(args.rounds):
            for name in (list(trees) if r % 2 == 0 else list(reversed(trees))):
                use_functions(admin, TENANT, trees[name])
                if args.function_times:
                    with psycopg.connect(admin, autocommit=True) as conn:
                        conn.execute("select pg_stat_reset()")
                with psycopg.connect(app, autocommit=True) as conn:
                    session = conn.execute(f"select {TENANT}.create_session('bot', array['chat'], 'chat', %s)",
                                           (f"round {r} {name}",)).fetchone()[0]
                    conn.execute(f"select count(*) from {TENANT}.add_session_peers('bot', array['chat'], %s, "
                                 """'["ana", "ben", "bot"]')""", (session,))
                    for t in range(args.turns):
                        k += 1
                        started = time.perf_counter()
                        offset = conn.execute(APPEND, (f"turn {k}: I went sailing on day {k}",
                                                       ("ana", "ben")[t % 2], session)).fetchone()[0]
                        elapsed = (time.perf_counter() - started) * 1000
                        if t >= 20:  # the session's first calls plan the statements
                            times[name].append(elapsed)
                            (early if t < args.turns // 2 else late)[name].append(elapsed)
                        conn.execute(REMEMBER, (f"{('Ana', 'Ben')[t % 2]} went sailing on day {k}", offset,
                                                ("ana", "ben")[t % 2], vector(k))).fetchall()
                if args.function_times:
                    add_function_times(admin, function_times.setdefault(name, {}))
                with psycopg.connect(admin, autocommit=True) as conn:
                    # the jobs the appends queued again (the previous turn's memory, embedded): counted, then
                    # cleared so that each round starts alike
                    queued[name] += conn.execute(f"with d as (delete from {TENANT}.embedding_job returning 1) "
                                                 "select count(*) from d").fetchone()[0]
        load = os.getloadavg()
    p50 = {t: statistics.median(v) for t, v in times.items()}
    print(f"append_observation, {args.rounds} rounds x {args.turns} turns a tree (the first 20 of each untimed), "
          f"load {load[0]:.2f} at the end")
    print("| tree | p50 ms | p95 ms | n | p50 first half / second half of a conversation | memories queued again |")
    print("|---|---|---|---|---|---|")
    for t, v in times.items():
        print(f"| {t} | {p50[t]:.3f} | {statistics.quantiles(v, n=20)[18]:.3f} | {len(v)} | "
              f"{statistics.median(early[t]):.3f} / {statistics.median(late[t]):.3f} | {queued[t]} |")
    print(f"this / other p50: {p50['this'] / p50['other']:.3f}")
    if args.function_times:
        print_function_times(function_times)


if __name__ == "__main__":
    main()
