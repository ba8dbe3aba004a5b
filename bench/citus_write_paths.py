"""Which tenant write functions grow a worker session's memory on a distributed tenant (citusdata/citus#8824).

    python -m bench.citus_write_paths [--calls 500] [--paths append,correct,...] [--keep-worker-plans]

Starts a local cluster (a coordinator and one worker, pgrecall.cluster; needs `make citus`), installs one tenant,
then for each write path opens a session of the tenant's role ON THE WORKER (where a call delegated by the
coordinator runs, in a session of the coordinator's that lives as long as the client's), makes 10 calls (past
the five on which PL/pgSQL plans anew), reads the session's memory, makes ``--calls`` more and reads it again:

- ``kept``: the CachedPlan contexts (plans PL/pgSQL keeps; Citus 14.0.1 appends a copy of a routed INSERT's or
  UPDATE's local plan to one of them at every execution);
- ``all contexts``: the backend's own memory, all its memory contexts (``--through-coordinator``: the RSS of the
  worker's backend serving the client, VmRSS from /proc, which also counts the shared buffers it has touched);
- the statements whose kept plans grew most (their text, as pg_backend_memory_contexts names them).

Everything a path needs (memories to correct, jobs to complete, ...) is written beforehand in another session.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg

from pgrecall import install
from pgrecall.cluster import LocalCluster, find_citus_build
from pgrecall.driver import Memory, _generated

from .citus import HashedVectors

TENANT = "wp"
_app_dsn = ""  # the app role's on the worker (set by main)
WARM = 10


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] load {os.getloadavg()[0]:.2f} {msg}", flush=True)


@dataclass
class Path:
    name: str
    role: str
    prepare: Callable[[Memory, int], Any]  # in a session of its own, before: what the calls use
    call: Callable[[Memory, int, Any], None]
    node: str = "worker"  # where the measured session is: the tenant's worker, or the coordinator


def _remembered(mem: Memory, n: int, tag: str) -> list[tuple[int, int]]:
    ids = []
    for i in range(n):
        turn = mem.append(f"{tag} turn {i} about hive zq{tag}{i}", role="user", actor="ana")
        r = mem.remember(f"{tag} memory {i} about hive zq{tag}{i}", evidence=[turn], purposes=["converse"],
                         embed=False)
        ids.append((r.memory_id, turn))
    return ids


def _session(mem: Memory, n: int) -> int:
    s = mem.create_session(f"chat {time.monotonic_ns()}")
    mem.add_session_peers(s, ["ana", "ben"])
    return s


def _chain(mem: Memory, n: int) -> dict[str, Any]:
    [(memory, turn)] = _remembered(mem, 1, "chain")
    return {"memory": memory, "revision": mem.read(memory, purpose="converse").revision, "turn": turn}


def _supersede(mem: Memory, i: int, st: dict[str, Any]) -> None:
    st["memory"] = mem.supersede(st["memory"], f"chain memory now {i}", revision=1, evidence=[st["turn"]])


def _correct(mem: Memory, i: int, st: dict[str, Any]) -> None:
    st["revision"] = mem.correct(st["memory"], f"chain memory corrected {i}", revision=st["revision"],
                                 evidence=[st["turn"]])


def _town(i: int) -> str:
    return "Vila" + "".join(chr(97 + i // 26 ** k % 26) for k in range(3))


def _facts(mem: Memory, n: int) -> list[int]:
    return [mem.append(f"I live in {_town(i)}", role="user", actor="ana") for i in range(n)]


def _assert_fact(mem: Memory, i: int, turns: list[int]) -> None:
    # one current value a subject: each assertion closes the one before
    mem.assert_fact("ana", "lives_in", _town(i), evidence=[{"offset": turns[i], "quote": _town(i)}])


def _asserted(mem: Memory, n: int) -> list[int]:
    turns = _facts(mem, n)
    return [mem.assert_fact(f"person {i}", "lives_in", _town(i),
                            evidence=[{"offset": turns[i], "quote": _town(i)}]).fact_id for i in range(n)]


def _jobs(queue: str) -> Callable[[Memory, int, Any], None]:
    embedder = HashedVectors()

    def call(mem: Memory, i: int, st: Any) -> None:
        from pgrecall.driver.embeddings import claim_jobs, complete_jobs
        jobs = mem._runner.run(claim_jobs(mem, queue, "w", 1))
        assert jobs, f"no {queue} job left"
        vectors = embedder.embed([j.input for j in jobs])
        texts = embedder.embed([j.text_input for j in jobs]) if queue == "embedding" and jobs[0].input_version != 1 \
            else None
        mem._runner.run(complete_jobs(mem, queue, "w", jobs, vectors, texts))
    return call


def _tasks(mem: Memory, n: int) -> None:
    s = _session(mem, n)
    for i in range(n):
        mem.add_messages(s, [{"actor": "ana", "body": f"I live in {_town(i)}"}])


def _task_cycle(mem: Memory, i: int, st: Any) -> None:
    """What the deriver does with a task (pgrecall.deriver): its memories, its facts, then complete it."""
    from pgrecall.deriver import first_person
    [task] = mem.claim_tasks("w", limit=1, task_types=["representation"])
    assert mem._runner.conn is not None
    with mem._runner.conn.transaction():
        observations = []
        for c in first_person(task.messages):
            mem.task_remember(task, [{"body": c.statement, "evidence": [c.offset], "purposes": ["converse"],
                                      "about": [task.sender, c.object]}], worker="w")
            if c.predicate is not None:
                mem.task_assert_fact(task, c.predicate, c.object, statement=c.statement, worker="w",
                                     evidence=[{"offset": c.offset, "quote": c.quote, "start": c.start, "end": c.end}])
            observations.append({"text": c.statement, "quote": c.quote, "span": [c.start, c.end],
                                 "predicate": c.predicate})
        mem.complete_task(task, {"observations": observations}, worker="w")


def _about(mem: Memory, names: list[str]) -> None:
    turn = mem.append(f"a turn about {', '.join(names)}", role="user", actor="ana")
    mem.remember(f"a memory about {', '.join(names)}", evidence=[turn], purposes=["converse"], about=names, embed=False)


def _refreshed(mem: Memory, i: int) -> None:
    with Memory(TENANT, conninfo=_app_dsn, principal="ana", scopes=["default"]) as app:  # new words each time
        _remembered(app, 1, f"refresh{i}")
    mem.refresh_term_stats()


def _erasable(mem: Memory, n: int) -> None:
    for i in range(n):
        turn = mem.append(f"I am zqsubject{i} and I sail", role="user", actor="ana", data_subject_id=f"subj-{i}")
        mem.remember(f"zqsubject{i} sails", evidence=[turn], purposes=["converse"], embed=False)


PATHS = [
    Path("append", "app", lambda m, n: None,
         lambda m, i, st: m.append(f"Ana keeps hive {i} behind the barn", role="user", actor="ana")),
    Path("append_many", "app", lambda m, n: None,
         lambda m, i, st: m.append_many([{"body": f"hive {i} a", "source_role": "user", "actor": "ana"},
                                         {"body": f"hive {i} b", "source_role": "user", "actor": "ben"}])),
    Path("append_in_session", "app", _session,
         lambda m, i, st: m.append(f"Ana keeps hive {i}", role="user", actor="ana", session_id=st)),
    Path("remember", "app", lambda m, n: [m.append(f"turn {i}", role="user", actor="ana") for i in range(n)],
         lambda m, i, st: m.remember(f"Ana keeps hive {i}", evidence=[st[i]], purposes=["converse"], embed=False)),
    Path("remember_embedded", "app",
         lambda m, n: [m.append(f"turn {i}", role="user", actor="ana") for i in range(n)],
         lambda m, i, st: m.remember(f"Ana keeps hive {i}", evidence=[st[i]], purposes=["converse"])),
    Path("correct", "app", _chain, _correct),
    Path("supersede", "app", _chain, _supersede),
    Path("forget", "app", lambda m, n: _remembered(m, n, "forget"),
         lambda m, i, st: m.forget(st[i][0], reason="no longer true")),
    Path("pin", "app", lambda m, n: _remembered(m, n, "pin"), lambda m, i, st: m.pin(st[i][0])),
    Path("derive", "app", lambda m, n: _remembered(m, n, "derive"),
         lambda m, i, st: m.derive([st[i][0], st[i + 1][0]], f"derived {i}")),
    Path("assert_fact", "app", _facts, _assert_fact),
    Path("retract_fact", "app", _asserted, lambda m, i, st: m.retract_fact(st[i], reason="moved")),
    Path("log_turn", "app", lambda m, n: None, lambda m, i, st: m.log_turn("hives", "ana", f"hive {i}", role="user")),
    Path("log_turn_new_log", "app", lambda m, n: None,
         lambda m, i, st: m.log_turn(f"log {i}", "ana", f"hive {i}", role="user")),
    Path("create_session_unnamed", "app", lambda m, n: None, lambda m, i, st: m.create_session()),
    Path("add_messages", "app", _session,
         lambda m, i, st: m.add_messages(st, [{"actor": "ana", "body": f"I keep hive {i}"}])),
    Path("create_session", "app", lambda m, n: None, lambda m, i, st: _session(m, i)),
    Path("store_put", "app", lambda m, n: None,
         lambda m, i, st: m.store_put("default", ["prefs"], f"key{i % 7}", {"v": i}, ["converse"])),
    Path("complete_embedding_jobs", "worker", lambda m, n: None, _jobs("embedding")),
    Path("complete_passage_embedding_jobs", "worker", lambda m, n: None, _jobs("passage_embedding")),
    Path("tasks", "worker", lambda m, n: None, _task_cycle),
    Path("decide_duplicate", "app", lambda m, n: _remembered(m, 2 * n, "dup"),
         lambda m, i, st: m.decide_duplicate(st[2 * i][0], st[2 * i + 1][0], "distinct", reason="not the same")),
    Path("remember_keys", "app", lambda m, n: _remembered(m, n, "keys"),
         lambda m, i, st: m._runner.run(_generated.remember_keys(m, st[i][0], [f"ana keeps hive {i}",
                                                                                f"hive {i} is ana's"]))),
    Path("refresh_term_stats", "worker", lambda m, n: None, lambda m, i, st: _refreshed(m, i)),
    Path("add_entity_alias", "app", lambda m, n: _about(m, [f"hive {i}" for i in range(5)]),
         lambda m, i, st: m.add_entity_alias(f"hive {i % 5}", f"hive nickname {i}")),
    Path("merge_entities", "app", lambda m, n: [_about(m, [f"keep {i}", f"absorb {i}"]) for i in range(n)],
         lambda m, i, st: m.merge_entities(f"keep {i}", f"absorb {i}")),
    Path("set_session_peer_config", "app", _session,
         lambda m, i, st: m.set_session_peer_config(st, "ben", {"observe_others": i % 2 == 0})),
    Path("add_peer", "app", lambda m, n: None, lambda m, i, st: m.add_peer(f"peer {i}", "human")),
    Path("set_setting", "admin", lambda m, n: None, lambda m, i, st: m.set_setting("rrf_k", 50 + i % 5)),
    # not delegated (it runs ANALYZE): it runs on the coordinator, which sends each statement to the worker
    Path("erase", "admin", _erasable,
         lambda m, i, st: m.erase({"data_subject": f"subj-{i}"}, reason="request", actor="dpo"), "coordinator"),
]
# what a worker-role path works on, written beforehand by the app role
FEEDS = {"complete_embedding_jobs": lambda m, n: _remembered(m, n, "emb"),
         "complete_passage_embedding_jobs": lambda m, n: [m.append(f"passage {i} of hives", role="user", actor="ana")
                                                          for i in range(n)],
         "tasks": _tasks}


def memory(conn: psycopg.Connection) -> tuple[int, int, dict[str, int]]:
    """The kept plans, the backend's own memory (all its contexts: the RSS also counts the shared buffers it has
    touched, which grow with the tables), and the kept plans by statement."""
    kept = dict(conn.execute("""select coalesce(ident, ''), sum(total_bytes)::bigint from pg_backend_memory_contexts
                                 where name = 'CachedPlan' group by 1""").fetchall())
    own = conn.execute("select sum(total_bytes)::bigint from pg_backend_memory_contexts").fetchone()[0]
    return sum(kept.values()), own, kept


def through_coordinator(cluster: LocalCluster, path: Path, calls: int) -> dict[str, Any]:
    """The same calls from a client of the coordinator: the RSS of the worker's backend that runs them."""
    worker, total = cluster.worker_nodes[0], WARM + calls
    user = f"pgrecall_{TENANT}_{path.role}"
    with Memory(TENANT, conninfo=worker.dsn(user=user), principal="ana", scopes=["default"]) as setup:
        state = path.prepare(setup, total + 1)
    with psycopg.connect(worker.dsn(), autocommit=True) as admin:
        def backends() -> set[int]:
            return {r[0] for r in admin.execute("select pid from pg_stat_activity where usename = %s", (user,))}

        before = backends()
        conn = psycopg.connect(cluster.coordinator.dsn(user=user), autocommit=True)
        mem = Memory(TENANT, conn=conn, principal="ana", scopes=["default"], embedder=HashedVectors())
        for i in range(WARM):
            path.call(mem, i, state)
        [pid] = backends() - before

        def rss() -> int:
            with open(f"/proc/{pid}/status") as f:
                return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
        rss0 = rss()
        started = time.perf_counter()
        for i in range(WARM, total):
            path.call(mem, i, state)
        seconds = time.perf_counter() - started
        rss1 = rss()
        conn.close()
        return {"rss": (rss0, rss1), "ms": 1000 * seconds / calls}


