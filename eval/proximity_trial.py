"""Term proximity in the lexical arm, scored offline (issue #48; a development tool, nothing built).

The lexical arm scores a memory by BM25 over its words one at a time: "support group" in a question counts a
turn with "support" in one sentence and "group" in another as much as a turn that says "support group". The
sequential dependence model (Metzler and Croft, 2005) adds, for each pair of adjacent question words, how
often the memory has them next to each other in order and within a window of 8 in any order, with the
weights its authors fixed across collections (0.85 words, 0.10 ordered pairs, 0.05 unordered pairs). Here each
pair is scored as a BM25 term of its own (its document frequency over the conversation's memories) over the
positions the tenant's ``memory.tsv`` stores, so no constant is chosen on this split.

``dump`` reads the kept tenant's positions and adds to each question of ``eval/arms.py dump``'s file a list
``sdm`` and its words-only reference ``words`` (the same BM25 with the same question words, unpruned, as
eval/lexical_trials.py's ``pylex``); ``score`` fuses each with the dense arm as recall does (``rrf_scores``)
and prints them against the SQL arm's list, by conversation and category.

    PGRECALL_HOME=... .venv/bin/python eval/proximity_trial.py dump --arms /tmp/arms.json --out /tmp/prox.json
    .venv/bin/python eval/proximity_trial.py score /tmp/prox.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import arms
import locomo

TENANT = "locomo"
K1, B = 1.2, 0.75
WORDS, ORDERED, UNORDERED = 0.85, 0.10, 0.05  # the model's published weights
WINDOW = 8


def _bm25(tf: float, idf: float, length: float, avg: float) -> float:
    return idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avg))


def _idf(n: int, df: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def _pair_counts(first: list[int], second: list[int]) -> tuple[int, int]:
    """How often the second word follows the first at once, and how often the two fall within WINDOW."""
    ordered = sum(1 for p in first if p + 1 in set(second))
    unordered = sum(1 for p in first for r in second if 0 < abs(p - r) < WINDOW)
    return ordered, unordered


def rank(docs: dict[str, dict[str, list[int]]], words: list[str], proximity: bool, depth: int = 100) -> list:
    n = len(docs)
    length = {d: sum(len(p) for p in lex.values()) for d, lex in docs.items()}
    avg = sum(length.values()) / n
    pairs = [(a, b) for a, b in itertools.pairwise(words) if a != b] if proximity else []
    counts = {d: [_pair_counts(lex.get(a, []), lex.get(b, [])) for a, b in pairs] for d, lex in docs.items()}
    df_words = {w: sum(1 for lex in docs.values() if w in lex) for w in set(words)}
    df_ordered = [sum(1 for c in counts.values() if c[i][0]) for i in range(len(pairs))]
    df_unordered = [sum(1 for c in counts.values() if c[i][1]) for i in range(len(pairs))]
    out = []
    for d, lex in docs.items():
        s = sum(_bm25(len(lex[w]), _idf(n, df_words[w]), length[d], avg) for w in words if w in lex)
        if proximity:
            s = WORDS * s + sum(
                ORDERED * (_bm25(o, _idf(n, df_ordered[i]), length[d], avg) if o else 0.0)
                + UNORDERED * (_bm25(u, _idf(n, df_unordered[i]), length[d], avg) if u else 0.0)
                for i, (o, u) in enumerate(counts[d]))
        if s > 0:
            out.append([d, s])
    out.sort(key=lambda x: -x[1])
    return out[:depth]


def dump(args) -> None:
    import psycopg

    from pgrecall import db

    data = json.loads(args.arms.read_text())
    queries = {q["query_id"]: q for q in locomo.read_jsonl(args.data / "queries.jsonl")}
    t = TENANT
    with psycopg.connect(db.admin_conninfo(), autocommit=True) as conn:
        turn_of = arms.memory_turns(conn, t, args.data)
        docs: defaultdict[str, dict[str, dict[str, list[int]]]] = defaultdict(dict)
        for mid, lexeme, positions in conn.execute(
                f"select m.id, u.lexeme, coalesce(u.positions::int[], '{{1}}') from {t}.memory m, unnest(m.tsv) u"):
            if mid in turn_of:
                scope, dia_id = turn_of[mid]
                docs[scope].setdefault(dia_id, {})[lexeme] = list(positions)
        # the question's words in the order said (to_tsvector's positions), each once
        terms = {}
        for qid, q in queries.items():
            said = conn.execute("select u.lexeme, u.positions::int[] from unnest(to_tsvector('english', %s)) u",
                                (q["question"],)).fetchall()
            terms[qid] = [w for w, _p in sorted(said, key=lambda r: min(r[1] or [0]))]
    for q in data:
        docs_of = docs[locomo.scope_name(q["conversation"])]
        words = terms[q["query_id"]]
        q["words"] = rank(docs_of, words, proximity=False)
        q["sdm"] = rank(docs_of, words, proximity=True)
    args.out.write_text(json.dumps({"questions": data}), encoding="utf-8")
    print(f"wrote {len(data)} questions to {args.out}")


def score(args) -> None:
    data = json.loads(args.file.read_text())["questions"]
    fused = arms.RULES["rrf_scores"]
    rules = {"rrf_scores (SQL lexical arm)": lambda q: fused(q["lex"], q["dense"]),
             "rrf_scores (words, unpruned)": lambda q: fused(q["words"], q["dense"]),
             "rrf_scores (words + proximity)": lambda q: fused(q["sdm"], q["dense"]),
             "lexical alone (SQL arm)": lambda q: [d for d, _s in q["lex"]],
             "lexical alone (words)": lambda q: [d for d, _s in q["words"]],
             "lexical alone (words + proximity)": lambda q: [d for d, _s in q["sdm"]]}

    def aggregate(rule):
        return locomo.aggregate([{"category": q["category"], "conversation": q["conversation"],
                                  **locomo.score(rule(q)[:10], set(q["evidence"]))} for q in data])

    results = {name: aggregate(rule) for name, rule in rules.items()}
    against = {"rrf_scores (words + proximity)": "rrf_scores (words, unpruned)",
               "rrf_scores (words, unpruned)": "rrf_scores (SQL lexical arm)",
               "lexical alone (words + proximity)": "lexical alone (words)"}
    print("| rule | R@5 | R@10 | nDCG@10 | compared with | (cell, metric) pairs below it |")
    print("|---|---:|---:|---:|---|---|")
    for name, agg in results.items():
        o = agg["overall"]
        base_name = against.get(name)
        losses = []
        if base_name:
            base = results[base_name]
            losses = [f"{cell} {m} {agg[g][cell][m] - base[g][cell][m]:+.3f}"
                      for g in ("by_conversation", "by_category") for cell in agg[g] for m in locomo.METRICS
                      if agg[g][cell][m] - base[g][cell][m] < -0.00005]
        print(f"| {name} | {o['recall@5']:.3f} | {o['recall@10']:.3f} | {o['ndcg@10']:.3f} | {base_name or ''} | "
              + (f"{len(losses)}{': ' + '; '.join(losses) if losses else ''}" if base_name else "") + " |")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("--arms", type=Path, required=True)
    d.add_argument("--out", type=Path, required=True)
    d.add_argument("--data", type=Path, default=locomo.REPO.parent / "shared" / "data" / "locomo-dev")
    s = sub.add_parser("score")
    s.add_argument("file", type=Path)
    args = p.parse_args(argv)
    {"dump": dump, "score": score}[args.cmd](args)


if __name__ == "__main__":
    main()
