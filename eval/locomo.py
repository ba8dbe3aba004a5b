"""Retrieval quality of pgrecall on the LoCoMo development split (``make eval``).

Everything goes through pgrecall's real path: a throwaway embedded server,
``install()``, the driver's ``append``/``remember``/``recall`` (the tenant's
SQL functions, as its application role), and the embedding worker. Nothing is
read from or written to a table directly.

For each conversation: one scope, one peer per speaker, an agent peer
``assistant`` as the principal. Each turn is appended to the scope's log, in
its session, and remembered as ``"<speaker>: <text>"`` with that offset as
evidence. A turn is seen by who was in its session (issue #27), so each
session's peers are the conversation's two speakers and the assistant, added
before its first turn, as an agent that listens in would be; and the
assistant's memories are its own (audience ``assistant``): a memory may reach
no more peers than the turns it cites, and the assistant is the one who
recalls them here. remember()
refuses questions (and duplicates): those turns are absent from what pgrecall
stores, so evidence pointing at them cannot be found. The main results score
exactly what pgrecall stores; the evidence coverage (the recall ceiling) is
reported next to them, and a supplementary run, clearly labelled, stores the
refused question turns with their final "?" removed, in a second tenant.

Metric (the dataset's README): per question, search only that question's
conversation; recall@k = share of its evidence dia_ids among the top k;
questions without evidence are skipped; nDCG@10 with binary relevance, ideal
DCG over min(|evidence|, 10). Modes lexical, dense, hybrid; embedding input
versions 1 (title + body) and 2 (body + neighbouring turns of the session).

    .venv/bin/python eval/locomo.py --data ../shared/data/locomo-dev --out eval/results
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

MODES = ("lexical", "dense", "hybrid")
KS = (5, 10)
MODEL = "all-MiniLM-L6-v2"
PRINCIPAL = "assistant"
CATEGORY_ORDER = ("single-hop", "multi-hop", "temporal", "open-domain", "adversarial")
REPO = Path(__file__).resolve().parent.parent
SETTINGS: dict = {}  # --setting key=value (JSON), applied to each tenant after install
LIVE = False  # --live: the worker embeds after each turn


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# -- data ---------------------------------------------------------------------


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def turn_text(turn: dict) -> str:
    """The turn's words, with the shared photo's caption when there is one."""
    text = turn["text"]
    if turn.get("blip_caption"):
        text = f"{text} [shares a photo: {turn['blip_caption']}]"
    return text


def scope_name(conversation_id: str) -> str:
    return conversation_id.lower()


# -- metrics ------------------------------------------------------------------


def score(ranked: list[str | None], evidence: set[str]) -> dict[str, float]:
    out = {}
    for k in KS:
        out[f"recall@{k}"] = len(evidence & set(ranked[:k])) / len(evidence)
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(ranked[:10]) if d in evidence)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(evidence), 10)))
    out["ndcg@10"] = dcg / ideal
    return out


METRICS = tuple(f"recall@{k}" for k in KS) + ("ndcg@10",)


def aggregate(per_question: list[dict]) -> dict:
    """Mean of each metric overall and by category."""
    def mean(rows):
        return {"n": len(rows), **{m: round(statistics.fmean(r[m] for r in rows), 4) for m in METRICS}}

    by_cat, by_conv, by_both = defaultdict(list), defaultdict(list), defaultdict(list)
    for row in per_question:
        by_cat[row["category"]].append(row)
        by_conv[row["conversation"]].append(row)
        by_both[(row["conversation"], row["category"])].append(row)
    return {"overall": mean(per_question),
            "by_category": {c: mean(by_cat[c]) for c in category_order(by_cat)},
            "by_conversation": {v: mean(by_conv[v]) for v in sorted(by_conv)},
            "by_conversation_category": {f"{v}/{c}": mean(by_both[(v, c)])
                                         for v in sorted(by_conv) for c in category_order(by_cat) if (v, c) in by_both}}


def category_order(present) -> list[str]:
    """LoCoMo's five categories in their order, then any other category_name a dataset uses, sorted."""
    present = set(present)
    return [c for c in CATEGORY_ORDER if c in present] + sorted(present - set(CATEGORY_ORDER))


def latency(seconds: list[float]) -> dict:
    ms = sorted(s * 1000 for s in seconds)
    if not ms:
        return {}
    pick = lambda q: ms[min(len(ms) - 1, round(q * (len(ms) - 1)))]
    return {"p50_ms": round(statistics.median(ms), 2), "p95_ms": round(pick(0.95), 2),
            "max_ms": round(ms[-1], 2), "mean_ms": round(statistics.fmean(ms), 2)}


# -- loading ------------------------------------------------------------------


def turn_time(turn: dict) -> datetime:
    """When the turn was said: session_datetime_iso, in the zone it names, or UTC when it names none (LoCoMo's)."""
    at = datetime.fromisoformat(turn["session_datetime_iso"])
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def ingest(mem, turns: list[dict], *, store_questions: bool, after_each_turn=None) -> dict:
    """Append every turn and remember it, with its keys; returns the memory_id -> dia_id map and what remember
    said. after_each_turn: called after each turn (--live: the worker embeds what is queued, as a worker
    running beside a conversation does)."""
    from pgrecall.deriver import statement_keys

    conversations = sorted({t["conversation_id"] for t in turns})
    for conv in conversations:
        mem.add_scope(scope_name(conv), f"LoCoMo {conv}")
    mem.add_peer(PRINCIPAL, "agent")
    for speaker in sorted({t["speaker"] for t in turns}):
        mem.add_peer(speaker, "human")

    speakers = {conv: sorted({t["speaker"] for t in turns if t["conversation_id"] == conv}) for conv in conversations}
    joined: set[int] = set()
    memory_dia: dict[int, str] = {}
    statuses: Counter = Counter()
    keyed_memories: list[tuple[int, str, list[str]]] = []  # each memory's keys (statement_keys), written after
    refused: list[dict] = []
    reworded: list[str] = []
    started = time.perf_counter()
    for turn in turns:  # the file is in conversation, session, turn order
        scope = scope_name(turn["conversation_id"])
        text = turn_text(turn)
        session = mem.create_session(f"session {turn['session']}", scope=scope, scopes=[scope], principal=PRINCIPAL)
        if session not in joined:  # who is there: both speakers and the assistant
            mem.add_session_peers(session, [*speakers[turn["conversation_id"]], PRINCIPAL], scopes=[scope],
                                  principal=PRINCIPAL)
            joined.add(session)
        offset = mem.append(text, role="user", actor=turn["speaker"], session_id=session,
                            occurred_at=turn_time(turn),
                            scope=scope, scopes=[scope], principal=PRINCIPAL)
        body = f"{turn['speaker']}: {text}"
        got = mem.remember(body, evidence=[offset], purposes=["converse"], scope=scope, scopes=[scope],
                           audience=PRINCIPAL, principal=PRINCIPAL)
        if not got.created and store_questions and (got.reason or "").startswith("question"):
            # Supplementary run only: the same words without the final question mark.
            stripped = re.sub(r"[?\s]+$", "", body)
            got = mem.remember(stripped, evidence=[offset], purposes=["converse"], scope=scope, scopes=[scope],
                               audience=PRINCIPAL, principal=PRINCIPAL)
            if got.created:
                reworded.append(f"{turn['conversation_id']}/{turn['dia_id']}")
        reason = (got.reason or "").split(":")[0] if not got.created else None
        statuses[got.status if got.created else f"noop:{reason}"] += 1
        if got.created:
            memory_dia[got.memory_id] = turn["dia_id"]
            # Keys from what was said (recall_memory_keys, issue #48): the turn's first-person statements with
            # the speaker's name for "I", written always (recall reads them only with the setting on).
            keys = statement_keys({"body": text, "actor": turn["speaker"], "offset": offset})
            if keys:
                keyed_memories.append((got.memory_id, scope, keys))
        else:
            refused.append({"conversation_id": turn["conversation_id"], "dia_id": turn["dia_id"], "body": body,
                            "reason": got.reason, "existing_memory_id": got.memory_id})
        if after_each_turn:
            after_each_turn()
    keyed = write_keys(mem, keyed_memories)
    elapsed = time.perf_counter() - started
    return {"memory_dia": memory_dia, "statuses": dict(statuses), "keys": keyed, "refused": refused,
            "reworded": reworded,
            "seconds": elapsed, "turns": len(turns), "created": len(memory_dia)}


