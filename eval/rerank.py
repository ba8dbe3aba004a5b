"""The re-rank trial of issue #30 item 5: what MiniLM can do after the permission walk, with no other weights.

    .venv/bin/python eval/rerank.py --data ../shared/data/locomo-dev --out eval/results [--pool 20]

The seeds put a cross-encoder after the walk; none is installable here, so the driver keeps the hook
(``recall(..., rerank=...)``: it may reorder or drop the items that passed the walk, never add one) and this
trial measures what the one local model offers in that place, on the development split loaded exactly as
``make eval`` loads it (input version 2, the tenant's defaults):

- ``own-text cosine``: MiniLM's sentence vector of the question against each candidate's own text (under
  input version 2 the stored vector also holds the neighbouring turns, so this is a different signal);
- ``token maxsim``: MiniLM's token vectors, each question token's best cosine among the candidate's tokens,
  summed (late interaction, as ColBERT scores; MiniLM was not trained for it);
- each of the two fused with recall's own order by Reciprocal Rank Fusion at the tenant's ``rrf_k`` (so the
  lexical evidence recall used is not thrown away; no constant of the trial's own).

Each re-ranks the first ``--pool`` items recall returned (20: twice what is scored) and keeps 10; each is
judged by the adoption check against the same run's default hybrid recall (limit 10). Nothing here is tuned:
the pool is the only number, and it is not varied. Writes eval/results/rerank.md and eval/results/runs/rerank.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import locomo

TENANT = "rerank"


def token_vectors(model, texts: list[str]) -> list[np.ndarray]:
    """Each text's unit token vectors without [CLS] and [SEP]."""
    out = model.encode(texts, output_value="token_embeddings", batch_size=64, convert_to_numpy=False)
    vectors = []
    for tokens in out:
        t = tokens.detach().cpu().numpy().astype(np.float32)
        t = t[1:-1] if len(t) > 2 else t
        vectors.append(t / np.maximum(np.linalg.norm(t, axis=1, keepdims=True), 1e-12))
    return vectors


def maxsim(question: np.ndarray, candidate: np.ndarray) -> float:
    return float((question @ candidate.T).max(axis=1).sum())


def rrf(orders: list[list[int]], k: int) -> list[int]:
    """Reciprocal Rank Fusion of several orders of the same candidates (ties: the first order's rank)."""
    first = {c: i for i, c in enumerate(orders[0])}
    score = {c: sum(1.0 / (k + order.index(c) + 1) for order in orders) for c in first}
    return sorted(first, key=lambda c: (-score[c], first[c]))


def trial(mem, queries: list[dict], memory_dia: dict[int, str], pool: int, rrf_k: int) -> dict[str, list[dict]]:
    """Per question, the scored rows of each re-rank of recall's first ``pool`` items."""
    from pgrecall.embedder import Embedder

    model = Embedder(runtime="torch").model  # token-level vectors: sentence-transformers' own API
    rows: dict[str, list[dict]] = {name: [] for name in ("pool order", "own-text cosine", "token maxsim",
                                                         "rrf(recall, own-text cosine)", "rrf(recall, token maxsim)")}
    question_tokens = token_vectors(model, [q["question"] for q in queries])
    question_vectors = model.encode([q["question"] for q in queries], normalize_embeddings=True, batch_size=64)
    seen: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for qi, q in enumerate(queries):
        got = mem.recall(q["question"], mode="hybrid", limit=pool, scopes=[locomo.scope_name(q["conversation_id"])],
                         principal=locomo.PRINCIPAL)
        items = [it for it in got.items if it.memory_id is not None]
        new = [it for it in items if it.memory_id not in seen]
        if new:
            texts = [it.body for it in new]
            for it, tok, vec in zip(new, token_vectors(model, texts),
                                    model.encode(texts, normalize_embeddings=True, batch_size=64), strict=True):
                seen[it.memory_id] = (tok, vec)
        ids = [it.memory_id for it in items]
        cosine = sorted(ids, key=lambda m: -float(seen[m][1] @ question_vectors[qi]))
        late = sorted(ids, key=lambda m: -maxsim(question_tokens[qi], seen[m][0]))
        orders = {"pool order": ids, "own-text cosine": cosine, "token maxsim": late,
                  "rrf(recall, own-text cosine)": rrf([ids, cosine], rrf_k),
                  "rrf(recall, token maxsim)": rrf([ids, late], rrf_k)}
        for name, order in orders.items():
            ranked = [memory_dia.get(m) for m in order[:10]]
            rows[name].append({"category": q["category_name"], "conversation": q["conversation_id"],
                               **locomo.score(ranked, set(q["evidence"]))})
        if qi % 100 == 99:
            locomo.log(f"[rerank] {qi + 1}/{len(queries)} questions")
    return rows


