"""Fusion rules measured offline on the arms' own lists (a development tool).

After ``eval/locomo.py --keep-home`` has loaded and embedded the tenant, this
script asks the tenant's own arm functions (_lexical_arm, _dense_arm: the SQL
recall runs) for each question's ranked lists with their scores, once, and
keeps them in a JSON file. Candidate fusion rules are then scored on those
lists in seconds, per conversation and category, before one of them is
written in PL/pgSQL and measured again with ``make eval`` (which is what
counts: this file only chooses what is worth writing).

    PGRECALL_HOME=... .venv/bin/python eval/arms.py dump --data ../shared/data/locomo-dev --out /tmp/arms.json
    .venv/bin/python eval/arms.py score /tmp/arms.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import locomo

DEPTH = 100


def memory_turns(conn, tenant: str, data: Path) -> dict[int, tuple[str, str | None]]:
    """Each memory of the loaded tenant as (its scope, the dia id of the turn it cites): the loader appends each
    conversation's turns in order, so a turn's log offset is its place in turns.jsonl."""
    by_offset, counter = {}, defaultdict(int)
    for turn in locomo.read_jsonl(data / "turns.jsonl"):
        scope = locomo.scope_name(turn["conversation_id"])
        counter[scope] += 1
        by_offset[(scope, counter[scope])] = turn["dia_id"]
    return {mid: (scope, by_offset.get((scope, offset))) for mid, offset, scope in conn.execute(
        f"select m.id, o.log_offset, m.scope from {tenant}.memory m join {tenant}.memory_link l "
        f"on l.memory_id = m.id join {tenant}.observation o on o.id = l.target_observation_id")}


def dump(args) -> None:
    import psycopg

    from pgrecall import db
    from pgrecall.embedder import get_embedder

    locomo.EmbeddingCache(args.embed_cache).install()
    t = args.tenant
    queries = [q for q in locomo.read_jsonl(args.data / "queries.jsonl") if q["evidence"]]
    out = []
    with psycopg.connect(db.admin_conninfo(), autocommit=True) as conn:
        conn.execute(f"set search_path = {t}, public")
        principal = conn.execute(f"select {t}._peer_id(%s)", (locomo.PRINCIPAL,)).fetchone()[0]
        turn_of = memory_turns(conn, t, args.data)
        embedder = get_embedder()
        vectors = embedder.embed([q["question"] for q in queries])
        for q, vec in zip(queries, vectors):
            scope = locomo.scope_name(q["conversation_id"])
            lex = conn.execute(f"select ids, scores from {t}._lexical_arm(%s, %s, 'converse', false, null, %s, %s)",
                               (principal, [scope], q["question"], DEPTH)).fetchone()
            den = conn.execute(f"select ids, cosines from {t}._dense_arm(%s, %s, 'converse', false, null, %s, %s)",
                               (principal, [scope], vec, DEPTH)).fetchone()
            name = lambda i: turn_of.get(i, (None, None))[1]
            out.append({"query_id": q["query_id"], "conversation": q["conversation_id"], "category": q["category_name"],
                        "evidence": q["evidence"],
                        "lex": [[name(i), s] for i, s in zip(lex[0], lex[1])],
                        "dense": [[name(i), c] for i, c in zip(den[0], den[1])]})
    args.out.write_text(json.dumps(out), encoding="utf-8")
    print(f"wrote {len(out)} questions to {args.out}")


# -- fusion rules (the candidates) ----------------------------------------------


def rrf(lex, dense, depth=20, k=60, **_):
    s = defaultdict(float)
    for r, (d, _x) in enumerate(lex[:depth], 1):
        s[d] += 1 / (k + r)
    for r, (d, _x) in enumerate(dense[:depth], 1):
        s[d] += 1 / (k + r)
    return sorted(s, key=lambda d: -s[d])


def scores_fuse(lex, dense, depth=20, floor=0.30, dense_norm="abs", lex_norm="max", w=0.5, **_):
    s = defaultdict(float)
    lex, dense = lex[:depth], dense[:depth]
    if lex:
        top = lex[0][1]
        for d, x in lex:
            s[d] += (1 - w) * (x / top)
    if dense:
        top = dense[0][1]
        for d, c in dense:
            if dense_norm == "abs":
                v = (c - floor) / (1 - floor)
            elif dense_norm == "max":
                v = (c - floor) / (top - floor) if top > floor else 1
            s[d] += w * v
    return sorted(s, key=lambda d: -s[d])


RULES = {
    "rrf20": lambda lx, d: rrf(lx, d, 20),
    "rrf10": lambda lx, d: rrf(lx, d, 10),
    "rrf50": lambda lx, d: rrf(lx, d, 50),
    "rrf100": lambda lx, d: rrf(lx, d, 100),
    "lex": lambda lx, d: [x for x, _ in lx],
    "dense": lambda lx, d: [x for x, _ in d],
    "sum_max_max": lambda lx, d: scores_fuse(lx, d, 20, dense_norm="max"),
    "sum_max_abs": lambda lx, d: scores_fuse(lx, d, 20, dense_norm="abs"),
    "sum_max_max100": lambda lx, d: scores_fuse(lx, d, 100, dense_norm="max"),
    "sum_max_abs100": lambda lx, d: scores_fuse(lx, d, 100, dense_norm="abs"),
}


def score_rule(data, rule):
    rows = []
    for q in data:
        ranked = rule(q["lex"], q["dense"])[:10]
        rows.append({"category": q["category"], "conversation": q["conversation"],
                     **locomo.score(ranked, set(q["evidence"]))})
    return locomo.aggregate(rows)


def score(args) -> None:
    data = json.loads(args.file.read_text())
    names = args.rules.split(",") if args.rules else list(RULES)
    base = score_rule(data, RULES[args.base])
    for name in names:
        agg = score_rule(data, RULES[name])
        o = agg["overall"]
        worst = []
        for group in ("by_conversation", "by_category"):
            for g, v in agg[group].items():
                for m in locomo.METRICS:
                    d = v[m] - base[group][g][m]
                    if d < -0.0005:
                        worst.append(f"{g} {m} {d:+.3f}")
        print(f"{name:18s} R@5 {o['recall@5']:.3f} R@10 {o['recall@10']:.3f} nDCG {o['ndcg@10']:.3f}  "
              + " ".join(f"{g}:{v['recall@5']:.3f}/{v['recall@10']:.3f}/{v['ndcg@10']:.3f}"
                         for g, v in list(agg["by_conversation"].items()) + list(agg["by_category"].items())))
        if name != args.base:
            print(f"{'':18s} losses vs {args.base}: {len(worst)} {'; '.join(worst[:8])}")


def main(argv=None):
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("--data", type=Path, required=True)
    d.add_argument("--out", type=Path, required=True)
    d.add_argument("--tenant", default="locomo")
    d.add_argument("--embed-cache", type=Path, default=locomo.REPO / "eval" / ".cache" / "embeddings.sqlite")
    s = sub.add_parser("score")
    s.add_argument("file", type=Path)
    s.add_argument("--rules")
    s.add_argument("--base", default="rrf20")
    args = p.parse_args(argv)
    {"dump": dump, "score": score}[args.cmd](args)



def fuse_general(lex, dense, depth=100, floor=0.30, lex_norm="max", dense_norm="max", comb="sum"):
    s = defaultdict(list)
    lex, dense = lex[:depth], dense[:depth]
    if lex:
        top, bot = lex[0][1], lex[-1][1]
        for d, x in lex:
            v = x / top if lex_norm == "max" else ((x - bot) / (top - bot) if top > bot else 1)
            s[d].append(v)
    if dense:
        top, bot = dense[0][1], dense[-1][1]
        for d, c in dense:
            if dense_norm == "max":
                v = (c - floor) / (top - floor) if top > floor else 1
            elif dense_norm == "minmax":
                v = (c - bot) / (top - bot) if top > bot else 1
            elif dense_norm == "ratio":
                v = c / top
            s[d].append(v)
    if comb == "sum":
        f = {d: sum(v) for d, v in s.items()}
    elif comb == "mnz":
        f = {d: sum(v) * len(v) for d, v in s.items()}
    elif comb == "max":
        f = {d: max(v) + 0.001 * sum(v) for d, v in s.items()}
    return sorted(f, key=lambda d: -f[d])


for depth in (20, 50, 100):
    for ln in ("max", "minmax"):
        for dn in ("max", "minmax", "ratio"):
            for comb in ("sum", "mnz"):
                RULES[f"f{depth}_{ln}_{dn}_{comb}"] = (lambda depth_, ln_, dn_, comb_: lambda lx, d: fuse_general(
                    lx, d, depth_, lex_norm=ln_, dense_norm=dn_, comb=comb_))(depth, ln, dn, comb)


def weighted_rrf(lex, dense, depth=100, k=60, floor=0.30, power=1.0):
    s = defaultdict(float)
    lex, dense = lex[:depth], dense[:depth]
    if lex:
        top = lex[0][1]
        for r, (d, x) in enumerate(lex, 1):
            s[d] += (x / top) ** power / (k + r)
    if dense:
        top = dense[0][1]
        for r, (d, c) in enumerate(dense, 1):
            v = (c - floor) / (top - floor) if top > floor else 1
            s[d] += v ** power / (k + r)
    return sorted(s, key=lambda d: -s[d])


for depth in (20, 50, 100):
    RULES[f"wrrf{depth}"] = (lambda depth_: lambda lx, d: weighted_rrf(lx, d, depth_))(depth)
    RULES[f"f{depth}_max_max_max"] = (lambda depth_: lambda lx, d: fuse_general(lx, d, depth_, comb="max"))(depth)


def impute_fuse(lex, dense, depth=100, floor=0.30, half=False):
    lex, dense = lex[:depth], dense[:depth]
    L, D = {}, {}
    if lex:
        top = lex[0][1]
        L = {d: x / top for d, x in lex}
    if dense:
        top = dense[0][1]
        D = {d: ((c - floor) / (top - floor) if top > floor else 1) for d, c in dense}
    lmiss = min(L.values()) if L else 0
    dmiss = min(D.values()) if D else 0
    if half:
        lmiss, dmiss = lmiss / 2, dmiss / 2
    f = {d: L.get(d, lmiss) + D.get(d, dmiss) for d in set(L) | set(D)}
    return sorted(f, key=lambda d: -f[d])


for depth in (20, 50, 100):
    RULES[f"imp{depth}"] = (lambda depth_: lambda lx, d: impute_fuse(lx, d, depth_))(depth)



def evidence(lex, dense, lex_depth, dense_depth, floor=0.30):
    """Score fusion's evidence of each listed id (BM25 over the first, cosine above the floor over the first's)."""
    s = defaultdict(float)
    lex, dense = lex[:lex_depth], dense[:dense_depth]
    if lex:
        top = lex[0][1]
        for d, x in lex:
            s[d] += x / top
    if dense:
        top = dense[0][1]
        for d, c in dense:
            s[d] += (c - floor) / (top - floor) if top > floor else 1
    return s


def rrf_then_evidence(lex, dense, lex_depth=20, dense_depth=100, limit=10):
    """fusion = 'rrf_scores': RRF over the first 20 chooses the rows, their evidence orders them. The SQL
    computes each chosen row's cosine; the dumped dense list read to 100 stands in for that here."""
    s = evidence(lex, dense, lex_depth, dense_depth)
    return sorted(rrf(lex, dense, 20)[:limit], key=lambda d: -s[d])