def write_keys(mem, keyed: list[tuple[int, str, list[str]]]) -> dict:
    """Each memory's keys through remember_keys, with the vector of each key's text by the tenant's model (the
    driver's embedder, in one batch): recall_memory_keys searches their words, recall_memory_keys_dense their
    vectors."""
    from pgrecall.embedder import get_embedder

    embedder = get_embedder()
    vectors = iter(embedder.embed([k for _, _, keys in keyed for k in keys]))
    for memory_id, scope, keys in keyed:
        given = ["[" + ",".join(repr(float(x)) for x in next(vectors)) + "]" for _ in keys]
        mem.remember_keys(memory_id, keys, embeddings=given, embedding_model=embedder.name, scopes=[scope],
                          principal=PRINCIPAL)
    return {"keys": sum(len(keys) for _, _, keys in keyed), "memories": len(keyed)}


def coverage(queries: list[dict], stored: set[tuple[str, str]]) -> dict:
    """How much of the evidence exists as a memory at all: the ceiling any ranking can reach."""
    refs = [(q["conversation_id"], d) for q in queries for d in set(q["evidence"])]
    reachable = [r for r in refs if r in stored]
    share = [len({d for d in set(q["evidence"]) if (q["conversation_id"], d) in stored}) / len(set(q["evidence"]))
             for q in queries]
    by_cat = defaultdict(list)
    for q, s in zip(queries, share):
        by_cat[q["category_name"]].append(s)
    return {
        "evidence_refs": len(refs),
        "evidence_refs_stored": len(reachable),
        "evidence_refs_unreachable": len(refs) - len(reachable),
        "distinct_evidence_turns_unreachable": len({r for r in refs if r not in stored}),
        "questions": len(queries),
        "questions_with_some_evidence_unreachable": sum(s < 1 for s in share),
        "questions_with_all_evidence_unreachable": sum(s == 0 for s in share),
        "recall_ceiling": round(statistics.fmean(share), 4),
        "recall_ceiling_by_category": {c: round(statistics.fmean(by_cat[c]), 4) for c in category_order(by_cat)},
    }


def live_worker(tenant: str, versions: list[int]):
    """--live: the input version set before the first turn, and the real worker draining the queue after each
    turn, over one connection: a memory is embedded before the next turn of its conversation exists."""
    import psycopg

    from pgrecall import db
    from pgrecall.worker import Worker

    if len(versions) != 1:
        raise SystemExit("--live embeds while the conversation is loaded: give one input version (--versions 2)")
    with psycopg.connect(db.tenant_conninfo(tenant, "admin"), autocommit=True) as admin:
        admin.execute(f"select {tenant}.set_embedding_version(%s, %s)", (MODEL, versions[0]))
    worker = Worker(tenant, conninfo=db.tenant_conninfo(tenant, "worker"))
    return worker.drain


def embed(tenant: str, conninfo: str, version: int, expect: int) -> dict:
    """Switch the input version (as the admin role) and let the real worker (its role) drain the queue."""
    import psycopg

    from pgrecall import db
    from pgrecall.worker import Worker

    with psycopg.connect(db.tenant_conninfo(tenant, "admin"), autocommit=True) as admin:
        queued = admin.execute(f"select {tenant}.set_embedding_version(%s, %s)", (MODEL, version)).fetchone()[0]
    worker = Worker(tenant, conninfo=db.tenant_conninfo(tenant, "worker"))
    started = time.perf_counter()
    stats = worker.drain()
    elapsed = time.perf_counter() - started
    with psycopg.connect(conninfo, autocommit=True) as app:
        status = dict(zip(("queued", "leased", "current", "stale", "model", "input_version"),
                          app.execute(f"select * from {tenant}.embedding_status()").fetchone()))
    if status["current"] != expect or status["queued"] or status["input_version"] != version:
        raise SystemExit(f"embedding did not complete: {status} (expected {expect} current at version {version})")
    return {"version": version, "queued": queued, "stored": stats.stored, "batches": stats.batches,
            "seconds": round(elapsed, 2), "model_seconds": round(stats.embed_seconds, 2),
            "memories_per_second": round(stats.stored / elapsed, 1) if elapsed else None, "status": status}


class EmbeddingCache:
    """Vectors of texts already embedded, kept on disk between runs (``--embed-cache``).

    Every run embeds the same 1,444 memories twice and the same 495 questions
    three times; on a 2-core machine shared with others that is most of a run.
    The model is deterministic for a text, so the cache is keyed by the model
    name and the text's SHA-256 and never goes stale. It wraps the embedder's
    method, so the worker, the driver and recall all go through it unchanged;
    only what is cached is skipped, nothing pgrecall does.
    """

    def __init__(self, path: Path):
        import sqlite3

        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(path), check_same_thread=False)
        self.db.execute("create table if not exists vec (key text primary key, v blob)")
        self.hits = self.misses = 0

    def install(self) -> None:
        import hashlib
        import threading

        import numpy as np

        from pgrecall.embedder import Embedder

        inner = Embedder.embed
        cache, lock = self, threading.Lock()

        def embed(embedder, texts, batch_size: int = 64):
            keys = [hashlib.sha256(f"{embedder.name}\0{t}".encode()).hexdigest() for t in texts]
            with lock:
                found = {}
                for i in range(0, len(keys), 500):
                    chunk = keys[i:i + 500]
                    found.update(cache.db.execute(
                        f"select key, v from vec where key in ({','.join('?' * len(chunk))})", chunk).fetchall())
            missing = [(k, t) for k, t in zip(keys, texts) if k not in found]
            if missing:
                unique = dict(missing)
                vectors = inner(embedder, list(unique.values()), batch_size=batch_size)
                new = {k: np.asarray(v, dtype=np.float32).tobytes() for k, v in zip(unique, vectors)}
                with lock:
                    cache.db.executemany("insert or replace into vec values (?, ?)", new.items())
                    cache.db.commit()
                found.update(new)
            cache.hits += len(texts) - len(missing)
            cache.misses += len(missing)
            return [np.frombuffer(found[k], dtype=np.float32).astype(float).tolist() for k in keys]

        Embedder.embed = embed


