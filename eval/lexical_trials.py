"""Three recall trials scored offline on the arms' lists (issue #48, a development tool).

After ``eval/locomo.py --keep-home`` has loaded the development split and ``eval/arms.py dump`` has written
each question's lexical and dense lists (100 deep), ``dump`` reads the kept tenant's text vectors (each
memory's ``tsv``, its lexemes with their counts) and vectors, and adds lists scored here in Python:

- ``pylex``: BM25 (k1 1.2, b 0.75, BM25's idf) over each conversation's memories, the question's lexemes
  unpruned: the reference the other lexical lists are compared with (it is not the SQL arm, which prunes
  and recruits);
- ``rm3``: the same query expanded by RM3 pseudo-relevance feedback with Anserini's defaults (the first
  10 hits, 10 terms, the original query at 0.5);
- ``ctx1`` / ``ctx05``: BM25 over each turn's memory together with the turns just before and after it in
  its session (the window input version 2 embeds), the neighbours' words counted 1 and 0.5.

``score`` fuses each list with the dense arm as recall does (``rrf_scores``: RRF over the first 20 of each
chooses ten rows, score evidence orders them; eval/arms.py) and as plain RRF, and reorders the fused rows by
maximal marginal relevance (MMR over the memories' vectors, lambda 0.5, 0.7, 0.9), each against the same
rule over the SQL arm's own list, by conversation and category.

    PGRECALL_HOME=... .venv/bin/python eval/lexical_trials.py dump --arms /tmp/arms.json --out /tmp/lexical.json
    .venv/bin/python eval/lexical_trials.py score /tmp/lexical.json

Offline scores choose what is worth building; only ``make eval`` decides (eval/results/offline51.md).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import arms
import locomo

TENANT = "locomo"
K1, B = 1.2, 0.75
RM3_DOCS, RM3_TERMS, RM3_ORIGINAL = 10, 10, 0.5
# a neighbour's words counted at these weights (0.5 is the built recall_lexical_window): whether a lighter
# neighbour keeps the window's gains without its losses in temporal and open-domain questions
NEIGHBOUR_WEIGHTS = (0.15, 0.25, 0.35)


class Corpus:
    """One conversation's documents (dia id -> lexeme counts) with BM25's statistics."""

    def __init__(self, docs: dict[str, Counter], statistics_of: dict[str, Counter] | None = None,
                 length: dict[str, float] | None = None):
        """statistics_of: the documents whose document frequencies give the idf (by default these);
        length: each document's length (by default its weighted count of words)."""
        self.docs = docs
        df: Counter[str] = Counter()
        for counts in (statistics_of or docs).values():
            df.update(counts.keys())
        n = len(docs)
        self.idf = {w: math.log(1 + (n - c + 0.5) / (c + 0.5)) for w, c in df.items()}
        self.length = length or {d: sum(c.values()) for d, c in docs.items()}
        self.avg = sum(self.length.values()) / n

    def bm25(self, weights: dict[str, float], depth: int = 100) -> list[list]:
        out = []
        for d, c in self.docs.items():
            s = sum(qw * self.idf.get(w, 0.0) * c[w] * (K1 + 1) / (c[w] + K1 * (1 - B + B * self.length[d] / self.avg))
                    for w, qw in weights.items() if c.get(w))
            if s > 0:
                out.append([d, s])
        out.sort(key=lambda x: -x[1])
        return out[:depth]

    def rm3(self, terms: list[str], first: list[list]) -> dict[str, float]:
        """The relevance model of the first hits (P(w|d) x the hit's share of their scores), its best terms
        mixed with the original query."""
        top = first[:RM3_DOCS]
        weights: Counter[str] = Counter({w: RM3_ORIGINAL / len(terms) for w in terms})
        total = sum(s for _d, s in top)
        relevance: Counter[str] = Counter()
        for d, s in top:
            counts = self.docs[d]
            for w, tf in counts.items():
                relevance[w] += (s / total) * tf / self.length[d]
        best = relevance.most_common(RM3_TERMS)
        norm = sum(v for _w, v in best) or 1
        for w, v in best:
            weights[w] += (1 - RM3_ORIGINAL) * v / norm
        return weights


