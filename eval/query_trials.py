"""Two more recall shapes scored offline on the development split (issue #48, a development tool).

- ``frame``: the dense arm asked with the question's frame taken off (a leading wh-word and its auxiliary,
  "When did", "What is", or a leading auxiliary, "Does", and the question mark): a statement that answers
  shares the question's content words, not its frame. Ranked in numpy over the kept tenant's stored
  version-2 vectors (equal to the SQL dense arm's list for the question as asked), fused with the SQL
  lexical arm's list by RRF over the first 20 of each.
- ``guard``: the windows' lexical list (eval/lexical_trials.py's ``ctx05 own idf``: each turn's words with
  its neighbours' at half) voting in RRF only for memories outside the own-words lexical list's first 20,
  so that a window cannot raise a neighbour past a direct hit (item 3's "never pushes out a direct hit"),
  against the window beside the own words at half votes; the chosen rows ordered by the default's evidence.

    PGRECALL_HOME=<kept home> .venv/bin/python eval/query_trials.py frame --arms /tmp/arms.json
    .venv/bin/python eval/query_trials.py guard /tmp/lexical.json

Offline scores choose what is worth building; only ``make eval`` decides (eval/results/own-text-offline.md).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import arms
import locomo
from offline_trials import TENANT, _ranked_over_floor, add_split_arguments, rrf

AUXILIARY = r"(is|are|was|were|do|does|did|has|have|had|will|would|can|could|should|might)"
WH_FRAME = re.compile(rf"^(what|when|where|who|whom|whose|which|why|how( many| much| long| often| old)?)\b\s*"
                      rf"({AUXILIARY}\b\s*)?", re.I)
AUX_FRAME = re.compile(rf"^{AUXILIARY}\b\s*", re.I)


def without_frame(question: str) -> str:
    text = question.strip().rstrip("?").strip()
    bare = WH_FRAME.sub("", text)
    if bare == text:
        bare = AUX_FRAME.sub("", text)
    return bare or text


def report(data: list, rules: dict, base: str) -> None:
    def aggregate(rule):
        return locomo.aggregate([{"category": q["category"], "conversation": q["conversation"],
                                  **locomo.score(rule(q)[:10], set(q["evidence"]))} for q in data])

    reference = aggregate(rules[base])
    print(f"| rule | R@5 | R@10 | nDCG@10 | (cell, metric) pairs below {base} |")
    print("|---|---:|---:|---:|---|")
    for name, rule in rules.items():
        agg = aggregate(rule)
        losses = [f"{cell} {m} {agg[g][cell][m] - reference[g][cell][m]:+.3f}"
                  for g in ("by_conversation", "by_category") for cell in agg[g]
                  for m in locomo.CHECK_METRICS if agg[g][cell][m] - reference[g][cell][m] < -0.00005]
        o = agg["overall"]
        print(f"| {name} | {o['recall@5']:.3f} | {o['recall@10']:.3f} | {o['ndcg@10']:.3f} | "
              f"{len(losses)}{': ' + '; '.join(losses) if losses else ''} |")


def frame(args) -> None:
    import numpy as np
    import psycopg

    from pgrecall import db
    from pgrecall.embedder import get_embedder

    data = json.loads(args.arms.read_text())
    queries = {q["query_id"]: q for q in locomo.read_jsonl(args.data / "queries.jsonl")}
    locomo.EmbeddingCache(args.embed_cache).install()
    with psycopg.connect(db.admin_conninfo(), autocommit=True) as conn:
        floor = float(conn.execute(f"select ({TENANT}._settings() ->> 'dense_floor')::float8").fetchone()[0])
        turn_of = arms.memory_turns(conn, TENANT, args.data)
        rows = conn.execute(f"select memory_id, embedding::text from {TENANT}.memory_embedding "
                            "where input_version = 2").fetchall()
    by_scope: defaultdict[str, list] = defaultdict(list)
    for mid, vector in rows:
        scope, dia_id = turn_of.get(mid, (None, None))
        if dia_id is not None:
            by_scope[scope].append((dia_id, json.loads(vector)))
    matrices = {scope: ([d for d, _v in ms], np.array([v for _d, v in ms], dtype=np.float32))
                for scope, ms in by_scope.items()}
    asked = [queries[q["query_id"]]["question"] for q in data]
    embedder = get_embedder()
    for q, as_asked, bare in zip(data, embedder.embed(asked), embedder.embed([without_frame(t) for t in asked])):
        dia_ids, vectors = matrices[locomo.scope_name(q["conversation"])]
        q["dense_numpy"] = _ranked_over_floor(dia_ids, vectors @ np.asarray(as_asked, dtype=np.float32), floor)
        q["dense_bare"] = _ranked_over_floor(dia_ids, vectors @ np.asarray(bare, dtype=np.float32), floor)
    print("e.g.", "; ".join(f"{t!r} -> {without_frame(t)!r}" for t in asked[:3]))
    report(data, {"rrf20": lambda q: rrf([q["lex"], q["dense"]]),
                  "rrf20, dense in numpy": lambda q: rrf([q["lex"], q["dense_numpy"]]),
                  "rrf20, dense without the frame": lambda q: rrf([q["lex"], q["dense_bare"]])}, "rrf20")


def weighted_rrf(lists: list[tuple[list, float]], depth: int = 20, k: int = 60) -> list[str]:
    score: defaultdict[str, float] = defaultdict(float)
    for ranked, weight in lists:
        for r, (d, _s) in enumerate(ranked[:depth], 1):
            score[d] += weight / (k + r)
    return sorted(score, key=lambda d: -score[d])


def guard(args) -> None:
    data = json.loads(args.file.read_text())["questions"]
    window = "ctx05 own idf"

    def by_evidence(q, chosen):
        evidence = arms.evidence(q["lex"], q["dense"], 20, 100)
        return sorted(chosen[:10], key=lambda d: -evidence[d])

    def outside_own(q):
        own = {d for d, _s in q["lex"][:20]}
        return [row for row in q[window] if row[0] not in own]

    report(data, {
        "default (rrf_scores)": lambda q: arms.RULES["rrf_scores"](q["lex"], q["dense"]),
        "window beside, half votes": lambda q: by_evidence(q, weighted_rrf(
            [(q["lex"], 0.5), (q[window], 0.5), (q["dense"], 1)])),
        "window outside the own words' 20, full vote": lambda q: by_evidence(q, weighted_rrf(
            [(q["lex"], 1), (outside_own(q), 1), (q["dense"], 1)])),
        "window outside the own words' 20, half vote": lambda q: by_evidence(q, weighted_rrf(
            [(q["lex"], 1), (outside_own(q), 0.5), (q["dense"], 1)])),
    }, "default (rrf_scores)")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    add_split_arguments(sub.add_parser("frame")).add_argument("--arms", type=Path, required=True)
    sub.add_parser("guard").add_argument("file", type=Path)
    args = p.parse_args(argv)
    {"frame": frame, "guard": guard}[args.cmd](args)


if __name__ == "__main__":
    main()