class TimedEmbedder:
    """Times the driver's question embedding, so a recall's time splits into model and database."""

    def __init__(self):
        from pgrecall.embedder import get_embedder

        self.embedder = get_embedder()
        self.inner = self.embedder.embed
        self.seconds = 0.0

    def __enter__(self):
        def timed(*a, **kw):
            started = time.perf_counter()
            try:
                return self.inner(*a, **kw)
            finally:
                self.seconds += time.perf_counter() - started
        self.embedder.embed = timed
        return self

    def __exit__(self, *exc):
        del self.embedder.embed  # back to the class's method (the cache's, when on)


def run_queries(mem, queries: list[dict], memory_dia: dict[int, str], mode: str) -> dict:
    rows, times, db_times, embed_times, returned, details = [], [], [], [], [], {}
    dropped, unavailable, dense_methods, dropped_terms = 0, 0, Counter(), Counter()
    for q in queries:
        scope = scope_name(q["conversation_id"])
        with TimedEmbedder() as timer:
            started = time.perf_counter()
            got = mem.recall(q["question"], mode=mode, limit=10, scopes=[scope], principal=PRINCIPAL)
            times.append(time.perf_counter() - started)
        db_times.append(times[-1] - timer.seconds)
        if mode != "lexical":
            embed_times.append(timer.seconds)
        if mode != "lexical":
            if not got.dense_available:
                unavailable += 1
            dense_methods[got.meta.dense_method] += 1
        dropped += bool(got.meta.dropped_terms)
        dropped_terms.update(got.meta.dropped_terms)
        ranked = [memory_dia.get(item.memory_id) for item in got.items]
        returned.append(len(ranked))
        rows.append({"category": q["category_name"], "conversation": q["conversation_id"],
                     **score(ranked, set(q["evidence"]))})
        details[q["query_id"]] = {"top10": ranked, "ms": round(times[-1] * 1000, 1),
                                  "ms_without_question_embedding": round(db_times[-1] * 1000, 1)}
    return {"rows": rows, "details": details, "latency": latency(times), "seconds": round(sum(times), 2),
            "latency_without_question_embedding": latency(db_times),
            "question_embedding_latency": latency(embed_times),
            "mean_returned": round(statistics.fmean(returned), 2),
            "questions_returning_fewer_than_10": sum(n < 10 for n in returned),
            "questions_with_dropped_terms": dropped,
            "most_dropped_terms": dict(dropped_terms.most_common(15)), "dense_unavailable": unavailable,
            "dense_method": dict(dense_methods)}


def evaluate_tenant(tenant: str, turns, queries, versions, *, store_questions: bool, label: str,
                    pruning_diagnostic: bool = False) -> dict:
    import psycopg
    from psycopg.types.json import Jsonb

    import pgrecall
    from pgrecall import db, install

    with psycopg.connect(db.admin_conninfo(), autocommit=True) as admin:
        applied = install.install(admin, [tenant])
        if ("tenant", tenant) not in applied:
            raise SystemExit(f"tenant {tenant!r} already exists in this PGRECALL_HOME; use a fresh one "
                             "(drop --keep-home) or pass --tenant with a new name")
        for key, value in SETTINGS.items():  # --setting: a tenant setting other than the installed default
            admin.execute("select pgrecall.set_tenant_setting(%s, %s, %s)", (tenant, key, Jsonb(value)))
    conninfo = db.tenant_conninfo(tenant)
    out: dict = {"tenant": tenant, "label": label}
    with pgrecall.connect(conninfo, tenant=tenant, principal=PRINCIPAL) as mem:
        log(f"[{label}] ingest: {len(turns)} turns" + (" (live: embedded after each turn)" if LIVE else ""))
        loaded = ingest(mem, turns, store_questions=store_questions,
                        after_each_turn=live_worker(tenant, versions) if LIVE else None)
        memory_dia = loaded.pop("memory_dia")
        out["ingest"] = {**{k: v for k, v in loaded.items() if k not in ("refused", "reworded")},
                         "seconds": round(loaded["seconds"], 2),
                         "turns_per_second": round(loaded["turns"] / loaded["seconds"], 1),
                         "memories_per_second": round(loaded["created"] / loaded["seconds"], 1),
                         "reworded_question_turns": len(loaded["reworded"])}
        out["refused_turns"] = loaded["refused"]
        log(f"[{label}] ingest done in {loaded['seconds']:.1f}s: {loaded['statuses']}")
        stored = {(t["conversation_id"], t["dia_id"]) for t in turns} - {
            (r["conversation_id"], r["dia_id"]) for r in loaded["refused"]}
        out["coverage"] = coverage(queries, stored)
        reason_of = {(r["conversation_id"], r["dia_id"]): r["reason"].split(":")[0] for r in loaded["refused"]}
        out["coverage"]["evidence_refs_unreachable_by_reason"] = dict(Counter(
            reason_of[(q["conversation_id"], d)] for q in queries for d in set(q["evidence"])
            if (q["conversation_id"], d) in reason_of))

        out["embed"], out["runs"], out["details"] = [], {}, {}
        with psycopg.connect(conninfo, autocommit=True) as app:
            out["settings"] = {k: v for k, v, _ in app.execute(f"select * from {tenant}.settings()")}
        for version in versions:
            log(f"[{label}] embed: input version {version}")
            emb = embed(tenant, conninfo, version, expect=len(memory_dia))
            out["embed"].append(emb)
            log(f"[{label}] embedded {emb['stored']} in {emb['seconds']}s ({emb['memories_per_second']}/s)")
            for mode in MODES:
                res = run_queries(mem, queries, memory_dia, mode)
                key = f"{mode}/v{version}"
                out["runs"][key] = {**aggregate(res.pop("rows")), **{k: v for k, v in res.items() if k != "details"}}
                out["details"][key] = res["details"]
                o = out["runs"][key]["overall"]
                log(f"[{label}] {key}: R@5 {o['recall@5']:.3f} R@10 {o['recall@10']:.3f} "
                    f"nDCG@10 {o['ndcg@10']:.3f}  p50 {res['latency']['p50_ms']} ms")
        serving = int(out["settings"]["embedding_input_version"])
        if serving in versions:
            out["steps"] = step_runs(tenant, mem, queries, memory_dia, serving, label, out["settings"], out["details"])
        if pruning_diagnostic:
            out["pruning_off"] = pruning_off(tenant, mem, queries, memory_dia, versions[-1], label)
    return out


