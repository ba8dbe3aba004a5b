"""Where the evidence sits in the arms' lists, and two trials scored offline (issue #48, a development tool).

After ``eval/locomo.py --keep-home`` has loaded the development split and ``eval/arms.py dump`` has written
each question's lexical and dense lists (100 deep), this script

- ``ceiling``: counts, per category, the evidence turns by the best rank either arm gives them (how much of a
  category any fusion of the arms' first 20 could find at all);
- ``dump``: adds two more lists per question from the kept tenant: the dense arm asked again with the
  question's vector moved towards its first hits' vectors (Rocchio's pseudo-relevance feedback: k = 3,
  beta 0.75 and k = 5, beta 0.5, the textbook values), and the keys from what was said alone (the lexical
  arm's key hits, ``recall_memory_keys``, without its merge into the memory's own score);
- ``own``: adds two dense lists from the kept tenant's stored vectors: ``own``, the memories ranked by the
  cosine of their own text's vector (``text_embedding``, what duplicates compare) to the question, and
  ``dense_max``, by the better of that and the input-version-2 vector's (the text with the turns around it);
  both cut at the tenant's dense_floor, each question over its own conversation;
- ``score``: RRF over each arm's first 20 (``rrf20``, what recall's RRF chooses from) against rules that add
  those lists, by conversation and category, with each (cell, metric) that falls below ``rrf20``.

    PGRECALL_HOME=... .venv/bin/python eval/offline_trials.py dump --arms /tmp/arms.json --out /tmp/trials.json
    PGRECALL_HOME=... .venv/bin/python eval/offline_trials.py own --arms /tmp/arms.json --out /tmp/own.json
    .venv/bin/python eval/offline_trials.py score /tmp/trials.json
    .venv/bin/python eval/offline_trials.py ceiling /tmp/arms.json

Offline scores choose what is worth building; only ``make eval`` decides (eval/results/offline61.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import arms
import locomo

TENANT = "locomo"
ROCCHIO = ((3, 0.75), (5, 0.5))  # (first hits, their weight)


def _rank(ranked: list, dia_id: str) -> int | None:
    return next((r for r, (d, _s) in enumerate(ranked, 1) if d == dia_id), None)


def ceiling(args) -> None:
    data = json.loads(args.file.read_text())
    print("| category | evidence turns | in some arm's first 10 | first 20 | 21-100 only | in neither arm's 100 |")
    print("|---|---:|---:|---:|---:|---:|")
    for category in ("single-hop", "multi-hop", "temporal", "open-domain", "adversarial"):
        counts: Counter[str] = Counter()
        for q in (q for q in data if q["category"] == category):
            for dia_id in q["evidence"]:
                ranks = [r for r in (_rank(q["lex"], dia_id), _rank(q["dense"], dia_id)) if r]
                best = min(ranks, default=None)
                counts["all"] += 1
                counts["10"] += bool(best and best <= 10)
                counts["20"] += bool(best and best <= 20)
                counts["100"] += bool(best and best > 20)
                counts["none"] += best is None
        print(f"| {category} | {counts['all']} | {counts['10']} | {counts['20']} | {counts['100']} "
              f"| {counts['none']} |")


def _arms_and_questions(args) -> tuple[list, dict]:
    """The dumped arms' file, the split's questions by id, and the embedding cache installed."""
    locomo.EmbeddingCache(args.embed_cache).install()
    return (json.loads(args.arms.read_text()),
            {q["query_id"]: q for q in locomo.read_jsonl(args.data / "queries.jsonl")})


def dump(args) -> None:
    import numpy as np
    import psycopg

    from pgrecall import db
    from pgrecall.embedder import get_embedder

    data, queries = _arms_and_questions(args)
    t = TENANT
    with psycopg.connect(db.admin_conninfo(), autocommit=True) as conn:
        conn.execute(f"set search_path = {t}, public")
        # the lexical arm as installed, but answering with its key hits alone (a throwaway tenant's copy)
        source = conn.execute(f"select pg_get_functiondef('{t}._lexical_arm'::regproc)").fetchone()[0]
        merge = "cross join lateral _merge_best(ids, scores, k.key_ids, k.key_scores, p_depth) r"
        if merge not in source:
            raise SystemExit("the lexical arm no longer merges key hits as this script expects")
        conn.execute(source.replace(merge, "cross join lateral (select k.key_ids as merged_ids, "
                                           "k.key_scores as merged_scores) r")
                     .replace(f"FUNCTION {t}._lexical_arm(", f"FUNCTION {t}._lexical_arm_keys_alone("))
        principal = conn.execute(f"select {t}._peer_id(%s)", (locomo.PRINCIPAL,)).fetchone()[0]
        settings = json.dumps(conn.execute(f"select {t}._settings() || '{{\"recall_memory_keys\": true}}'")
                              .fetchone()[0])
        turn_of = arms.memory_turns(conn, t, args.data)

        def named(ids, scores):
            return [[turn_of.get(i, (None, None))[1], s] for i, s in zip(ids, scores)]

        vectors = {mid: np.array(json.loads(v), dtype=np.float32) for mid, v in conn.execute(
            f"select memory_id, embedding::text from {t}.memory_embedding")}
        question_vectors = get_embedder().embed([queries[q["query_id"]]["question"] for q in data])
        for q, vector in zip(data, question_vectors):
            scopes = [locomo.scope_name(q["conversation"])]
            first = conn.execute(f"select ids from {t}._dense_arm(%s, %s, 'converse', false, null, %s, 20)",
                                 (principal, scopes, [float(x) for x in vector])).fetchone()[0]
            for k, beta in ROCCHIO:
                hits = [vectors[i] for i in first[:k] if i in vectors]
                if not hits:
                    q[f"prf{k}"] = q["dense"]
                    continue
                moved = np.asarray(vector, dtype=np.float32) + beta * np.mean(hits, axis=0)
                moved /= np.linalg.norm(moved)
                q[f"prf{k}"] = named(*conn.execute(
                    f"select ids, cosines from {t}._dense_arm(%s, %s, 'converse', false, null, %s, 100)",
                    (principal, scopes, [float(x) for x in moved])).fetchone())
            q["keys"] = named(*conn.execute(
                f"select ids, scores from {t}._lexical_arm_keys_alone(%s, %s, 'converse', false, null, %s, 100, "
                f"p_settings => %s::jsonb)", (principal, scopes, queries[q["query_id"]]["question"], settings))
                .fetchone())
    args.out.write_text(json.dumps(data), encoding="utf-8")
    print(f"wrote {len(data)} questions to {args.out}")


def _ranked_over_floor(dia_ids: list, cosines, floor: float, depth: int = 100) -> list:
    import numpy as np

    order = np.argsort(-cosines, kind="stable")[:depth]
    return [[dia_ids[i], float(cosines[i])] for i in order if cosines[i] >= floor]


def own(args) -> None:
    import numpy as np
    import psycopg

    from pgrecall import db
    from pgrecall.embedder import get_embedder

    data, queries = _arms_and_questions(args)
    t = TENANT
    with psycopg.connect(db.admin_conninfo(), autocommit=True) as conn:
        floor = float(conn.execute(f"select ({t}._settings() ->> 'dense_floor')::float8").fetchone()[0])
        turn_of = arms.memory_turns(conn, t, args.data)
        rows = conn.execute(f"select memory_id, embedding::text, text_embedding::text from {t}.memory_embedding "
                            f"where input_version = 2 and text_embedding is not null").fetchall()
    by_scope: defaultdict[str, list] = defaultdict(list)
    for mid, v2, text in rows:
        scope, dia_id = turn_of.get(mid, (None, None))
        if dia_id is not None:
            by_scope[scope].append((dia_id, json.loads(v2), json.loads(text)))
    matrices = {scope: ([d for d, _v, _t in ms], np.array([v for _d, v, _t in ms], dtype=np.float32),
                        np.array([x for _d, _v, x in ms], dtype=np.float32)) for scope, ms in by_scope.items()}
    question_vectors = get_embedder().embed([queries[q["query_id"]]["question"] for q in data])
    for q, vector in zip(data, question_vectors):
        dia_ids, v2s, texts = matrices[locomo.scope_name(q["conversation"])]
        qv = np.asarray(vector, dtype=np.float32)

        by_text, by_v2 = texts @ qv, v2s @ qv  # unit vectors: dot products are cosines
        q["own"] = _ranked_over_floor(dia_ids, by_text, floor)
        q["dense_max"] = _ranked_over_floor(dia_ids, np.maximum(by_text, by_v2), floor)
    args.out.write_text(json.dumps(data), encoding="utf-8")
    print(f"wrote {len(data)} questions to {args.out}")


def rrf(lists: list[list], depth: int = 20, k: int = 60) -> list[str]:
    score: defaultdict[str, float] = defaultdict(float)
    for ranked in lists:
        for r, (d, _s) in enumerate(ranked[:depth], 1):
            score[d] += 1 / (k + r)
    return sorted(score, key=lambda d: -score[d])


def merged(own: list, keys: list, how: str) -> list:
    """Each memory once: the better (max) or the sum of its own BM25 and its best key's."""
    score: defaultdict[str, float] = defaultdict(float)
    for d, s in own:
        score[d] = s
    for d, s in keys:
        score[d] = max(score[d], s) if how == "max" else score[d] + s
    return sorted(score.items(), key=lambda kv: -kv[1])


