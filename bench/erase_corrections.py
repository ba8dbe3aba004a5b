"""Erasing a subject whose words justified corrections: how long undoing them takes, with the residual.

N memories (one per observation, 1,000 ordinary data subjects), then C of them corrected, each citing a
turn of subject ``victim`` that brings a word of its own; term statistics refreshed and analysed, the
embedding queues emptied. Then ``victim`` is erased (C corrections undone) and, for comparison, one
ordinary subject. Prints the figures; nothing is written under bench/results.

    python -m bench.erase_corrections                 # 10,000 memories, 2,000 corrections
    python -m bench.erase_corrections --size 100000 --corrections 500
"""

from __future__ import annotations

import argparse
import time

import psycopg

from .harness import embedded_server
from .run import install_tenant, log, role_uri


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.erase_corrections")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--corrections", type=int, default=2_000)
    args = parser.parse_args(argv)
    size, count = args.size, min(args.corrections, args.size)

    import pgrecall

    with embedded_server("pgrc-") as info:
        admin = info.uri()
        app = install_tenant(admin, "corrections")
        mem = pgrecall.connect(app, tenant="corrections", principal="bot", scopes=["s"])
        mem.add_scope("s")
        mem.add_peer("bot", "agent")
        mem.add_peer("ana", "human")
        log(f"ingesting {size} memories")
        offsets = []
        for start in range(0, size, 1000):
            offsets += mem.append_many([{"body": f"memory text number {i} about topic {i % 97}", "source_role": "user",
                                         "actor": "ana", "data_subject_id": f"u-{i % 1000}"}
                                        for i in range(start, min(start + 1000, size))])
        ids = []
        for start in range(0, size, 1000):
            ids += [r.memory_id for r in mem.remember_many(
                [{"body": f"Ana said memory text number {i} about topic {i % 97}", "evidence": [offsets[i]],
                  "purposes": ["converse"]} for i in range(start, min(start + 1000, size))])]
        fixes = mem.append_many([{"body": f"correction {j}: zqfix{j}", "source_role": "user", "actor": "ana",
                                  "data_subject_id": "victim"} for j in range(count)])
        log(f"correcting {count} memories, each citing one of victim's turns")
        started = time.perf_counter()
        for j in range(count):
            k = j * (size // count)  # spread over the corpus
            mem.correct(ids[k], f"Ana said memory text number {k}, corrected zqfix{j}", revision=1, evidence=[fixes[j]])
        per_call = (time.perf_counter() - started) * 1000 / max(count, 1)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("select * from corrections.refresh_term_stats()")
            conn.execute("delete from corrections.embedding_job")
            conn.execute("delete from corrections.passage_embedding_job")
            conn.execute("analyze")
        back_office = pgrecall.connect(role_uri("corrections", "admin"), tenant="corrections")  # erasure's duty
        for subject in ("victim", "u-7"):
            started = time.perf_counter()
            receipt = back_office.erase({"data_subject": subject}, reason="bench", actor="bench")
            ms = (time.perf_counter() - started) * 1000
            erased = receipt.rows_erased or {}
            log(f"erase {subject}: {ms:.0f} ms for {receipt.observations_erased} observations, "
                f"{erased.get('memories_reverted')} memories reverted, "
                f"{erased.get('memory')} deleted; residual zero: {receipt.clean}")
        back_office.close()
        log(f"correct() with evidence: {per_call:.2f} ms a call")
        mem.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