# Recall's optional steps (issue #30), each a tenant setting: make eval runs
# hybrid recall once more with each one flipped from the installed default,
# as a line of its own ("hybrid+people" when the step is off by default and
# turned on, "hybrid-people" when it is on and turned off), and checks it
# against the default hybrid run under RULE.
STEPS = {"people": "recall_people_arm", "time": "recall_question_time", "spread": "recall_session_spread",
         "neighbours": "recall_neighbour_turns",
         "second": "recall_second_round", "keys": "recall_memory_keys",
         "keys_dense": "recall_memory_keys_dense", "window": "recall_lexical_window",
         "window_beside": "recall_window_beside"}


def step_runs(tenant: str, mem, queries, memory_dia, version: int, label: str, settings: dict,
              details: dict | None = None) -> dict:
    """Hybrid recall with each step of STEPS flipped, set through pgrecall.set_tenant_setting() and restored;
    each question's top 10 goes to ``details`` (the questions file), to see which questions a step moved."""
    import psycopg
    from psycopg.types.json import Jsonb

    from pgrecall import db

    out = {}
    with psycopg.connect(db.admin_conninfo(), autocommit=True) as admin:
        for name, key in STEPS.items():
            if key not in settings:
                continue
            old = settings[key]
            admin.execute("select pgrecall.set_tenant_setting(%s, %s, %s)", (tenant, key, Jsonb(not old)))
            try:
                res = run_queries(mem, queries, memory_dia, "hybrid")
            finally:
                admin.execute("select pgrecall.set_tenant_setting(%s, %s, %s)", (tenant, key, Jsonb(old)))
            run_key = f"hybrid{'-' if old else '+'}{name}/v{version}"
            if details is not None:
                details[run_key] = res["details"]
            out[run_key] = {**aggregate(res.pop("rows")), "latency": res["latency"], "setting": {key: not old}}
            o = out[run_key]["overall"]
            log(f"[{label}] {run_key}: R@5 {o['recall@5']:.3f} R@10 {o['recall@10']:.3f} "
                f"nDCG@10 {o['ndcg@10']:.3f}  p50 {res['latency']['p50_ms']} ms")
    return out


def step_check_lines(report: dict) -> list[str]:
    """Each step's line of this run against the default hybrid run, under RULE."""
    key = check_run_key(report)
    lines = []
    for step_key, run in report["main"].get("steps", {}).items():
        cells = cell_check(report["main"]["runs"][key], run)
        lines += ["", f"## {step_key} against {key} (setting {run['setting']}): {RULE}", ""]
        lines += [f"  {c['cell']:12s} " + "  ".join(f"{m} {c['deltas'][m]:+.4f}" for m in CHECK_METRICS)
                  + f"  {'PASS' if c['passed'] else 'FAIL'}" for c in cells]
        ok = all(c["passed"] for c in cells)
        lines.append("  adopt: every cell PASSES" if ok else
                     "  do not adopt: FAIL in " + ", ".join(c["cell"] for c in cells if not c["passed"]))
    return lines


def pruning_off(tenant: str, mem, queries, memory_dia, version: int, label: str) -> dict:
    """A diagnostic, not a setting to adopt: the same questions with lexical term pruning disabled.

    prune_df_ratio = 1 drops only terms found in every memory. The tenant's
    setting is changed through pgrecall.set_tenant_setting() and restored.
    """
    import psycopg
    from psycopg.types.json import Jsonb

    from pgrecall import db

    out = {"version": version, "runs": {}}
    with psycopg.connect(db.admin_conninfo(), autocommit=True) as admin:
        old = admin.execute(f"select value from {tenant}.settings() where key = 'prune_df_ratio'").fetchone()[0]
        admin.execute("select pgrecall.set_tenant_setting(%s, 'prune_df_ratio', %s)", (tenant, Jsonb(1)))
        try:
            for mode in ("lexical", "hybrid"):
                res = run_queries(mem, queries, memory_dia, mode)
                key = f"{mode}/v{version}"
                out["runs"][key] = {**aggregate(res.pop("rows")),
                                    "questions_with_dropped_terms": res["questions_with_dropped_terms"]}
                o = out["runs"][key]["overall"]
                log(f"[{label}] pruning off, {key}: R@5 {o['recall@5']:.3f} R@10 {o['recall@10']:.3f} "
                    f"nDCG@10 {o['ndcg@10']:.3f}")
        finally:
            admin.execute("select pgrecall.set_tenant_setting(%s, 'prune_df_ratio', %s)", (tenant, Jsonb(old)))
    return out


# -- report -------------------------------------------------------------------


def fmt(x: float) -> str:
    return f"{x:.3f}"


def metric_tables(result: dict, versions, heading: str) -> list[str]:
    runs = result["runs"]
    cats = category_order(next(iter(runs.values()))["by_category"])
    counts = next(iter(runs.values()))["by_category"]
    lines = []
    lines += [f"{heading}", "",
              "| mode | input version | recall@5 | recall@10 | nDCG@10 |", "|---|---|---|---|---|"]
    for mode in MODES:
        for v in versions:
            o = runs[f"{mode}/v{v}"]["overall"]
            lines.append(f"| {mode} | {v} | {fmt(o['recall@5'])} | {fmt(o['recall@10'])} | {fmt(o['ndcg@10'])} |")
    lines.append("")
    for metric in METRICS:
        lines += [f"By category, {metric}:", "",
                  "| mode | v | overall (n={}) | ".format(next(iter(runs.values()))["overall"]["n"])
                  + " | ".join(f"{c} (n={counts[c]['n']})" for c in cats) + " |",
                  "|---|---|---|" + "---|" * len(cats)]
        for mode in MODES:
            for v in versions:
                r = runs[f"{mode}/v{v}"]
                lines.append(f"| {mode} | {v} | {fmt(r['overall'][metric])} | "
                             + " | ".join(fmt(r["by_category"][c][metric]) for c in cats) + " |")
        lines.append("")
    convs = list(next(iter(runs.values())).get("by_conversation", {}))
    if convs:
        conv_counts = next(iter(runs.values()))["by_conversation"]
        lines += ["By conversation (each must hold on its own: a rule adopted on this split has to help or not "
                  "hurt every one of them):", "",
                  "| mode | v | metric | " + " | ".join(f"{c} (n={conv_counts[c]['n']})" for c in convs) + " |",
                  "|---|---|---|" + "---|" * len(convs)]
        for mode in MODES:
            for v in versions:
                r = runs[f"{mode}/v{v}"]["by_conversation"]
                for metric in METRICS:
                    lines.append(f"| {mode} | {v} | {metric} | " + " | ".join(fmt(r[c][metric]) for c in convs) + " |")
        lines.append("")
        lines += ["By conversation and category, hybrid recall@10 (small cells are noisy):", "",
                  "| v | conversation | " + " | ".join(cats) + " |", "|---|---|" + "---|" * len(cats)]
        for v in versions:
            both = runs[f"hybrid/v{v}"]["by_conversation_category"]
            for c in convs:
                lines.append(f"| {v} | {c} | " + " | ".join(
                    f"{fmt(both[f'{c}/{k}']['recall@10'])} (n={both[f'{c}/{k}']['n']})" if f"{c}/{k}" in both else "-"
                    for k in cats) + " |")
        lines.append("")
    return lines