RULES = {
    "rrf20": lambda q: rrf([q["lex"], q["dense"]]),
    "+prf3": lambda q: rrf([q["lex"], q["dense"], q["prf3"]]),
    "+prf5": lambda q: rrf([q["lex"], q["dense"], q["prf5"]]),
    "prf3 for dense": lambda q: rrf([q["lex"], q["prf3"]]),
    "keys max": lambda q: rrf([merged(q["lex"], q["keys"], "max"), q["dense"]]),
    "keys sum": lambda q: rrf([merged(q["lex"], q["keys"], "sum"), q["dense"]]),
    "keys a third list": lambda q: rrf([q["lex"], q["dense"], q["keys"]]),
    "own text a third list": lambda q: rrf([q["lex"], q["dense"], q["own"]]),
    "dense by the better vector": lambda q: rrf([q["lex"], q["dense_max"]]),
}


def score(args) -> None:
    data = json.loads(args.file.read_text())

    def aggregate(rule):
        return locomo.aggregate([{"category": q["category"], "conversation": q["conversation"],
                                  **locomo.score(rule(q)[:10], set(q["evidence"]))} for q in data])

    base = aggregate(RULES["rrf20"])
    print("| rule | R@5 | R@10 | nDCG@10 | multi-hop R@10 | open-domain R@10 | cells x metrics below rrf20 |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name, rule in RULES.items():
        try:
            agg = aggregate(rule)
        except KeyError:  # a file without that dump's lists
            continue
        losses = [f"{cell} {m} {agg[group][cell][m] - base[group][cell][m]:+.3f}"
                  for group in ("by_conversation", "by_category") for cell in agg[group] for m in locomo.METRICS
                  if agg[group][cell][m] - base[group][cell][m] < -0.0005]
        o = agg["overall"]
        by_category = agg["by_category"]
        print(f"| {name} | {o['recall@5']:.3f} | {o['recall@10']:.3f} | {o['ndcg@10']:.3f} | "
              f"{by_category['multi-hop']['recall@10']:.3f} | {by_category['open-domain']['recall@10']:.3f} | "
              f"{len(losses)}{': ' + '; '.join(losses[:6]) if losses else ''} |")


def add_split_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """--data (the development split) and --embed-cache, as eval/locomo.py takes them."""
    parser.add_argument("--data", type=Path, default=locomo.REPO.parent / "shared" / "data" / "locomo-dev")
    parser.add_argument("--embed-cache", type=Path, default=locomo.REPO / "eval" / ".cache" / "embeddings.sqlite")
    return parser


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("ceiling")
    c.add_argument("file", type=Path)
    for name in ("dump", "own"):
        d = add_split_arguments(sub.add_parser(name))
        d.add_argument("--arms", type=Path, required=True)
        d.add_argument("--out", type=Path, required=True)
    s = sub.add_parser("score")
    s.add_argument("file", type=Path)
    args = p.parse_args(argv)
    {"ceiling": ceiling, "dump": dump, "own": own, "score": score}[args.cmd](args)


if __name__ == "__main__":
    main()