def evidence_head(lex, dense, head, limit=10):
    """Score fusion (depth 100) decides the first `head` rows, RRF's order fills the rest."""
    s = evidence(lex, dense, 100, 100)
    out = sorted(s, key=lambda d: -s[d])[:head]
    out += [d for d in rrf(lex, dense, 20) if d not in out]
    return out[:limit]


for lex_depth in (20, 50, 100):
    for dense_depth in (20, 50, 100):
        RULES[f"rrf_scores_l{lex_depth}_d{dense_depth}"] = (lambda a, b: lambda lx, d: rrf_then_evidence(
            lx, d, a, b))(lex_depth, dense_depth)
RULES["rrf_scores"] = RULES["rrf_scores_l20_d100"]


def rrf_then_dense_scaled(lex, dense, scale, floor=0.30, limit=10):
    """rrf_scores with the dense evidence on another scale: 'abs' (c - floor) / (1 - floor), so a dense arm
    whose best barely clears the floor says little; 'geo' the geometric mean of that and the share of the
    dense first's rise, (c - floor) / sqrt((first - floor) (1 - floor))."""
    s = evidence(lex, [], 20, 0)
    if dense:
        top = dense[0][1]
        for d, c in dense[:100]:
            s[d] += (c - floor) / ((1 - floor) if scale == "abs" else math.sqrt((top - floor) * (1 - floor)))
    return sorted(rrf(lex, dense, 20)[:limit], key=lambda d: -s[d])


RULES["rrf_scores_dense_abs"] = lambda lx, d: rrf_then_dense_scaled(lx, d, "abs")
RULES["rrf_scores_dense_geo"] = lambda lx, d: rrf_then_dense_scaled(lx, d, "geo")
for head in (3, 4, 5, 6, 7):
    RULES[f"head{head}"] = (lambda h: lambda lx, d: evidence_head(lx, d, h))(head)


if __name__ == "__main__":
    main()