def coverage_lines(cov: dict) -> list[str]:
    cats = cov["recall_ceiling_by_category"]
    return [
        f"- evidence references (question, turn): {cov['evidence_refs']}; stored as a memory: "
        f"{cov['evidence_refs_stored']}; **unreachable: {cov['evidence_refs_unreachable']}** "
        f"({cov['distinct_evidence_turns_unreachable']} distinct turns)",
        f"- questions with at least one unreachable evidence turn: {cov['questions_with_some_evidence_unreachable']}"
        f" of {cov['questions']}; with none of their evidence reachable: "
        f"{cov['questions_with_all_evidence_unreachable']}",
        f"- **evidence coverage (the recall ceiling any ranking could reach): {fmt(cov['recall_ceiling'])}** "
        "(" + ", ".join(f"{c} {fmt(v)}" for c, v in cats.items()) + ")",
    ]


def hybrid_vs_arms(result: dict, versions) -> list[str]:
    lines = ["| version | metric | lexical | dense | hybrid | hybrid - best arm |", "|---|---|---|---|---|---|"]
    for v in versions:
        for metric in METRICS:
            vals = {m: result["runs"][f"{m}/v{v}"]["overall"][metric] for m in MODES}
            best = max(vals["lexical"], vals["dense"])
            lines.append(f"| {v} | {metric} | {fmt(vals['lexical'])} | {fmt(vals['dense'])} | {fmt(vals['hybrid'])} "
                         f"| {vals['hybrid'] - best:+.3f} |")
    return lines + [""]


