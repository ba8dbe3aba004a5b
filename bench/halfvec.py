"""Would halfvec lose recall? The trial #31 asks for before vectors are stored at half precision.

    python -m bench.halfvec [--size 20000] [--queries 200] [--ef 100]

For two sets of vectors (make bench's synthetic memories and queries; the LoCoMo development split's
turns, as make eval remembers them, and its questions) it asks PostgreSQL, on one embedded server:

- the exact top 10 by cosine over vector(384) (a sequential scan: the truth here),
- HNSW over vector(384) and HNSW over halfvec(384) (m 16, ef_construction 64, the tenant's index),
  at hnsw.ef_search = the tenant's default hnsw_ef_search, with the iterative scan recall uses,
- the exact top 10 over halfvec(384) (what rounding alone costs, with no index),

and reports each one's recall@10 against the exact float top 10. On LoCoMo it also scores the evidence:
the share of questions whose evidence turn is in the dense top 10 of its own conversation, exact over
float against exact over halfvec (a conversation holds fewer turns than exact_dense_below, so recall
searches it exactly). Rule (#31): adopt halfvec only if neither set loses more than 0.005 of recall@10.
Model vectors are cached in bench/cache/ (git-ignored). Writes bench/results/latest-halfvec.md.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
from pathlib import Path

import numpy as np
import psycopg

from . import corpus
from .harness import embedded_server, new_report, write_report

ROOT = Path(__file__).resolve().parent
# Where make eval finds the development split (the Makefile's LOCOMO), beside the checkout or a worktree's.
LOCOMO = next((p for p in (ROOT.parent.parent / "shared" / "data" / "locomo-dev",
                            ROOT.parent.parent.parent / "shared" / "data" / "locomo-dev") if p.exists()),
              ROOT.parent.parent / "shared" / "data" / "locomo-dev")
K = 10


def embedded(texts: list[str], label: str) -> np.ndarray:
    """The model's unit vectors of texts, from bench/cache/ when this exact list was embedded before."""
    from pgrecall.embedder import get_embedder

    key = hashlib.sha256("\0".join(texts).encode()).hexdigest()[:16]
    path = ROOT / "cache" / f"halfvec-{label}-{key}.npy"
    if path.exists():
        return np.load(path)
    vectors = np.asarray(get_embedder().encode_array(texts), dtype=np.float32)
    path.parent.mkdir(exist_ok=True)
    np.save(path, vectors)
    return vectors


def literal(v: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.8g}" for x in v) + "]"


def load(conn: psycopg.Connection, table: str, vectors: np.ndarray, groups: list[str]) -> None:
    conn.execute(f"create table {table} (id integer primary key, grp text, f vector(384), h halfvec(384))")
    with conn.cursor().copy(f"copy {table} (id, grp, f, h) from stdin") as copy:
        for i, v in enumerate(vectors):
            text = literal(v)
            copy.write_row((i, groups[i], text, text))
    conn.execute(f"create index on {table} using hnsw (f vector_cosine_ops) with (m = 16, ef_construction = 64)")
    conn.execute(f"create index on {table} using hnsw (h halfvec_cosine_ops) with (m = 16, ef_construction = 64)")
    conn.execute(f"analyze {table}")


def top(conn: psycopg.Connection, table: str, column: str, q: np.ndarray, *, index: bool,
        group: str | None = None) -> list[int]:
    cast = "vector" if column == "f" else "halfvec"
    conn.execute(f"set enable_indexscan = {'on' if index else 'off'}")
    conn.execute(f"set enable_seqscan = {'off' if index else 'on'}")
    where = "where grp = %(g)s" if group else ""
    rows = conn.execute(f"select id from {table} {where} order by {column} <=> %(q)s::{cast} limit {K}",
                        {"q": literal(q), "g": group}).fetchall()
    return [r[0] for r in rows]


def overlap(a: list[int], truth: list[int]) -> float:
    return len(set(a) & set(truth)) / max(1, len(truth))


def trial(conn: psycopg.Connection, table: str, queries: np.ndarray) -> dict:
    """recall@10 against the exact float top 10, for each way of searching."""
    found: dict[str, list[float]] = {"hnsw vector": [], "hnsw halfvec": [], "exact halfvec": []}
    for q in queries:
        truth = top(conn, table, "f", q, index=False)
        found["hnsw vector"].append(overlap(top(conn, table, "f", q, index=True), truth))
        found["hnsw halfvec"].append(overlap(top(conn, table, "h", q, index=True), truth))
        found["exact halfvec"].append(overlap(top(conn, table, "h", q, index=False), truth))
    return {name: statistics.fmean(v) for name, v in found.items()}


def locomo_sets() -> tuple[list[str], list[str], list[str], list[dict]]:
    """Turns as make eval remembers them (``<speaker>: <text>``), with their conversation, and the questions."""
    from eval.locomo import read_jsonl, turn_text  # the eval's own text, so the vectors are the eval's

    turns = read_jsonl(LOCOMO / "turns.jsonl")
    questions = [q for q in read_jsonl(LOCOMO / "queries.jsonl") if q.get("evidence")]
    texts = [f"{t['speaker']}: {turn_text(t)}" for t in turns]
    ids = [f"{t['conversation_id']}/{t['dia_id']}" for t in turns]
    return texts, [t["conversation_id"] for t in turns], ids, questions