def _neighbour(dia_id: str, step: int) -> str:
    session, n = dia_id[1:].split(":")
    return f"D{session}:{int(n) + step}"


def with_neighbours(docs: dict[str, Counter], weight: float) -> dict[str, Counter]:
    out = {}
    for d, counts in docs.items():
        merged: Counter = Counter(counts)
        for step in (-1, 1):
            for w, tf in docs.get(_neighbour(d, step), {}).items():
                merged[w] += weight * tf
        out[d] = merged
    return out


def dump(args) -> None:
    import psycopg

    from pgrecall import db

    data = json.loads(args.arms.read_text())
    queries = {q["query_id"]: q for q in locomo.read_jsonl(args.data / "queries.jsonl")}
    t = TENANT
    with psycopg.connect(db.admin_conninfo(), autocommit=True) as conn:
        turn_of = arms.memory_turns(conn, t, args.data)
        docs: defaultdict[str, dict[str, Counter]] = defaultdict(dict)
        for mid, lexeme, count in conn.execute(
                f"select m.id, u.lexeme, coalesce(cardinality(u.positions), 1) from {t}.memory m, unnest(m.tsv) u"):
            if mid in turn_of:
                scope, dia_id = turn_of[mid]
                docs[scope].setdefault(dia_id, Counter())[lexeme] += count
        vectors = {"|".join(turn_of[mid]): json.loads(v) for mid, v in conn.execute(
            f"select memory_id, embedding::text from {t}.memory_embedding") if mid in turn_of}
        terms = {qid: [r[0] for r in conn.execute("select lexeme from unnest(to_tsvector('english', %s))",
                                                  (q["question"],))] for qid, q in queries.items()}
    corpora = {}
    for scope, d in docs.items():
        window = with_neighbours(d, 0.5)
        corpora[scope] = {
            "own": Corpus(d), "ctx1": Corpus(with_neighbours(d, 1.0)), "ctx05": Corpus(window),
            # what the tenant's statistics give without counting the windows (the turns' own idf), with the
            # window's length as its weighted words, its distinct words (a neighbour's at half), or the
            # turn's own words
            "ctx05 own idf": Corpus(window, statistics_of=d),
            "ctx05 own idf, distinct words": Corpus(window, statistics_of=d, length={
                k: sum(1.0 if w in d[k] else 0.5 for w in c) for k, c in window.items()}),
            "ctx05 own idf, own length": Corpus(window, statistics_of=d, length={
                k: float(sum(c.values())) for k, c in d.items()})}
        for weight in NEIGHBOUR_WEIGHTS:
            corpora[scope][f"ctx{weight}"] = Corpus(with_neighbours(d, weight))
    for q in data:
        c = corpora[locomo.scope_name(q["conversation"])]
        words = terms[q["query_id"]]
        q["pylex"] = c["own"].bm25({w: 1.0 for w in words})
        q["rm3"] = c["own"].bm25(c["own"].rm3(words, q["pylex"])) if q["pylex"] else []
        q["ctx1"] = c["ctx1"].bm25({w: 1.0 for w in words})
        for name in ("ctx05", "ctx05 own idf", "ctx05 own idf, distinct words", "ctx05 own idf, own length",
                     *(f"ctx{weight}" for weight in NEIGHBOUR_WEIGHTS)):
            q[name] = c[name].bm25({w: 1.0 for w in words})
    args.out.write_text(json.dumps({"questions": data, "vectors": vectors}), encoding="utf-8")
    print(f"wrote {len(data)} questions and {len(vectors)} vectors to {args.out}")


