"""What one call of each fact write path costs a distributed tenant: commands and round trips, and which statements
Citus could not route on its fast path.

    python -m bench.citus_fact_census [--paths assert_fact_new,retract_fact,...] [--show]

Starts a local cluster (a coordinator and one worker, pgrecall.cluster; needs `make citus`), installs one tenant,
and for each path makes a few calls through the coordinator (past the five on which PL/pgSQL plans anew), then one
more with ``citus.log_remote_commands`` and ``citus.log_local_commands`` on, on both nodes (the worker's through
``ALTER ROLE``: a delegated call runs in a session the coordinator opens there). Citus relays the worker's notices
to the client, so one client sees:

- ``coordinator sends``: the commands the coordinator sends to the worker (each a round trip; a delegated call is
  one, a call in a transaction block one for each statement of the function);
- on the worker, its local statements on the tenant's shards: ``one table`` (no join, subquery, CTE or unnest: Citus's
  fast path, whose local plan it keeps), ``planned`` (the others: planned, deparsed for the shard and planned again
  at every execution), ``copies`` (an ``INSERT ... SELECT`` evaluated apart and copied into the shard),
  ``intermediate`` (a subplan's result written out and read back), and the commands it sends to other nodes.

``--show`` prints each statement of the worker, ``--transaction`` runs the paths in a transaction block (as the
deriver does), where Citus does not delegate.
"""

from __future__ import annotations

import argparse
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg

from pgrecall import install
from pgrecall.cluster import LocalCluster, find_citus_build
from pgrecall.driver import Memory

TENANT = "fc"
WARM = 6
_seq = iter(range(1, 1_000_000))


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] load {os.getloadavg()[0]:.2f} {msg}", flush=True)