def write_markdown(path: Path, report: dict) -> None:
    main, extra = report["main"], report.get("supplementary")
    versions = report["versions"]
    ing = main["ingest"]
    machine = report["machine"]
    lines = [
        "# pgrecall on LoCoMo (development split)", "",
        f"- date: {report['date']}",
        f"- command: `{report['command']}` (what `make eval` runs)",
        f"- pgrecall commit: `{report['git']['commit']}`"
        + (" plus uncommitted changes outside eval/" if report["git"]["dirty_outside_eval"] else ""),
        f"- machine: {machine['cpus']} CPUs, {machine['platform']}, Python {machine['python']}; load average (1 min) "
        f"{machine['load_average_1_5_15_at_start'][0]} at start, {machine['load_average_1_5_15_at_end'][0]} at end "
        "(other work shared the machine: timings are noisy, quality numbers are not)",
        f"- data: {report['data']['turns']} turns of {len(report['data']['conversations'])} conversations "
        f"({', '.join(report['data']['conversations'])}); {report['data']['queries']} questions, "
        f"{report['data']['evaluated']} evaluated ({report['data']['skipped_no_evidence']} skipped: no evidence)",
        f"- model {MODEL}; recall limit 10; tenant settings as installed: rrf_k {main['settings']['rrf_k']}, "
        f"dense_floor {main['settings']['dense_floor']}, prune_min_terms {main['settings']['prune_min_terms']}, "
        f"prune_df_ratio {main['settings']['prune_df_ratio']}, arm_candidates {main['settings']['arm_candidates']}, "
        f"bm25 k1 {main['settings']['bm25_k1']} b {main['settings']['bm25_b']}, "
        f"fusion {main['settings'].get('fusion', 'rrf')}"
        + (f" (changed for this run with --setting: {report['settings_changed']})"
           if report.get("settings_changed") else ""),
        f"- total run time {report['seconds_total']:.0f} s", "",
        "How it was loaded, all through pgrecall's functions: a throwaway embedded server, one tenant, one scope per "
        "conversation, one human peer per speaker and the agent peer `assistant` as principal. Each turn is appended "
        "to its conversation's log (role user, actor = speaker, session id, session time as UTC) and remembered as "
        "`<speaker>: <text>` (a shared photo adds ` [shares a photo: <caption>]`) with that offset as evidence, "
        "purpose `converse`. The embedding worker (`Worker.drain()`) embeds and refreshes term statistics. Each "
        "question is `Memory.recall(question, mode=..., limit=10, scopes=[its conversation], principal='assistant')`. "
        "Input version 1 embeds the memory (title + body); version 2 adds the previous and next turn of the same "
        "session (`set_embedding_version`, then the worker again).", "",
        "## What pgrecall stores", "",
        f"remember() on {ing['turns']} turns: "
        + ", ".join(f"{k} {v}" for k, v in sorted(ing["statuses"].items())) + ".", "",
        f"Keys from what was said (`remember_keys`, searched with `recall_memory_keys` on): "
        f"{ing.get('keys', {}).get('keys', 0)} keys on {ing.get('keys', {}).get('memories', 0)} memories, each "
        "sentence of the turn that speaks in the first person with the speaker's name for \"I\" "
        "(`pgrecall.deriver.statement_keys`), each with the vector of its own text (searched with "
        "`recall_memory_keys_dense` on).", "",
        "A turn that remember() answers with a no-op (for a text that only asks questions, or a duplicate) is "
        "not stored, so evidence pointing at it cannot be found:", "",
        *coverage_lines(main["coverage"]),
        "- unreachable evidence by remember()'s reason: "
        + (", ".join(f"{k} {v}" for k, v in main["coverage"]["evidence_refs_unreachable_by_reason"].items()) or "none"),
        "",
    ]
    refused = main["refused_turns"]
    if refused and len(refused) <= 25:
        lines += ["Turns remember() refused:", "", "| conversation | dia_id | body | reason |", "|---|---|---|---|"]
        lines += [f"| {r['conversation_id']} | {r['dia_id']} | {r['body'].replace('|', '/')} "
                  f"| {r['reason'].split(':')[0]} |" for r in refused]
        lines.append("")
    lines += ["**The main results score what pgrecall stores**: evidence that was refused counts as a miss. The "
              "supplementary section below stores the refused turns too, to show what the refusal costs.", ""]
    lines += metric_tables(main, versions, "## Main results (what pgrecall stores)")
    lines += ["Lexical results do not depend on the input version; lexical is run under both as a check "
              f"(identical rankings: {report['checks']['lexical_identical_across_versions']}).", ""]
    lines += ["## Does hybrid beat each arm?", ""] + hybrid_vs_arms(main, versions)
    if main.get("pruning_off"):
        po = main["pruning_off"]
        v = po["version"]
        lines += [f"## Diagnostic: lexical term pruning off (input version {v})", "",
                  "Not a proposal to change the setting on this development set: the same questions with "
                  "`prune_df_ratio` set to 1 (through `pgrecall.set_tenant_setting`, restored afterwards), to show "
                  "what pruning does here. It drops terms found in 15% or more of the tenant's memories, and the "
                  "speakers' names are that common (see below).", "",
                  "| mode | metric | pruning on (as installed) | pruning off | difference |", "|---|---|---|---|---|"]
        for mode in ("lexical", "hybrid"):
            for metric in METRICS:
                a = main["runs"][f"{mode}/v{v}"]["overall"][metric]
                b = po["runs"][f"{mode}/v{v}"]["overall"][metric]
                lines.append(f"| {mode} | {metric} | {fmt(a)} | {fmt(b)} | {b - a:+.3f} |")
        cats = list(po["runs"][f"lexical/v{v}"]["by_category"])
        lines += ["", "recall@10 by category:", "",
                  "| mode | pruning | " + " | ".join(cats) + " |", "|---|---|" + "---|" * len(cats)]
        for mode in ("lexical", "hybrid"):
            for name, src in (("on", main["runs"]), ("off", po["runs"])):
                r = src[f"{mode}/v{v}"]["by_category"]
                lines.append(f"| {mode} | {name} | " + " | ".join(fmt(r[c]["recall@10"]) for c in cats) + " |")
        lines.append("")
    if report.get("supplementary_skipped"):
        lines += ["## Supplementary run", "", "Skipped: " + report["supplementary_skipped"] + ", so storing the "
                  "refused turns cannot change which evidence is reachable.", ""]
    if extra:
        eing = extra["ingest"]
        ev = extra["versions"]
        lines += [f"## Supplementary: question turns stored too (tenant `{extra['tenant']}`, input version "
                  f"{', '.join(map(str, ev))})", "",
                  f"Not what pgrecall does: the {eing['reworded_question_turns']} turns that remember() refused as "
                  "questions were remembered again with the final `?` removed (the same words, so the same lexemes "
                  "and nearly the same embedding). remember(): "
                  + ", ".join(f"{k} {v}" for k, v in sorted(eing["statuses"].items())) + ".", "",
                  *coverage_lines(extra["coverage"]), ""]
        lines += ["What the refusal costs (overall):", "",
                  "| mode | v | metric | as stored | every turn stored | difference |", "|---|---|---|---|---|---|"]
        for v in ev:
            for mode in MODES:
                for metric in METRICS:
                    a = main["runs"][f"{mode}/v{v}"]["overall"][metric]
                    b = extra["runs"][f"{mode}/v{v}"]["overall"][metric]
                    lines.append(f"| {mode} | {v} | {metric} | {fmt(a)} | {fmt(b)} | {b - a:+.3f} |")
        lines.append("")
        lines += metric_tables(extra, ev, "### Every turn stored, in full")
        lines += ["Hybrid against each arm, every turn stored:", ""] + hybrid_vs_arms(extra, ev)
    lines += ["## Time", "", f"Model load (once per process, not counted below): {report['model_load_seconds']} s.", "",
              "| phase | what | seconds | rate |", "|---|---|---|---|"]
    for result in filter(None, (main, extra)):
        t = result["tenant"]
        i = result["ingest"]
        lines.append(f"| ingest ({t}) | {i['turns']} append + remember, {i['created']} memories | {i['seconds']} "
                     f"| {i['memories_per_second']} memories/s ({i['turns_per_second']} turns/s) |")
        for e in result["embed"]:
            lines.append(f"| embed v{e['version']} ({t}) | worker drain, {e['stored']} memories | {e['seconds']} "
                         f"(model {e['model_seconds']}) | {e['memories_per_second']} memories/s |")
        for key, r in result["runs"].items():
            lines.append(f"| queries {key} ({t}) | {r['overall']['n']} recalls | {r['seconds']} "
                         f"| p50 {r['latency']['p50_ms']} ms |")
    lines += ["", "Recall latency per call. For dense and hybrid the driver embeds the question in Python first; "
              "the split shows the database's share and the model's.", "",
              "| tenant | mode | v | p50 ms | p95 ms | max ms | database p50 / p95 ms "
              "| question embedding p50 / p95 ms |",
              "|---|---|---|---|---|---|---|---|"]
    for result in filter(None, (main, extra)):
        for key, r in result["runs"].items():
            mode, v = key.split("/v")
            qe = r["question_embedding_latency"]
            lines.append(f"| {result['tenant']} | {mode} | {v} | {r['latency']['p50_ms']} | {r['latency']['p95_ms']} "
                         f"| {r['latency']['max_ms']} | {r['latency_without_question_embedding']['p50_ms']} / "
                         f"{r['latency_without_question_embedding']['p95_ms']} "
                         f"| {(str(qe['p50_ms']) + ' / ' + str(qe['p95_ms'])) if qe else '-'} |")
    lines += ["", "What recall reported (main tenant):", "",
              "| mode | v | mean items returned | questions with < 10 items | questions with dropped terms "
              "| dense method |",
              "|---|---|---|---|---|---|"]
    for key, r in main["runs"].items():
        mode, v = key.split("/v")
        lines.append(f"| {mode} | {v} | {r['mean_returned']} | {r['questions_returning_fewer_than_10']} "
                     f"| {r['questions_with_dropped_terms']} "
                     f"| {', '.join(f'{k} {n}' for k, n in r['dense_method'].items()) or '-'} |")
    lex = main["runs"][f"lexical/v{versions[0]}"]
    lines += ["", "Terms lexical pruning dropped most often (questions): "
              + ", ".join(f"`{t}` {n}" for t, n in lex["most_dropped_terms"].items()) + ".", ""]
    lines += ["## Notes", ""] + [f"- {n}" for n in report["notes"]] + [""]
    path.write_text("\n".join(lines), encoding="utf-8")


# -- main ---------------------------------------------------------------------