def evidence_recall(conn: psycopg.Connection, qvecs: np.ndarray, questions: list[dict], ids: list[str]) -> dict:
    """Share of each question's evidence turns in its conversation's exact dense top 10: float vs halfvec."""
    out = {}
    for column in ("f", "h"):
        scores = []
        for q, v in zip(questions, qvecs):
            got = {ids[i] for i in top(conn, "locomo", column, v, index=False, group=q["conversation_id"])}
            want = {f"{q['conversation_id']}/{e}" for e in q["evidence"]}
            scores.append(len(got & want) / len(want))
        out["vector" if column == "f" else "halfvec"] = statistics.fmean(scores)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=20000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--ef", type=int, default=100, help="hnsw.ef_search (the tenant's default hnsw_ef_search)")
    ap.add_argument("--out", type=Path, default=ROOT / "results")
    args = ap.parse_args(argv)
    report = new_report("python -m bench.halfvec {args}", argv, size=args.size, ef_search=args.ef)
    bench_texts = corpus.memories(args.size)
    bench_queries = corpus.queries(args.queries, args.size)
    bvec, bq = embedded(bench_texts, "bench"), embedded(bench_queries, "bench-q")
    ltexts, lgroups, lids, lquestions = locomo_sets()
    lvec = embedded(ltexts, "locomo")
    lq = embedded([q["question"] for q in lquestions], "locomo-q")
    with embedded_server("pgrecall-halfvec-") as info, psycopg.connect(info.uri(), autocommit=True) as conn:
        conn.execute("create extension if not exists vector")
        conn.execute(f"set hnsw.ef_search = {args.ef}")
        conn.execute("set hnsw.iterative_scan = relaxed_order")
        load(conn, "synthetic", bvec, ["all"] * len(bvec))
        load(conn, "locomo", lvec, lgroups)
        report["synthetic"] = trial(conn, "synthetic", bq)
        report["locomo"] = trial(conn, "locomo", lq)
        report["locomo_evidence_r10"] = evidence_recall(conn, lq, lquestions, lids)
        report["bytes"] = {t: dict(zip(("f", "h"), conn.execute(
            f"select avg(pg_column_size(f)), avg(pg_column_size(h)) from {t}").fetchone())) for t in ("synthetic",)}
        for t in ("synthetic", "locomo"):
            report["bytes"][t + "_indexes"] = {r[0]: r[1] for r in conn.execute(
                "select indexrelid::regclass::text, pg_relation_size(indexrelid) from pg_index "
                "where indrelid = %s::regclass", (t,))}
    md = render(report, len(bench_texts), len(bench_queries), len(ltexts), len(lquestions))
    write_report(args.out, "halfvec", report, md, default=float)
    print(md)
    return 0


def render(r: dict, n: int, nq: int, ln: int, lnq: int) -> str:
    lines = [f"# halfvec trial: recall@{K} against exact search over vector(384)", "",
             f"Run {r['started']} on {r['machine']}; `{r['command']}`; hnsw.ef_search {r['ef_search']}, "
             "iterative scan relaxed_order, HNSW m 16, ef_construction 64.", "",
             "| vectors | queries | HNSW vector | HNSW halfvec | exact halfvec | halfvec loss (HNSW) |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, size, queries in (("synthetic", n, nq), ("locomo", ln, lnq)):
        t = r[name]
        lines.append(f"| {name} ({size:,}) | {queries} | {t['hnsw vector']:.4f} | {t['hnsw halfvec']:.4f} | "
                     f"{t['exact halfvec']:.4f} | {t['hnsw vector'] - t['hnsw halfvec']:+.4f} |")
    ev = r["locomo_evidence_r10"]
    # The rule compares what recall's index finds today (HNSW over vector) with what it would find over
    # halfvec, both against the exact float truth; exact halfvec shows how much of that is rounding alone.
    worst = max(r[s]["hnsw vector"] - r[s]["hnsw halfvec"] for s in ("synthetic", "locomo"))
    b = r["bytes"]["synthetic"]
    lines += ["", f"LoCoMo evidence recall@{K} of the exact dense top {K} within each conversation: "
              f"vector {ev['vector']:.4f}, halfvec {ev['halfvec']:.4f} ({ev['halfvec'] - ev['vector']:+.4f}).", "",
              f"A value on disk: vector {b['f']:.0f} bytes, halfvec {b['h']:.0f} bytes. Indexes (bytes): "
              + ", ".join(f"{k} {v:,}" for k, v in {**r['bytes']['synthetic_indexes'],
                                                    **r['bytes']['locomo_indexes']}.items()) + ".", "",
              f"Largest loss of HNSW recall@{K} to halfvec: {worst:.4f} (rule: at most 0.005): "
              + ("**adopt**" if worst <= 0.005 else "**do not adopt**") + "."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