def run(args) -> dict:
    import psycopg

    import pgrecall
    from pgrecall import db, install, server
    from pgrecall.embedder import get_embedder

    turns = locomo.read_jsonl(args.data / "turns.jsonl")
    queries = [q for q in locomo.read_jsonl(args.data / "queries.jsonl") if q["evidence"]]
    home = tempfile.mkdtemp(prefix="pgr-rerank-", dir="/tmp")
    os.environ["PGRECALL_HOME"] = home
    os.environ.pop("PGRECALL_DSN", None)
    locomo.EmbeddingCache(args.embed_cache).install()
    get_embedder().embed(["warm up"])
    try:
        with psycopg.connect(db.admin_conninfo(), autocommit=True) as admin:
            install.install(admin, [TENANT])
        conninfo = db.tenant_conninfo(TENANT)
        with pgrecall.connect(conninfo, tenant=TENANT, principal=locomo.PRINCIPAL) as mem:
            loaded = locomo.ingest(mem, turns, store_questions=False)
            memory_dia = loaded["memory_dia"]
            with psycopg.connect(conninfo, autocommit=True) as app:
                settings = {k: v for k, v, _ in app.execute(f"select * from {TENANT}.settings()")}
            version = int(settings["embedding_input_version"])
            locomo.embed(TENANT, conninfo, version, expect=len(memory_dia))
            default = locomo.run_queries(mem, queries, memory_dia, "hybrid")
            started = time.perf_counter()
            rows = trial(mem, queries, memory_dia, args.pool, int(settings["rrf_k"]))
            seconds = time.perf_counter() - started
    finally:
        server.stop()
        shutil.rmtree(home, ignore_errors=True)
    runs = {f"hybrid/v{version}": locomo.aggregate(default["rows"])}
    runs.update({f"hybrid+{name}/v{version}": locomo.aggregate(r) for name, r in rows.items()})
    return {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "git": locomo.git_info(),
            "command": " ".join([os.path.relpath(sys.executable), *sys.argv]), "pool": args.pool,
            "version": version, "rrf_k": int(settings["rrf_k"]), "questions": len(queries),
            "trial_seconds": round(seconds, 1), "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
            "runs": runs}


def markdown(report: dict) -> str:
    base_key = f"hybrid/v{report['version']}"
    base = report["runs"][base_key]
    lines = ["# The re-rank trial (issue #30 item 5)", "",
             f"`{report['command']}` on {report['date']} (commit {report['git'].get('commit', '?')}); "
             f"{report['questions']} questions of the development split, input version {report['version']}, "
             f"recall's first {report['pool']} items re-ranked and the first 10 scored; RRF at the tenant's "
             f"rrf_k = {report['rrf_k']}. The trial (the recalls of {report['pool']} and the model's vectors of "
             f"every new candidate) took {report['trial_seconds']} s for {report['questions']} questions on this "
             "shared 2-core machine. \"pool order\" is recall's own order of the pool, cut at 10: what the "
             "re-ranks start from.", "",
             "| hybrid, then | R@5 | R@10 | nDCG@10 |", "|---|---:|---:|---:|"]
    for key, run in report["runs"].items():
        o = run["overall"]
        label = "nothing (the default, limit 10)" if key == base_key else key.split("+", 1)[1].rsplit("/", 1)[0]
        lines.append(f"| {label} | {o['recall@5']:.3f} | {o['recall@10']:.3f} | {o['ndcg@10']:.3f} |")
    lines += ["", f"Adoption check of each against the default: {locomo.RULE}.", ""]
    for key, run in report["runs"].items():
        if key == base_key:
            continue
        cells = locomo.cell_check(base, run)
        lines += [f"## {key.split('+', 1)[1].rsplit('/', 1)[0]}", "", "| cell | R@5 | R@10 | nDCG@10 | check |",
                  "|---|---:|---:|---:|---|"]
        lines += [f"| {c['cell']} | " + " | ".join(f"{c['deltas'][m]:+.4f}" for m in locomo.CHECK_METRICS)
                  + f" | {'PASS' if c['passed'] else 'FAIL'} |" for c in cells]
        ok = all(c["passed"] for c in cells)
        lines += ["", "Adopt: every cell PASSES." if ok else
                  "Do not adopt: FAIL in " + ", ".join(c["cell"] for c in cells if not c["passed"]) + ".", ""]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="folder with turns.jsonl and queries.jsonl")
    parser.add_argument("--out", type=Path, required=True, help="folder for rerank.md and runs/rerank.json")
    parser.add_argument("--pool", type=int, default=20, help="how many of recall's items are re-ranked (20)")
    parser.add_argument("--embed-cache", type=Path, default=locomo.REPO / "eval" / ".cache" / "embeddings.sqlite")
    args = parser.parse_args(argv)
    if args.pool < 10:
        parser.error("--pool must be at least 10: the first 10 of the re-ranked pool are scored")
    report = run(args)
    (args.out / "runs").mkdir(parents=True, exist_ok=True)
    (args.out / "runs" / "rerank.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    text = markdown(report)
    (args.out / "rerank.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