def _town(i: int) -> str:
    return "Vila" + "".join(chr(97 + i // 26 ** k % 26) for k in range(3))


def _said(mem: Memory, text: str) -> int:
    return mem.append(text, role="user", actor="ana")


@dataclass
class Path:
    name: str
    role: str
    prepare: Callable[[Memory], Any]  # as the app role on the coordinator, before each call: what it uses
    call: Callable[[Memory, Any], None]


def _remember_prep(mem: Memory) -> int:
    return _said(mem, f"Ana keeps hive {next(_seq)}")


def _new_fact_prep(mem: Memory) -> tuple[str, str, int]:
    i = next(_seq)
    town = _town(i)
    return f"person {i}", town, _said(mem, f"I live in {town}")


def _assert(mem: Memory, st: tuple[str, str, int]) -> None:
    subject, town, turn = st
    mem.assert_fact(subject, "lives_in", town, evidence=[{"offset": turn, "quote": town}])


def _superseding_prep(mem: Memory) -> tuple[str, str, int]:
    i = next(_seq)
    town = _town(i)
    return "ana", town, _said(mem, f"I live in {town}")


def _confirming_prep(mem: Memory) -> tuple[str, str, int]:
    i = next(_seq)
    st = (f"person {i}", _town(i), _said(mem, f"I live in {_town(i)}"))
    _assert(mem, st)
    return st


def _retract_prep(mem: Memory) -> int:
    subject, town, turn = _new_fact_prep(mem)
    return mem.assert_fact(subject, "lives_in", town, evidence=[{"offset": turn, "quote": town}]).fact_id


def _about(mem: Memory, names: list[str]) -> None:
    turn = _said(mem, f"a turn about {', '.join(names)}")
    mem.remember(f"a memory about {', '.join(names)}", evidence=[turn], purposes=["converse"], about=names,
                 embed=False)


def _alias_prep(mem: Memory) -> int:
    i = next(_seq)
    _about(mem, [f"hive {i}"])
    return i


def _merge_prep(mem: Memory) -> int:
    i = next(_seq)
    _about(mem, [f"keep {i}", f"absorb {i}"])
    _, town, turn = _new_fact_prep(mem)
    mem.assert_fact(f"absorb {i}", "lives_in", town, evidence=[{"offset": turn, "quote": town}])
    return i


def _task_prep(mem: Memory) -> int:
    s = mem.create_session(f"chat {next(_seq)}")
    mem.add_session_peers(s, ["ana", "bot"])
    i = next(_seq)
    mem.add_messages(s, [{"actor": "ana", "body": f"I live in {_town(i)}"}])
    return i


def _task_assert(mem: Memory, i: int) -> None:
    [task] = mem.claim_tasks("w", limit=1, task_types=["representation"])
    quote = _town(i)
    start = len(b"I live in ")
    mem.task_assert_fact(task, "lives_in", quote, worker="w",
                         evidence=[{"offset": task.messages[0]["offset"], "quote": quote, "start": start,
                                    "end": start + len(quote.encode())}])
    mem.complete_task(task, {}, worker="w")


PATHS = [
    Path("remember", "app", _remember_prep,
         lambda m, turn: m.remember(f"Ana keeps hive {turn}", evidence=[turn], purposes=["converse"], embed=False)),
    Path("assert_fact_new", "app", _new_fact_prep, _assert),
    Path("assert_fact_superseding", "app", _superseding_prep, _assert),
    Path("assert_fact_confirming", "app", _confirming_prep, _assert),
    Path("retract_fact", "app", _retract_prep, lambda m, fact: m.retract_fact(fact, reason="moved")),
    Path("add_entity_alias", "app", _alias_prep, lambda m, i: m.add_entity_alias(f"hive {i}", f"hive nick {i}")),
    Path("merge_entities", "app", _merge_prep, lambda m, i: m.merge_entities(f"keep {i}", f"absorb {i}")),
    Path("task_assert_fact", "worker", _task_prep, _task_assert),
]

SHARD = re.compile(r"\b\w+\.\w+_\d{5,}\b")


def classify(notes: list[str]) -> dict[str, Any]:
    local = [n.removeprefix("executing the command locally: ") for n in notes
             if n.startswith("executing the command locally: ")]
    sent = [n.removeprefix("issuing ") for n in notes if n.startswith("issuing ")]
    copies = [n for n in notes if n.startswith("executing the copy locally")]

    def planned(q: str) -> bool:
        return (q.count("SELECT") > 1 or " JOIN " in q or "unnest(" in q or q.startswith("WITH")
                or len(set(SHARD.findall(q))) > 1)

    return {"sent": sent, "local": local, "copies": copies,
            "planned": [q for q in local if planned(q)],
            "intermediate": [q for q in local if "intermediate_result" in q]}


def census(cluster: LocalCluster, paths: list[Path], show: bool, transaction: bool) -> None:
    coord = cluster.coordinator
    print("\n| path | coordinator sends | worker: local statements | one table | planned | copies | intermediate |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for path in paths:
        user = f"pgrecall_{TENANT}_{path.role}"
        with Memory(TENANT, conninfo=coord.dsn(user=f"pgrecall_{TENANT}_app"), principal="ana",
                    scopes=["default"]) as setup, \
                psycopg.connect(coord.dsn(user=user), autocommit=True) as conn:
            mem = Memory(TENANT, conn=conn, principal="ana", scopes=["default"])
            notes: list[str] = []
            conn.add_notice_handler(lambda d, notes=notes: notes.append(d.message_primary or ""))
            for k in range(WARM + 1):
                st = path.prepare(setup)
                if k == WARM:
                    conn.execute("set citus.log_remote_commands = on")
                    conn.execute("set citus.log_local_commands = on")
                    notes.clear()
                if transaction:
                    with conn.transaction():
                        path.call(mem, st)
                else:
                    path.call(mem, st)
            conn.execute("reset citus.log_remote_commands")
            conn.execute("reset citus.log_local_commands")
        c = classify(notes)
        # the coordinator's own commands are those it issues; the worker's remote commands (to other nodes) come
        # back relayed as "issuing" too, but a one-worker cluster has no other node holding the tenant
        print(f"| {path.name} | {len(c['sent'])} | {len(c['local'])} | {len(c['local']) - len(c['planned'])} "
              f"| {len(c['planned'])} | {len(c['copies'])} | {len(c['intermediate'])} |", flush=True)
        if show:
            for q in c["sent"]:
                print(f"|   sent: `{q[:200]}` |||||||")
            for q in c["local"]:
                mark = "PLANNED " if q in c["planned"] else ""
                print(f"|   {mark}`{' '.join(q.split())[:240]}` |||||||")
            for q in c["copies"]:
                print(f"|   COPY `{q[:200]}` |||||||")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--paths", default=",".join(p.name for p in PATHS))
    ap.add_argument("--show", action="store_true", help="print each statement")
    ap.add_argument("--transaction", action="store_true", help="each call in a transaction block (not delegated)")
    args = ap.parse_args(argv)
    build = find_citus_build()
    if build is None:
        raise SystemExit("no Citus build in .citus/: run make citus")
    wanted = args.paths.split(",")
    with LocalCluster(build, workers=1) as cluster:
        with psycopg.connect(cluster.coordinator.dsn(), autocommit=True) as conn:
            install.install(conn)
            install.install(conn, [TENANT])
            conn.execute(f"select pgrecall.set_tenant_setting('{TENANT}', 'task_backoff_seconds', '0')")
        with psycopg.connect(cluster.worker_nodes[0].dsn(), autocommit=True) as conn:
            conn.execute("set citus.enable_ddl_propagation = off")
            for role in ("app", "worker"):  # before the coordinator opens its sessions there
                conn.execute(f"alter role pgrecall_{TENANT}_{role} set citus.log_local_commands = on")
                conn.execute(f"alter role pgrecall_{TENANT}_{role} set citus.log_remote_commands = on")
        with Memory(TENANT, conninfo=cluster.coordinator.dsn(user=f"pgrecall_{TENANT}_app")) as mem:
            mem.add_scope("default")
            for name, kind in (("bot", "agent"), ("ana", "human"), ("ben", "human")):
                mem.add_peer(name, kind)
        log("cluster up")
        census(cluster, [p for p in PATHS if p.name in wanted], args.show, args.transaction)
        log("done")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