def measure(cluster: LocalCluster, path: Path, calls: int) -> dict[str, Any]:
    worker = cluster.worker_nodes[0] if path.node == "worker" else cluster.coordinator
    total = WARM + calls
    with Memory(TENANT, conninfo=worker.dsn(user=f"pgrecall_{TENANT}_{path.role}"), principal="ana",
                scopes=["default"]) as setup:
        state = path.prepare(setup, total + 1)
    if path.name in FEEDS:
        with Memory(TENANT, conninfo=worker.dsn(user=f"pgrecall_{TENANT}_app"), principal="ana",
                    scopes=["default"]) as feeder:
            FEEDS[path.name](feeder, total + 1)
    with psycopg.connect(worker.dsn(user=f"pgrecall_{TENANT}_{path.role}"), autocommit=True) as conn:
        mem = Memory(TENANT, conn=conn, principal="ana", scopes=["default"], embedder=HashedVectors())
        for i in range(WARM):
            path.call(mem, i, state)
        kept0, own0, by0 = memory(conn)
        started = time.perf_counter()
        for i in range(WARM, total):
            path.call(mem, i, state)
        seconds = time.perf_counter() - started
        kept1, own1, by1 = memory(conn)
    grown = sorted(((by1[k] - by0.get(k, 0), k) for k in by1), reverse=True)[:4]
    return {"kept": (kept0, kept1), "own": (own0, own1), "ms": 1000 * seconds / calls,
            "grown": [(g, " ".join(k.split())[:150]) for g, k in grown if g > 64 * 1024]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--paths", default=",".join(p.name for p in PATHS))
    ap.add_argument("--through-coordinator", action="store_true",
                    help="call through the coordinator; only the worker backend's RSS is read")
    args = ap.parse_args(argv)
    build = find_citus_build()
    if build is None:
        raise SystemExit("no Citus build in .citus/: run make citus")
    wanted = args.paths.split(",")
    mb = 1024 * 1024
    with LocalCluster(build, workers=1) as cluster:
        with psycopg.connect(cluster.coordinator.dsn(), autocommit=True) as conn:
            install.install(conn)
            install.install(conn, [TENANT])
            conn.execute(f"select pgrecall.set_tenant_setting('{TENANT}', 'task_backoff_seconds', '0')")
        for node in (cluster.coordinator, cluster.worker_nodes[0]):
            with psycopg.connect(node.dsn(), autocommit=True) as conn:
                conn.execute("set citus.enable_ddl_propagation = off")
                for role in ("app", "worker", "admin"):
                    conn.execute(f"grant select on pg_backend_memory_contexts to pgrecall_{TENANT}_{role}")
                    conn.execute(f"grant execute on function pg_get_backend_memory_contexts() "
                                 f"to pgrecall_{TENANT}_{role}")
        with Memory(TENANT, conninfo=cluster.coordinator.dsn(user=f"pgrecall_{TENANT}_app")) as mem:
            mem.add_scope("default")
            for name, kind in (("bot", "agent"), ("ana", "human"), ("ben", "human")):
                mem.add_peer(name, kind)
        global _app_dsn
        _app_dsn = cluster.worker_nodes[0].dsn(user=f"pgrecall_{TENANT}_app")
        log(f"cluster up; {args.calls} calls a path after {WARM}")
        print("| path | calls | kept plans MB before -> after | all contexts MB before -> after | KB a call "
              "| ms a call |")
        print("|---|---|---|---|---|---|")
        for path in PATHS:
            if path.name not in wanted:
                continue
            try:
                if args.through_coordinator:
                    r = through_coordinator(cluster, path, args.calls)
                    (r0, r1) = r["rss"]
                    print(f"| {path.name} (through the coordinator) | {args.calls} | | {r0 / mb:.0f} -> {r1 / mb:.0f} "
                          f"| | {r['ms']:.2f} |", flush=True)
                    continue
                r = measure(cluster, path, args.calls)
            except Exception as e:  # a survey: say which path failed, and go on
                log(f"{path.name}: {type(e).__name__}: {e}")
                continue
            (k0, k1), (r0, r1) = r["kept"], r["own"]
            print(f"| {path.name} | {args.calls} | {k0 / mb:.1f} -> {k1 / mb:.1f} | {r0 / mb:.1f} -> {r1 / mb:.1f} "
                  f"| {(k1 - k0) / 1024 / args.calls:.1f} | {r['ms']:.2f} |", flush=True)
            for g, k in r["grown"]:
                print(f"|   | +{g / mb:.2f} MB | {k} | | | |", flush=True)
        log("done")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
