"""recall_lexical_window at other neighbour weights, measured by the SQL itself (issue #48, a development tool).

The built window (migration 0049, off) counts a neighbour's word at half, in the arm's term frequency and in the
stored window lengths. ``run`` takes a tenant kept by ``eval/locomo.py --keep-home`` (the windows are written by
its embedding run) and, for each weight given, rewrites the tenant's copy of ``_window_candidates`` and its
stored window lengths to that weight, then runs every question through ``recall`` (hybrid, the setting on) as
``make eval`` does, and checks each run against the default under the per-cell rule. The tenant is put back
at 0.5 afterwards. ``heads`` then scores, from the saved top 10s, lists that keep the default's first k rows
and fill the rest from the window's run (in its order, or by RRF of the two runs), the "never pushes out a
direct hit" guard of the issue's item 3.

    PGRECALL_HOME=<kept home> .venv/bin/python eval/window_weights.py run --out /tmp/window.json 0.5 0.25
    .venv/bin/python eval/window_weights.py heads /tmp/window.json

A weight of 0.5 reproduces the eval's ``hybrid+window`` line: the check that the rewriting is the only change.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import arms
import locomo

TENANT = "locomo"
BUILT = "0.5 * cardinality(array_positions(u.weights"  # a neighbour's occurrence counts 1 - 0.5


def questions(data: Path) -> list[dict]:
    return [q for q in locomo.read_jsonl(data / "queries.jsonl") if q["evidence"]]


def failures(base: dict, got: dict) -> list[str]:
    return [f"{c['cell']} " + " ".join(f"{m} {d:+.4f}" for m, d in c["deltas"].items() if d < 0)
            for c in locomo.cell_check(base, got) if not c["passed"]]


def line(name: str, base: dict, got: dict) -> str:
    o = got["overall"]
    fails = failures(base, got)
    return (f"| {name} | {o['recall@5']:.3f} | {o['recall@10']:.3f} | {o['ndcg@10']:.3f} | "
            f"{'; '.join(fails) if fails else 'every cell PASSES'} |")


def run(args) -> None:
    import psycopg
    from psycopg.types.json import Jsonb

    import pgrecall
    from pgrecall import db

    queries = questions(args.data)
    t = TENANT
    with psycopg.connect(db.admin_conninfo(), autocommit=True) as admin:
        memory_dia = {mid: dia for mid, (_scope, dia) in arms.memory_turns(admin, t, args.data).items()}
        built = admin.execute(f"select pg_get_functiondef('{t}._window_candidates'::regproc)").fetchone()[0]
        if BUILT not in built:
            raise SystemExit("_window_candidates no longer counts a neighbour at half: update BUILT")

        def weigh(w: float) -> None:
            admin.execute(built.replace(BUILT, f"{1 - w} * cardinality(array_positions(u.weights"))
            admin.execute(f"update {t}.memory_embedding set window_length = (select coalesce(sum(case when 'A' = "
                          f"any (u.weights) then 1.0 else {w} end), 0) from unnest(window_tsv) u) "
                          "where window_tsv is not null")
            admin.execute(f"update {t}.corpus_stat set window_avg_length = (select avg(window_length) "
                          f"from {t}.memory_embedding where window_length is not null)")

        def window(on: bool) -> None:
            admin.execute("select pgrecall.set_tenant_setting(%s, 'recall_lexical_window', %s)", (t, Jsonb(on)))

        saved = {}
        with pgrecall.connect(db.tenant_conninfo(t), tenant=t, principal=locomo.PRINCIPAL) as mem:
            window(False)
            default = locomo.run_queries(mem, queries, memory_dia, "hybrid")
            saved["default"] = {k: v["top10"] for k, v in default["details"].items()}
            base = locomo.aggregate(default["rows"])
            print("| hybrid, input version 2 | R@5 | R@10 | nDCG@10 | against the default |")
            print("|---|---:|---:|---:|---|")
            print(line("default", base, base))
            try:
                for w in args.weights:
                    weigh(w)
                    window(True)
                    got = locomo.run_queries(mem, queries, memory_dia, "hybrid")
                    window(False)
                    saved[str(w)] = {k: v["top10"] for k, v in got["details"].items()}
                    print(line(f"window, a neighbour's word at {w}", base, locomo.aggregate(got["rows"])))
            finally:
                window(False)
                weigh(0.5)
    args.out.write_text(json.dumps(saved), encoding="utf-8")


def heads(args) -> None:
    saved = json.loads(args.file.read_text())
    queries = questions(args.data)

    def aggregate(lists: dict) -> dict:
        return locomo.aggregate([{"category": q["category_name"], "conversation": q["conversation_id"],
                                  **locomo.score(lists[q["query_id"]][:10], set(q["evidence"]))} for q in queries])

    default = saved["default"]
    base = aggregate(default)
    print("| list | R@5 | R@10 | nDCG@10 | against the default |")
    print("|---|---:|---:|---:|---|")
    for w in (k for k in saved if k != "default"):
        for keep in (0, 2, 3, 5):
            in_order, fused = {}, {}
            for qid, first in default.items():
                head, other = first[:keep], saved[w][qid]
                in_order[qid] = head + [m for m in other if m not in head][:10 - keep]
                rrf: dict = {}
                for ranked in (first, other):
                    for r, m in enumerate(ranked, 1):
                        if m is not None:
                            rrf[m] = rrf.get(m, 0.0) + 1 / (60 + r)
                fused[qid] = head + sorted((m for m in rrf if m not in head), key=lambda m: -rrf[m])[:10 - keep]
            print(line(f"weight {w}: the default's first {keep}, then the window's", base, aggregate(in_order)))
            print(line(f"weight {w}: the default's first {keep}, then RRF of both", base, aggregate(fused)))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=locomo.REPO.parent / "shared" / "data" / "locomo-dev")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("weights", type=float, nargs="+")
    h = sub.add_parser("heads")
    h.add_argument("file", type=Path)
    args = p.parse_args(argv)
    {"run": run, "heads": heads}[args.cmd](args)


if __name__ == "__main__":
    main()