def git_info() -> dict:
    def git(*args):
        try:
            return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return None
    # taken before the tenant is installed: the SQL installed is the working tree's at that moment
    return {"commit": git("rev-parse", "--short", "HEAD"),
            "dirty_outside_eval": bool(git("status", "--porcelain", "--", ".", ":(exclude)eval"))}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path,
                        help="folder with turns.jsonl and queries.jsonl (required unless --compare)")
    parser.add_argument("--out", type=Path,
                        help="folder for locomo-dev.json and locomo-dev.md (required unless --compare)")
    parser.add_argument("--keep-home", action="store_true",
                        help="use $PGRECALL_HOME as it is (else a fresh temporary one) and leave the server "
                             "running and the folder in place afterwards")
    parser.add_argument("--tenant", default="locomo", help="tenant name (default: locomo)")
    parser.add_argument("--versions", default="1,2", help="embedding input versions to compare (default: 1,2)")
    parser.add_argument("--supplementary-versions", default="best",
                        help="input versions for the supplementary run that also stores the question turns: "
                             "'best' (the version where hybrid recall@10 was highest in the main run), a list "
                             "such as 1,2, or 'none' to skip it (default: best; skipped when no evidence turn "
                             "was refused)")
    parser.add_argument("--no-diagnostics", action="store_true",
                        help="skip the diagnostic re-run with lexical term pruning disabled")
    parser.add_argument("--embed-cache", type=Path, default=REPO / "eval" / ".cache" / "embeddings.sqlite",
                        help="file of vectors already computed, reused between runs ('none': embed everything; "
                             "default: eval/.cache/embeddings.sqlite)")
    parser.add_argument("--save-as", metavar="NAME",
                        help="also keep this run's JSON as <out>/runs/NAME.json, for --compare")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"),
                        help="print the deltas of two runs' JSON (per mode, conversation and category) and exit")
    parser.add_argument("--setting", action="append", default=[], metavar="KEY=JSON",
                        help="a tenant setting to run with instead of the installed default, e.g. fusion='\"scores\"' "
                             "(repeatable; set through pgrecall.set_tenant_setting)")
    parser.add_argument("--baseline", metavar="NAME",
                        help="after the run, print the adoption check (PASS/FAIL per conversation and category) "
                             "of this run against <out>/runs/NAME.json")
    parser.add_argument("--live", action="store_true",
                        help="embed after each turn, as a worker running beside the conversation does (one input "
                             "version), instead of after the whole conversation is loaded")
    parser.add_argument("--max-queries", type=int, default=None,
                        help="evaluate only the first N questions (a quick check)")
    args = parser.parse_args(argv)
    if args.compare:
        print(compare(*args.compare))
        return 0
    if not (args.data and args.out):
        parser.error("--data and --out are required (unless --compare)")
    versions = [int(v) for v in args.versions.split(",")]
    for item in args.setting:
        key, _, value = item.partition("=")
        SETTINGS[key] = json.loads(value)
    global LIVE
    LIVE = args.live
    t_start = time.perf_counter()
    load_start = os.getloadavg()
    git = git_info()

    turns = read_jsonl(args.data / "turns.jsonl")
    all_queries = read_jsonl(args.data / "queries.jsonl")
    queries = [q for q in all_queries if q["evidence"]]
    if args.max_queries:
        queries = queries[: args.max_queries]

    if os.environ.pop("PGRECALL_DSN", None):
        log("PGRECALL_DSN is ignored: this evaluation runs on its own embedded server")
    made_home = None
    if not args.keep_home or not os.environ.get("PGRECALL_HOME"):
        made_home = tempfile.mkdtemp(prefix="pgr-eval-", dir="/tmp")
        os.environ["PGRECALL_HOME"] = made_home
    home = os.environ["PGRECALL_HOME"]
    log(f"PGRECALL_HOME={home}")

    from pgrecall import server
    from pgrecall.embedder import get_embedder

    cache = None
    if str(args.embed_cache) != "none":
        cache = EmbeddingCache(args.embed_cache)
        cache.install()
    report: dict = {}
    try:
        log("loading the embedding model")
        started = time.perf_counter()
        get_embedder().embed(["warm up"])  # loaded once per process; not part of any timed phase
        report["model_load_seconds"] = round(time.perf_counter() - started, 1)
        report["main"] = evaluate_tenant(args.tenant, turns, queries, versions, store_questions=False,
                                         label="stored as pgrecall stores it",
                                         pruning_diagnostic=not args.no_diagnostics)
        nothing_lost = report["main"]["coverage"]["evidence_refs_unreachable"] == 0
        if args.supplementary_versions == "best" and nothing_lost:
            log("supplementary run skipped: remember() refused no evidence turn, so storing the refused turns "
                "cannot change what is reachable (force it with --supplementary-versions 1,2)")
            report["supplementary_skipped"] = "remember() refused no evidence turn"
        elif args.supplementary_versions != "none":
            if args.supplementary_versions == "best":
                # the version under which hybrid (the default mode) found most, ties to the lower version
                extra_versions = [max(versions, key=lambda v: (
                    report["main"]["runs"][f"hybrid/v{v}"]["overall"]["recall@10"], -v))]
            else:
                extra_versions = [int(v) for v in args.supplementary_versions.split(",")]
            report["supplementary"] = evaluate_tenant(f"{args.tenant}_all", turns, queries, extra_versions,
                                                      store_questions=True, label="question turns stored too")
            report["supplementary"]["versions"] = extra_versions
    finally:
        if args.keep_home:
            log(f"server left running; PGRECALL_HOME={home}")
        else:
            server.stop()
            shutil.rmtree(made_home, ignore_errors=True)
            log("server stopped, temporary home removed")

    main_runs = report["main"]["runs"]
    lex = [[r["top10"] for r in report["main"]["details"][f"lexical/v{v}"].values()] for v in versions]
    report.update({
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join([os.path.relpath(sys.executable), *sys.argv]),
        "git": git,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "load_average_1_5_15_at_start": [round(x, 2) for x in load_start],
                    "load_average_1_5_15_at_end": [round(x, 2) for x in os.getloadavg()]},
        "data": {"path": str(args.data), "turns": len(turns),
                 "conversations": sorted({t["conversation_id"] for t in turns}),
                 "queries": len(all_queries), "evaluated": len(queries),
                 "skipped_no_evidence": sum(not q["evidence"] for q in all_queries)},
        "versions": versions, "modes": list(MODES), "settings_changed": SETTINGS, "metrics": list(METRICS),
        "checks": {"lexical_identical_across_versions": all(d == lex[0] for d in lex)},
        "seconds_total": round(time.perf_counter() - t_start, 1),
    })
    if cache:
        report["embed_cache"] = {"path": str(args.embed_cache), "hits": cache.hits, "misses": cache.misses}
    report["notes"] = notes(report)

    args.out.mkdir(parents=True, exist_ok=True)
    details = {name: report[name].pop("details") for name in ("main", "supplementary") if name in report}
    (args.out / "locomo-dev.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    with open(args.out / "locomo-dev.questions.jsonl", "w", encoding="utf-8") as fh:
        for q in queries:
            fh.write(json.dumps({"query_id": q["query_id"], "category": q["category_name"],
                                 "evidence": q["evidence"],
                                 "runs": {f"{name}/{run}": d[run][q["query_id"]]
                                          for name, d in details.items() for run in d}}) + "\n")
    write_markdown(args.out / "locomo-dev.md", report)
    if args.save_as:
        (args.out / "runs").mkdir(exist_ok=True)
        (args.out / "runs" / f"{args.save_as}.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    log(f"wrote {args.out / 'locomo-dev.json'} and {args.out / 'locomo-dev.md'} "
        f"in {report['seconds_total']:.0f} s")
    for key, run in main_runs.items():
        o = run["overall"]
        print(f"  {key:12s} R@5 {o['recall@5']:.3f}  R@10 {o['recall@10']:.3f}  nDCG@10 {o['ndcg@10']:.3f}")
    for key, run in report["main"].get("steps", {}).items():
        o = run["overall"]
        print(f"  {key:12s} R@5 {o['recall@5']:.3f}  R@10 {o['recall@10']:.3f}  nDCG@10 {o['ndcg@10']:.3f}")
    print("\n".join(step_check_lines(report)))
    if args.baseline:
        baseline = json.loads((args.out / "runs" / f"{args.baseline}.json").read_text(encoding="utf-8"))
        print("\n".join(check_lines(baseline, report, args.baseline, args.save_as or "this run")[0]))
    return 0


# The adoption rule (issue #30), as a check. A cell is one development
# conversation or one question category, in the hybrid run at the tenant's
# embedding input version (the run recall serves). A candidate PASSES a cell
# when none of recall@5, recall@10 and nDCG@10 is lower than the baseline's,
# compared at the four decimals a run stores its means with: that rounding is
# the only tolerance, because any real loss of a question's evidence moves a
# cell's mean by far more than 0.0001 (a cell has at most a few hundred
# questions). A change is adopted as a default only when every cell PASSES.
RULE = ("a cell (one conversation, or one category) PASSES when none of recall@5, recall@10 and nDCG@10 of the "
        "hybrid run falls below the baseline's, compared at the 4 decimals the runs store; a change is adopted "
        "only when every cell PASSES")
CHECK_METRICS = ("recall@5", "recall@10", "ndcg@10")


def check_run_key(report: dict) -> str:
    """The hybrid run recall serves: the one at the tenant's embedding input version."""
    return f"hybrid/v{report['main']['settings']['embedding_input_version']}"


def cell_check(before_run: dict, after_run: dict) -> list[dict]:
    """Per cell (conversation, then category) of one run: the metric deltas and PASS or FAIL under RULE."""
    cells = []
    for group in ("by_conversation", "by_category"):
        for name, b in before_run[group].items():
            a = after_run[group].get(name)
            if a is None:
                cells.append({"cell": name, "group": group, "deltas": {}, "passed": False, "missing": True})
                continue
            deltas = {m: round(a[m] - b[m], 4) for m in CHECK_METRICS}
            cells.append({"cell": name, "group": group, "deltas": deltas, "missing": False,
                          "passed": all(round(a[m], 4) >= round(b[m], 4) for m in CHECK_METRICS)})
    return cells


def check_lines(before: dict, after: dict, before_name: str, after_name: str) -> tuple[list[str], bool]:
    """The PASS/FAIL table of after against before (whole reports), and whether every cell passed."""
    key = check_run_key(after)
    cells = cell_check(before["main"]["runs"][key], after["main"]["runs"][key])
    lines = [f"## adoption check: {after_name} against {before_name}, {key}", "", f"Rule: {RULE}.", "",
             "| cell | " + " | ".join(f"{m} delta" for m in CHECK_METRICS) + " | check |",
             "|---|" + "---|" * (len(CHECK_METRICS) + 1)]
    for c in cells:
        deltas = " | ".join(f"{c['deltas'][m]:+.4f}" if m in c["deltas"] else "missing" for m in CHECK_METRICS)
        lines.append(f"| {c['cell']} | {deltas} | {'PASS' if c['passed'] else 'FAIL'} |")
    ok = all(c["passed"] for c in cells)
    lines += ["", "adopt: every cell PASSES" if ok else
              "do not adopt: FAIL in " + ", ".join(c["cell"] for c in cells if not c["passed"])]
    return lines, ok


def compare(before_path: Path, after_path: Path) -> str:
    """Deltas (after - before) of two runs, overall, per conversation and per category, then the check."""
    before_report = json.loads(before_path.read_text(encoding="utf-8"))
    after_report = json.loads(after_path.read_text(encoding="utf-8"))
    before, after = before_report["main"]["runs"], after_report["main"]["runs"]
    lines = [f"# {after_path.name} against {before_path.name} (after - before)", ""]
    for key in [k for k in after if k in before]:
        a, b = after[key], before[key]
        groups = [("overall", b["overall"], a["overall"])]
        groups += [(c, b["by_conversation"][c], a["by_conversation"][c]) for c in a.get("by_conversation", {})
                   if c in b.get("by_conversation", {})]
        groups += [(c, b["by_category"][c], a["by_category"][c]) for c in a["by_category"] if c in b["by_category"]]
        lines += [f"## {key}", "", "| group | n | " + " | ".join(f"{m} before | after | delta" for m in METRICS) + " |",
                  "|---|---|" + "---|---|---|" * len(METRICS)]
        for name, x, y in groups:
            cells = [f"{x[m]:.3f} | {y[m]:.3f} | {y[m] - x[m]:+.3f}" for m in METRICS]
            lines.append(f"| {name} | {y['n']} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += check_lines(before_report, after_report, before_path.stem, after_path.stem)[0]
    lines += step_check_lines(after_report)  # and the candidate run's own step lines against its default
    return "\n".join(lines)


def notes(report: dict) -> list[str]:
    """Observations computed from this run's numbers."""
    out = []
    main = report["main"]
    floor = main["settings"]["dense_floor"]
    for key, run in main["runs"].items():
        if run["dense_unavailable"]:
            out.append(f"{key}: the dense arm was unavailable for {run['dense_unavailable']} questions.")
    for v in report["versions"]:
        for mode, why in (("lexical", "fewer memories share a term with the question"),
                          ("dense", f"the floor (cosine {floor}) cuts weak matches"),
                          ("hybrid", f"lexical matches plus dense matches above {floor} were fewer than 10")):
            r = main["runs"][f"{mode}/v{v}"]
            if r["questions_returning_fewer_than_10"]:
                out.append(f"{mode}/v{v}: {r['questions_returning_fewer_than_10']} questions got fewer than 10 items "
                           f"({why}).")
    lex = main["runs"][f"lexical/v{report['versions'][0]}"]
    out.append(f"Lexical pruning dropped terms in {lex['questions_with_dropped_terms']} of {lex['overall']['n']} "
               f"questions (terms in >= {main['settings']['prune_df_ratio']} of memories, from "
               f"{main['settings']['prune_min_terms']} query terms on). Term statistics are tenant-wide: document "
               "frequencies and the pruning threshold count the memories of all three conversations, although "
               "each question searches one; the speaker's name, which starts every memory body, is common.")
    for result in filter(None, (main, report.get("supplementary"))):
        for key, r in result["runs"].items():
            qe = r["question_embedding_latency"]
            if qe and qe["p95_ms"] > 5 * qe["p50_ms"]:
                out.append(f"{result['tenant']} {key}: embedding the question took p50 {qe['p50_ms']} ms but p95 "
                           f"{qe['p95_ms']} ms, while the database part stayed at p95 "
                           f"{r['latency_without_question_embedding']['p95_ms']} ms: torch runs one question on every "
                           "core and stalls when another process holds one (see the report to the team).")
    out.append("Reference points from the dataset's README (the whole 10-conversation benchmark, other retrievers, "
               "every turn indexed): DRAGON recall@5 0.588, @10 0.675; BM25 about 0.50 and 0.56.")
    out.append("Per-question top-10 dia_ids and call times of every run are in locomo-dev.questions.jsonl.")
    return out


if __name__ == "__main__":
    sys.exit(main())