def mmr(q: dict, vectors: dict, lam: float, pool: int = 20, limit: int = 10) -> list[str]:
    """The fused rows (RRF over the first 20 of each arm) re-chosen by maximal marginal relevance."""
    import numpy as np

    scope = locomo.scope_name(q["conversation"])
    rrf: defaultdict[str, float] = defaultdict(float)
    for ranked in (q["lex"][:20], q["dense"][:20]):
        for r, (d, _s) in enumerate(ranked, 1):
            rrf[d] += 1 / (60 + r)
    fused = sorted(rrf, key=lambda d: -rrf[d])[:pool]
    if not fused:
        return []
    relevance = {d: rrf[d] / rrf[fused[0]] for d in fused}  # the RRF score, 1 for the first
    vec = {d: np.asarray(vectors[f"{scope}|{d}"]) for d in fused}
    chosen: list[str] = []
    rest = list(fused)
    while rest and len(chosen) < limit:
        best = max(rest, key=lambda d: lam * relevance[d]
                   - (1 - lam) * max((float(vec[d] @ vec[c]) for c in chosen), default=0.0))
        chosen.append(best)
        rest.remove(best)
    return chosen


def score(args) -> None:
    stored = json.loads(args.file.read_text())
    data, vectors = stored["questions"], stored["vectors"]
    fused = arms.RULES["rrf_scores"]
    rules = {
        "rrf_scores (SQL lexical arm)": lambda q: fused(q["lex"], q["dense"]),
        "rrf_scores (pylex)": lambda q: fused(q["pylex"], q["dense"]),
        "rrf_scores (rm3)": lambda q: fused(q["rm3"], q["dense"]),
        "rrf_scores (ctx1)": lambda q: fused(q["ctx1"], q["dense"]),
        "rrf_scores (ctx05)": lambda q: fused(q["ctx05"], q["dense"]),
        "rrf_scores (ctx05, the turns' own idf)": lambda q: fused(q["ctx05 own idf"], q["dense"]),
        "rrf_scores (ctx05, the turns' own idf, distinct words)": lambda q: fused(
            q["ctx05 own idf, distinct words"], q["dense"]),
        "rrf_scores (ctx05, the turns' own idf and length)": lambda q: fused(q["ctx05 own idf, own length"],
                                                                          q["dense"]),
        **{f"rrf_scores (ctx{weight})": (lambda q, weight=weight: fused(q[f"ctx{weight}"], q["dense"]))
           for weight in NEIGHBOUR_WEIGHTS if f"ctx{weight}" in data[0]},
        "rrf20 (SQL lexical arm)": lambda q: arms.rrf(q["lex"], q["dense"], 20),
        "rrf20 (ctx05)": lambda q: arms.rrf(q["ctx05"], q["dense"], 20),
        "mmr 0.5": lambda q: mmr(q, vectors, 0.5),
        "mmr 0.7": lambda q: mmr(q, vectors, 0.7),
        "mmr 0.9": lambda q: mmr(q, vectors, 0.9),
    }

    def aggregate(rule):
        return locomo.aggregate([{"category": q["category"], "conversation": q["conversation"],
                                  **locomo.score(rule(q)[:10], set(q["evidence"]))} for q in data])

    bases = {"rrf_scores": aggregate(rules["rrf_scores (SQL lexical arm)"]),
             "rrf20": aggregate(rules["rrf20 (SQL lexical arm)"])}
    categories = ("single-hop", "multi-hop", "temporal", "open-domain", "adversarial")
    print("| rule | R@5 | R@10 | nDCG@10 | " + " | ".join(f"{c} R@5 / R@10" for c in categories)
          + " | cells x metrics below the same fusion over the SQL lexical arm |")
    print("|---|---:|---:|---:|" + "---|" * len(categories) + "---|")
    for name, rule in rules.items():
        agg = aggregate(rule)
        base = bases["rrf_scores" if name.startswith("rrf_scores") else "rrf20"]
        losses = [f"{cell} {m} {agg[g][cell][m] - base[g][cell][m]:+.3f}"
                  for g in ("by_conversation", "by_category") for cell in agg[g] for m in locomo.METRICS
                  if agg[g][cell][m] - base[g][cell][m] < -0.0005]
        o, by_category = agg["overall"], agg["by_category"]
        print(f"| {name} | {o['recall@5']:.3f} | {o['recall@10']:.3f} | {o['ndcg@10']:.3f} | "
              + " | ".join(f"{by_category[c]['recall@5']:.3f} / {by_category[c]['recall@10']:.3f}"
                           for c in categories)
              + f" | {len(losses)}{': ' + '; '.join(losses) if losses else ''} |")


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
