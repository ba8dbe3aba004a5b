"""What storing long observations costs, with each passage embedding policy (run twice each, alternating).

A document observation is cut into several passages (an abstract of ~1,500 characters into three);
each embedded passage is one more forward pass of the model. For each policy this loads the same
documents into a tenant of its own (``append_observation`` kind document + ``remember`` of the whole
text as one memory, through the app role), then lets the real worker drain both queues, and reports
the ingest time, the embedding time, and how many vectors each queue produced. The documents are
consecutive LoCoMo turns joined to about --chars characters (real English prose, not templates).

    .venv/bin/python -m bench.passages --docs 100
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import psycopg
from psycopg.types.json import Jsonb

from .harness import embedded_server

# shared/ sits beside the main checkout, and two levels up from a worktree (as the Makefile's LOCOMO)
LOCOMO = next((p for p in (Path(__file__).resolve().parents[n] / "shared" / "data" / "locomo-dev" / "turns.jsonl"
                           for n in (2, 3)) if p.exists()), Path("shared/data/locomo-dev/turns.jsonl"))


def documents(n: int, chars: int, path: Path) -> list[str]:
    turns = [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    out, cur = [], ""
    for t in turns:
        cur = f"{cur} {t}".strip()
        if len(cur) >= chars:
            out.append(cur)
            cur = ""
            if len(out) == n:
                break
    return out


def run(policy: str, docs: list[str], n: int) -> dict:
    import pgrecall
    from pgrecall import db, install
    from pgrecall.worker import Worker

    tenant = f"pass_{policy}_{n}"
    with psycopg.connect(db.admin_conninfo(), autocommit=True) as admin:
        install.install(admin, [tenant])
        admin.execute("select pgrecall.set_tenant_setting(%s, 'passage_embedding', %s)", (tenant, Jsonb(policy)))
    with pgrecall.connect(db.tenant_conninfo(tenant), tenant=tenant, principal="reader") as mem:
        mem.add_scope("papers")
        mem.add_peer("reader", "human")
        started = time.perf_counter()
        for text in docs:
            offset = mem.append(text, role="document", kind="document", scope="papers", scopes=["papers"])
            mem.remember(text, evidence=[offset], purposes=["converse"], scope="papers", scopes=["papers"])
        ingest = time.perf_counter() - started
    worker = Worker(tenant, conninfo=db.tenant_conninfo(tenant, "worker"))
    started = time.perf_counter()
    stats = worker.drain(refresh_stats=False)
    embed = time.perf_counter() - started
    with psycopg.connect(db.admin_conninfo(), autocommit=True) as admin:
        passages = admin.execute(f"select count(*) from {tenant}.passage").fetchone()[0]
    return {"policy": policy, "documents": len(docs), "passages": passages, "memory_vectors": stats.stored,
            "passage_vectors": stats.passages_stored, "ingest_s": round(ingest, 2), "embed_s": round(embed, 2),
            "total_s": round(ingest + embed, 2)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=100)
    parser.add_argument("--chars", type=int, default=1500)
    parser.add_argument("--data", type=Path, default=LOCOMO)
    args = parser.parse_args(argv)
    from pgrecall.embedder import get_embedder

    get_embedder().embed(["warm up"])
    docs = documents(args.docs, args.chars, args.data)
    with embedded_server("pgr-pass-"):
        rows = [run(policy, docs, n) for n, policy in enumerate(("all", "messages", "all", "messages"))]
    print(f"{len(docs)} documents of ~{args.chars} characters (mean {sum(map(len, docs)) / len(docs):.0f})")
    print("| policy | passages | memory vectors | passage vectors | ingest s | embed s | total s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['policy']} | {r['passages']} | {r['memory_vectors']} | {r['passage_vectors']} | {r['ingest_s']} "
              f"| {r['embed_s']} | {r['total_s']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
