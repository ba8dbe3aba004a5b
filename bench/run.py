"""``make bench``: ingest, recall latency by mode against a bare one-table baseline, the dense arm's
accuracy against exact search (and its search-breadth sweep), many principals each recalling their
own memories, the single-call path an agent takes with its write amplification, disk and memory,
and the worker against the raw model. Results: bench/results/latest.md (with PNG figures), the
runs under bench/results/archive/.

What is cached (bench/cache/, git-ignored, keyed by the texts' hash so a changed corpus re-embeds):
the model's embeddings of the base corpus (100k by default, ~7 min of both cores once), of the
queries, and, for derived corpora, of the calibration sample and the replaced details. Corpora larger
than ``--base`` are derived from the base (bench/derive.py says how and why), so the 1M size needs no
more model time than 100k; everything else (ingest, indexes, timings) is measured anew on every run.

    python -m bench.run                              # 10k and 100k
    python -m bench.run --sizes 10000                # quicker
    python -m bench.run --sizes 1000000              # 1M derived from the cached 100k
    python -m bench.run --sizes 100000 --base 10000  # the derived path at a tenth of the size
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import threading
import time
from pathlib import Path

import numpy as np
import psycopg

from . import corpus, derive
from .harness import embedded_server, new_report, stamp, write_report

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
CACHE = Path(os.environ.get("PGRECALL_BENCH_CACHE", HERE / "cache"))
FORMAT = 2  # results JSON layout; the figures use runs of this format only
MODES = ("hybrid", "lexical", "dense")
SCOPES = ["s0", "s1", "s2", "s3"]
OTHERS = [f"p{i}" for i in range(10)]
BULK_INDEX_FROM = 50_000  # from this size the HNSW index is built after loading
SUBJECTS = 1000  # data subjects: erasing one touches 0.1% of the corpus
ERASED_SUBJECT = 7
USERS = 50  # the per-principal scenario: each memory's audience is one of 50 users
NARROW = 200  # ... and one principal who may see only 200 memories
EF_SWEEP = (10, 20, 40, 64, 100, 200, 400)
DENSE_FLOOR = 0.30
MODEL = "all-MiniLM-L6-v2"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ----------------------------------------------------------------------------- corpus and cache

def cached_embeddings(kind: str, texts: list[str], used: list) -> np.ndarray:
    """The model's unit vectors for texts, from bench/cache/ when these exact texts were embedded before."""
    key = hashlib.sha256((MODEL + "\n" + "\n".join(texts)).encode()).hexdigest()[:16]
    path = CACHE / f"{kind}-{len(texts)}-{key}.npy"
    if path.exists():
        used.append({"file": path.name, "reused": True})
        return np.load(path)
    from pgrecall.embedder import get_embedder

    path.parent.mkdir(parents=True, exist_ok=True)
    log(f"embedding {len(texts)} texts for {kind} (cached as {path.name})")
    started = time.perf_counter()
    vecs = get_embedder().encode_array(texts, batch_size=128).astype(np.float32)
    np.save(path, vecs)
    used.append({"file": path.name, "reused": False, "seconds": time.perf_counter() - started})
    return vecs


def corpus_for(n: int, base: int, used: list) -> tuple[list[str], np.ndarray, dict | None]:
    """n memories with their vectors: the model's own up to base, derived beyond it."""
    if n <= base:
        texts = corpus.memories(n)
        return texts, cached_embeddings("corpus", texts, used), None
    base_texts = corpus.memories(base)
    base_vectors = cached_embeddings("corpus", base_texts, used)
    log(f"deriving {n - base} memories from {base} embedded ones")
    started = time.perf_counter()
    d = derive.extend(base_texts, base_vectors, n, lambda kind, texts: cached_embeddings(kind, texts, used))
    d.report["seconds"] = time.perf_counter() - started
    return d.texts, d.vectors, d.report


_LITERAL = "[" + ",".join(["%.6g"] * 384) + "]"


def vector_literals(rows: np.ndarray) -> list[str]:
    """pgvector text literals, one format operation per row (a per-number join is 2.5x slower)."""
    return [_LITERAL % tuple(r) for r in rows.tolist()]


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def summary(times_ms: list[float]) -> dict:
    return {"p50_ms": statistics.median(times_ms), "p95_ms": percentile(times_ms, 0.95),
            "mean_ms": statistics.fmean(times_ms), "queries": len(times_ms)}


# ----------------------------------------------------------------------------- server memory

class ServerMemory:
    """Peak memory of the server (postmaster and every child), sampled every interval seconds.

    Proportional set size (Pss in /proc/PID/smaps_rollup) splits each shared page among the
    processes mapping it, so the sum over processes is the server's real footprint, shared
    buffers included once (summing RSS would count them once per backend)."""

    def __init__(self, postmaster: int, interval: float = 2.0):
        self.postmaster, self.interval = postmaster, interval
        self.phase = "start"
        self.peaks: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> ServerMemory:
        self._thread.start()
        return self

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        return {"peak_bytes_by_phase": dict(self.peaks), "peak_bytes": max(self.peaks.values(), default=0)}

    def _pids(self) -> list[int]:
        pids = [self.postmaster]
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    with open(f"/proc/{entry.name}/stat", encoding="ascii", errors="replace") as fh:
                        fields = fh.read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if int(fields[1]) == self.postmaster:
                    pids.append(int(entry.name))
        return pids

    @staticmethod
    def _pss(pid: int) -> int:
        try:
            with open(f"/proc/{pid}/smaps_rollup", encoding="ascii", errors="replace") as fh:
                for line in fh:
                    if line.startswith("Pss:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def sample(self) -> int:
        total = sum(self._pss(p) for p in self._pids())
        self.peaks[self.phase] = max(self.peaks.get(self.phase, 0), total)
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)


# ----------------------------------------------------------------------------- the tenant

def install_tenant(admin: str, tenant: str) -> str:
    from pgrecall import install

    with psycopg.connect(admin, autocommit=True) as conn:
        installed = conn.execute("select to_regnamespace('pgrecall') is not null").fetchone()[0]
        if installed and conn.execute("select 1 from pgrecall.tenant where name = %s", (tenant,)).fetchone():
            conn.execute("select pgrecall.drop_tenant(%s)", (tenant,))
        install.install(conn, [tenant])
    return role_uri(tenant, "app")


def role_uri(tenant: str, role: str) -> str:
    """The URI of one of the tenant's login roles (app, worker, admin): each duty logs in as its own."""
    from pgrecall import server

    return server.status().uri(user=f"pgrecall_{tenant}_{role}")


def _setup(conn, tenant: str) -> None:
    for s in SCOPES:
        conn.execute(f"select {tenant}.add_scope(%s)", (s,))
    conn.execute(f"select {tenant}.add_peer('agent', 'agent')")
    for p in OTHERS:
        conn.execute(f"select {tenant}.add_peer(%s, 'human')", (p,))


def _item(i: int, text: str, offset: int) -> dict:
    # 10% are private to another peer (never eligible for 'agent'); 10% may not be used to converse.
    return {"body": text, "evidence": [offset], "purposes": ["act"] if i % 10 == 5 else ["converse", "personalize"],
            "audience": OTHERS[i % 10] if i % 10 == 3 else None}


def agent_may_see(i: int) -> bool:
    """Whether memory i (by text index) is eligible for the agent's converse recall (see _item)."""
    return i % 10 not in (3, 5)


def ingest(app: str, tenant: str, texts: list[str], batch: int = 500, setup: bool = True) -> tuple[dict, np.ndarray]:
    """Bulk ingest through append_observations + remember_many, batch rows a call, one transaction per
    batch. Also returns each text's memory id (-1 where remember_many found it a duplicate). ``setup``:
    add the scopes and peers first (a second ingest into the same tenant passes False)."""
    from psycopg.types.json import Jsonb

    memory_of_text = np.full(len(texts), -1, dtype=np.int64)
    with psycopg.connect(app, autocommit=False) as conn:
        if setup:
            _setup(conn, tenant)
        conn.commit()
        started = time.perf_counter()
        created = 0
        for scope_index, scope in enumerate(SCOPES):
            mine = range(scope_index, len(texts), len(SCOPES))
            for start in range(0, len(mine), batch):
                chunk = mine[start:start + batch]
                rows = [{"body": texts[i], "source_role": "user", "actor": OTHERS[i % 10],
                         "data_subject_id": f"subject-{i % SUBJECTS}"} for i in chunk]
                offsets = [r[1] for r in conn.execute(
                    f"select * from {tenant}.append_observations('agent', %s, %s, %s)", (SCOPES, scope, Jsonb(rows)))]
                items = [_item(i, texts[i], o) for i, o in zip(chunk, offsets)]
                for i, (memory_id, status) in zip(chunk, conn.execute(
                        f"select memory_id, status from {tenant}.remember_many('agent', %s, %s, %s)",
                        (SCOPES, scope, Jsonb(items)))):
                    if status == "created":
                        memory_of_text[i] = memory_id
                        created += 1
                conn.commit()
        seconds = time.perf_counter() - started
    return ({"memories": len(texts), "created": created, "seconds": seconds, "per_second": len(texts) / seconds,
             "batch": batch}, memory_of_text)


def text_of_memory_index(memory_of_text: np.ndarray) -> np.ndarray:
    """The inverse of memory_of_text: for each memory id, its text index (-1: none)."""
    out = np.full(int(memory_of_text.max()) + 1, -1, dtype=np.int64)
    created = memory_of_text >= 0
    out[memory_of_text[created]] = np.nonzero(created)[0]
    return out


def store_embeddings(app: str, tenant: str, text_of_memory: np.ndarray, vectors: np.ndarray,
                     writers: int = 2, batch: int = 1000) -> dict:
    """Claim every job and complete it with its memory's vector: the database side of the worker, with
    `writers` workers at once (SKIP LOCKED hands each its own jobs)."""
    stored = [0] * writers
    errors: list[BaseException] = []

    def work(w: int) -> None:
        try:
            with psycopg.connect(app, autocommit=True) as conn:
                while True:
                    jobs = conn.execute(f"select memory_id, generation, model, input_version "
                                        f"from {tenant}.claim_embedding_jobs(%s, %s)", (f"bench{w}", batch)).fetchall()
                    if not jobs:
                        return
                    rows = vectors[text_of_memory[[j[0] for j in jobs]]]
                    stored[w] += conn.execute(
                        f"select {tenant}.complete_embedding_jobs(%s, %s, %s, %s, %s, %s)",
                        (f"bench{w}", [j[0] for j in jobs], [j[1] for j in jobs], vector_literals(rows),
                         jobs[0][2], jobs[0][3])).fetchone()[0]
        except BaseException as exc:  # surfaced below: a failed store must fail the run
            errors.append(exc)

    started = time.perf_counter()
    threads = [threading.Thread(target=work, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    seconds = time.perf_counter() - started
    return {"stored": sum(stored), "seconds": seconds, "per_second": sum(stored) / seconds, "writers": writers}


# ----------------------------------------------------------------------------- the bare baseline

def assign_users(memory_of_text: np.ndarray) -> dict:
    """The per-principal scenario's audiences, by memory id: user (id mod 50) for every memory, except
    NARROW memories spread over the corpus that belong to the narrow principal. Only memories
    that may be used to converse (and whose subject is not the one the bench erases) are given
    to the narrow principal, so it sees exactly NARROW of them."""
    created = np.nonzero(memory_of_text >= 0)[0]
    ids = memory_of_text[created]
    order = np.argsort(ids)
    ids, texts = ids[order], created[order]
    users = (ids % USERS).astype(np.int64)
    converse = texts % 10 != 5
    candidates = np.nonzero(converse & (texts % SUBJECTS != ERASED_SUBJECT))[0]
    narrow = candidates[np.linspace(0, len(candidates) - 1, min(NARROW, len(candidates))).astype(np.int64)]
    users[narrow] = USERS  # the narrow principal is user number USERS
    return {"ids": ids, "users": users, "converse": converse}


BASE_TABLE_DDL = """
create table {table} (
    id         bigint primary key,
    user_id    integer,           -- the per-principal scenario's owner; NULL: usable by nobody to converse
    body       text not null,
    tsv        tsvector generated always as (to_tsvector('english', body)) stored,
    embedding  vector(384) not null
)"""


BARE_TIMED_ROWS = 100_000  # the bare insert rate is measured on this many rows; the rest is copied


def build_baseline(admin: str, tenant: str, n: int, texts: list[str], vectors: np.ndarray, assignment: dict,
                   text_of_memory: np.ndarray, bulk: bool, timed_rows: int, batch: int = 500) -> dict:
    """One table with GIN, a user index and HNSW holding the same memories and vectors. The first
    timed_rows go in through batched INSERTs (batch rows a transaction, as the pgrecall ingest): the
    bare insert rate. Beyond that the rows are copied from the tenant in one statement, which keeps
    the 1M run within its hour. HNSW is built after loading from the same size on as for the tenant."""
    table = f"baseline.docs_{n}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("create schema if not exists baseline")
        conn.execute(f"drop table if exists {table}")
        conn.execute(BASE_TABLE_DDL.format(table=table))
        conn.execute(f"create index docs_{n}_tsv on {table} using gin (tsv)")
        conn.execute(f"create index docs_{n}_user on {table} (user_id)")
        if not bulk:
            conn.execute(f"create index docs_{n}_hnsw on {table} using hnsw (embedding vector_cosine_ops) "
                         "with (m = 16, ef_construction = 64)")
    ids, users, converse = assignment["ids"], assignment["users"], assignment["converse"]
    timed = min(len(ids), timed_rows)
    started = time.perf_counter()
    with psycopg.connect(admin, autocommit=False) as conn:
        for start in range(0, timed, batch):
            stop = min(timed, start + batch)
            chunk = ids[start:stop]
            text_idx = text_of_memory[chunk]
            owner = [int(u) if c else None for u, c in zip(users[start:stop], converse[start:stop])]
            conn.execute(f"insert into {table} (id, user_id, body, embedding) "
                         "select * from unnest(%s::bigint[], %s::integer[], %s::text[], %s::text[]::vector[])",
                         (chunk.tolist(), owner, [texts[i] for i in text_idx], vector_literals(vectors[text_idx])))
            conn.commit()
    insert_seconds = time.perf_counter() - started
    out = {"table": table, "rows": len(ids), "timed_rows": timed, "insert_seconds": insert_seconds,
           "inserts_per_second": timed / insert_seconds}
    with psycopg.connect(admin, autocommit=True) as conn:
        if timed < len(ids):
            # Same owners as assign_users(): NULL for memories that may not be used to converse.
            started = time.perf_counter()
            conn.execute(
                f"insert into {table} (id, user_id, body, embedding) "
                f"select m.id, case when not ('converse' = any (m.purposes)) then null "
                f"                  when m.id = any (%s) then {USERS} else (m.id %% {USERS})::integer end, "
                f"       m.body, e.embedding from {tenant}.memory m "
                f"join {tenant}.memory_embedding e on e.memory_id = m.id where m.id > %s",
                (ids[users == USERS].tolist(), int(ids[timed - 1])))
            out["copied_rows"] = len(ids) - timed
            out["copy_seconds"] = time.perf_counter() - started
        if bulk:
            started = time.perf_counter()
            conn.execute(f"create index docs_{n}_hnsw on {table} using hnsw (embedding vector_cosine_ops) "
                         "with (m = 16, ef_construction = 64)")
            out["hnsw_build_seconds"] = time.perf_counter() - started
        conn.execute(f"vacuum analyze {table}")
    return out


BASELINE_SQL = """
with lex as (
    select id, row_number() over (order by ts_rank_cd(tsv, q) desc, id) as r
      from {table}, to_tsquery('simple', %(orq)s) q
     where tsv @@ q {user_filter}
     order by ts_rank_cd(tsv, q) desc, id limit 100
), dense as (
    select id, row_number() over (order by d, id) as r
      from (select id, embedding <=> %(v)b::float8[]::vector as d from {table}
             where true {user_filter}
             order by embedding <=> %(v)b::float8[]::vector limit 100) x
)
select id, sum(1.0 / (60 + r)) as s from (select * from lex union all select * from dense) f
 group by id order by s desc, id limit 10
"""


def _or_query(conn, text: str) -> str:
    terms = conn.execute("select array_agg(distinct lexeme) from unnest(to_tsvector('english', %s))",
                         (text,)).fetchone()[0] or ["nothing"]
    return " | ".join(f"'{t}'" for t in terms)


def time_queries(dsn: str, fn, queries: list, warmup: int | None = None, setup=None) -> dict:
    """Each query's time, after an untimed pass over the first ``warmup`` of them (None: all). A full pass
    first puts every mode on the same footing: with 10 warm-up queries the mode timed first after the bare
    table's build paid for the pages that build had pushed out of the cache (at 1M, hybrid measured 38 ms
    p50 where its arms measured after it took 13 and 9)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        if setup:
            setup(conn)
        for q in queries[:warmup]:
            fn(conn, q)
        times = []
        for q in queries:
            started = time.perf_counter()
            fn(conn, q)
            times.append((time.perf_counter() - started) * 1000)
    return {**summary(times), "warmup": len(queries[:warmup])}


def baseline_latency(admin: str, table: str, qtexts: list[str], qvecs: np.ndarray, ef: int,
                     users: list[int] | None = None) -> dict:
    """The bare RRF statement at the tenant's HNSW breadth, with pgvector's iterative scan when filtered
    by user (what a developer who knows pgvector 0.8 would write)."""
    sql = BASELINE_SQL.format(table=table, user_filter="and user_id = %(u)s" if users is not None else "")

    def setup(conn):
        conn.execute(f"set hnsw.ef_search = {int(ef)}")
        if users is not None:
            conn.execute("set hnsw.iterative_scan = relaxed_order")

    def call(conn, item):
        text, vec, user = item
        return conn.execute(sql, {"orq": _or_query(conn, text), "v": vec.tolist(), "u": user}).fetchall()

    items = [(t, v, None if users is None else users[k]) for k, (t, v) in enumerate(zip(qtexts, qvecs))]
    return time_queries(admin, call, items, setup=setup)


# ----------------------------------------------------------------------------- recall through pgrecall

def _recall_sql(tenant: str) -> str:
    return (f"select memory_id from {tenant}.recall(%s, %s, %s, 'converse', %b, %s, 10, "
            f"p_query_model => '{MODEL}') where memory_id is not null order by rank")


def recall_latency(app: str, tenant: str, qtexts: list[str], qvecs: np.ndarray, principals: list[str] | None = None,
                   modes=MODES) -> dict:
    out, meta = {}, {}
    sql = _recall_sql(tenant)
    who = principals or ["agent"]
    items = [(who[k % len(who)], t, v.tolist()) for k, (t, v) in enumerate(zip(qtexts, qvecs))]
    for mode in modes:
        def call(conn, item, mode=mode):
            principal, text, vec = item
            return conn.execute(sql, (principal, SCOPES, text, vec if mode != "lexical" else None, mode)).fetchall()
        out[mode] = time_queries(app, call, items)
        with psycopg.connect(app, autocommit=True) as conn:
            principal, text, vec = items[0]
            m = conn.execute(f"select meta from {tenant}.recall_answer(%s, %s, %s, 'converse', %b, %s, 10, "
                             f"p_query_model => '{MODEL}')",
                             (principal, SCOPES, text, vec if mode != "lexical" else None, mode)).fetchone()[0]
            meta[mode] = {k: m.get(k) for k in ("dense_method", "term_stats", "dense_available")}
    out["_sample_meta"] = meta
    return out


def dense_ids(app: str, tenant: str, qtexts: list[str], qvecs: np.ndarray, principals: list[str]) -> tuple[list, list]:
    """The dense arm's top 10 per query (recall in dense mode), with each call's time in ms."""
    sql = _recall_sql(tenant)
    ids, times = [], []
    with psycopg.connect(app, autocommit=True) as conn:
        for k, (text, vec) in enumerate(zip(qtexts, qvecs)):
            started = time.perf_counter()
            rows = conn.execute(sql, (principals[k % len(principals)], SCOPES, text, vec.tolist(), "dense")).fetchall()
            times.append((time.perf_counter() - started) * 1000)
            ids.append([r[0] for r in rows])
    return ids, times


def exact_top(queries: np.ndarray, vectors: np.ndarray, rows: np.ndarray, k: int = 10,
              floor: float = DENSE_FLOOR, chunk: int = 131072) -> list[np.ndarray]:
    """Exact cosine top k among vectors[rows] for each query (unit vectors), floored as the dense arm is;
    returns, per query, positions into rows, best first."""
    best_scores = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    best_pos = np.zeros((len(queries), 0), dtype=np.int64)
    for start in range(0, len(rows), chunk):
        part = rows[start:start + chunk]
        scores = queries @ vectors[part].T
        take = min(k, scores.shape[1])
        top = np.argpartition(-scores, take - 1, axis=1)[:, :take]
        best_scores = np.concatenate([best_scores, np.take_along_axis(scores, top, axis=1)], axis=1)
        best_pos = np.concatenate([best_pos, top + start], axis=1)
        keep = np.argsort(-best_scores, axis=1, kind="stable")[:, :k]
        best_scores = np.take_along_axis(best_scores, keep, axis=1)
        best_pos = np.take_along_axis(best_pos, keep, axis=1)
    return [pos[scores >= floor] for pos, scores in zip(best_pos, best_scores)]


def recall_at_k(found: list[list[int]], exact: list[np.ndarray]) -> float | None:
    """Mean share of each query's exact top k that was found (queries with no exact hit are skipped)."""
    shares = [len(set(f) & set(e.tolist())) / len(e) for f, e in zip(found, exact) if len(e)]
    return statistics.fmean(shares) if shares else None


def set_ef(admin: str, tenant: str, ef: int) -> None:
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("select pgrecall.set_tenant_setting(%s, 'hnsw_ef_search', to_jsonb(%s::integer))", (tenant, ef))


def tenant_ef(admin: str, tenant: str) -> int:
    with psycopg.connect(admin, autocommit=True) as conn:
        return int(conn.execute(f"select value #>> '{{}}' from {tenant}.setting "
                                f"where key = 'hnsw_ef_search'").fetchone()[0])


def live_memories(admin: str, tenant: str) -> dict:
    """Every live memory's id, audience (peer name or None) and whether it may be used to converse."""
    with psycopg.connect(admin, autocommit=True) as conn:
        rows = conn.execute(f"select m.id, p.name, 'converse' = any (m.purposes) from {tenant}.memory m "
                            f"left join {tenant}.peer p on p.id = m.audience_peer_id "
                            "where m.superseded_by is null and m.invalidated_at is null order by m.id").fetchall()
    return {"ids": np.array([r[0] for r in rows], dtype=np.int64), "audience": [r[1] for r in rows],
            "converse": np.array([r[2] for r in rows], dtype=bool)}


def dense_accuracy(admin: str, app: str, tenant: str, qtexts: list[str], qvecs: np.ndarray, vectors: np.ndarray,
                   text_of_memory: np.ndarray, sweep: tuple[int, ...]) -> dict:
    """The dense arm (HNSW with iterative scan under the agent's eligibility filter) against exact
    cosine search over the same eligible memories: recall@10 and latency for each search breadth."""
    live = live_memories(admin, tenant)
    eligible = live["ids"][live["converse"] & np.array([a is None for a in live["audience"]], dtype=bool)]
    exact = [eligible[p] for p in exact_top(qvecs, vectors, text_of_memory[eligible])]
    default = tenant_ef(admin, tenant)
    out = {"queries": len(qtexts), "eligible": len(eligible), "tenant_ef_search": default, "sweep": []}
    try:
        for ef in sorted(set(sweep) | {default}):
            set_ef(admin, tenant, ef)
            dense_ids(app, tenant, qtexts[:10], qvecs[:10], ["agent"])  # warm
            found, times = dense_ids(app, tenant, qtexts, qvecs, ["agent"])
            out["sweep"].append({"ef_search": ef, "recall_at_10": recall_at_k(found, exact), **summary(times)})
    finally:
        set_ef(admin, tenant, default)
    at_default = next(s for s in out["sweep"] if s["ef_search"] == default)
    out["recall_at_10"] = at_default["recall_at_10"]
    return out


# ----------------------------------------------------------------------------- many principals

def give_audiences(admin: str, app: str, tenant: str, assignment: dict) -> list[str]:
    """The per-principal scenario's audiences (assign_users): peers u00.. and narrow, each memory private
    to one of them. Returns the peer names, user number order."""
    names = [f"u{u:02d}" for u in range(USERS)] + ["narrow"]
    with psycopg.connect(app, autocommit=True) as conn:
        for name in names:
            conn.execute(f"select {tenant}.add_peer(%s, 'human')", (name,))
    with psycopg.connect(admin, autocommit=True) as conn:
        peer_ids = [conn.execute(f"select id from {tenant}.peer where name = %s", (n,)).fetchone()[0] for n in names]
        # An admin's direct update: the rows are what remember() would have written with these audiences
        # (the trigger keeps the embeddings: neither text nor liveness changes).
        conn.execute(f"update {tenant}.memory m set audience_peer_id = (%s::bigint[])[a.u + 1] "
                     "from unnest(%s::bigint[], %s::integer[]) as a(id, u) where m.id = a.id",
                     (peer_ids, assignment["ids"].tolist(), assignment["users"].tolist()))
        conn.execute(f"vacuum analyze {tenant}.memory")
    return names


def per_principal(admin: str, app: str, tenant: str, table: str, assignment: dict, qtexts: list[str],
                  qvecs: np.ndarray, vectors: np.ndarray, text_of_memory: np.ndarray, ef: int) -> dict:
    """Every memory's audience becomes one of 50 users (and 200 of them a narrow principal's); each
    recalls only their own, against the bare statement filtered by its indexed user column."""
    started = time.perf_counter()
    names = give_audiences(admin, app, tenant, assignment)
    reassign_seconds = time.perf_counter() - started

    live = live_memories(admin, tenant)
    number = {name: u for u, name in enumerate(names)}
    owner = np.array([number.get(a, -1) for a in live["audience"]], dtype=np.int64)
    visible = {u: live["ids"][(owner == u) & live["converse"]] for u in range(len(names))}
    users = [k % USERS for k in range(len(qtexts))]
    out = {"users": USERS, "reassign_seconds": reassign_seconds,
           "visible_per_user_median": int(statistics.median(len(visible[u]) for u in range(USERS))),
           "visible_to_narrow": len(visible[USERS])}
    for label, principals, user_of_query in (("users", names[:USERS], users),
                                             ("narrow", ["narrow"], [USERS] * len(qtexts))):
        lat = recall_latency(app, tenant, qtexts, qvecs, principals, modes=("hybrid",))
        bare = baseline_latency(admin, table, qtexts, qvecs, ef, users=user_of_query)
        exact = [visible[u][p] if len(visible[u]) else np.zeros(0, dtype=np.int64)
                 for u, p in ((u, exact_top(qvecs[k:k + 1], vectors, text_of_memory[visible[u]])[0])
                              for k, u in enumerate(user_of_query))]
        found, _ = dense_ids(app, tenant, qtexts, qvecs, principals)
        bare_found = bare_dense_ids(admin, table, qvecs, user_of_query, ef)
        out[label] = {"pgrecall_hybrid": lat["hybrid"], "dense_method": lat["_sample_meta"]["hybrid"]["dense_method"],
                      "bare_filtered": bare, "hybrid_vs_bare_p50": lat["hybrid"]["p50_ms"] / bare["p50_ms"],
                      "hybrid_vs_bare_p95": lat["hybrid"]["p95_ms"] / bare["p95_ms"],
                      "pgrecall_dense_recall_at_10": recall_at_k(found, exact),
                      "bare_dense_recall_at_10": recall_at_k(bare_found, exact)}
    return out


def bare_dense_ids(admin: str, table: str, qvecs: np.ndarray, users: list[int], ef: int) -> list[list[int]]:
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"set hnsw.ef_search = {int(ef)}")
        conn.execute("set hnsw.iterative_scan = relaxed_order")
        return [[r[0] for r in conn.execute(
            f"select id from {table} where user_id = %s order by embedding <=> %b::float8[]::vector limit 10",
            (u, v.tolist())).fetchall()] for v, u in zip(qvecs, users)]


# ----------------------------------------------------------------------------- sizes, plans, erase

def relation_sizes(admin: str, tenant: str, table: str) -> dict:
    """Bytes and rows of every tenant table (with its indexes and TOAST) and of the bare table, with
    each table's own comment saying what it is for; and every index of the two big tables."""
    with psycopg.connect(admin, autocommit=True) as conn:
        tables = [{"table": r[0], "bytes": r[1], "rows": r[2], "purpose": r[3]} for r in conn.execute(
            "select c.relname, pg_total_relation_size(c.oid), c.reltuples::bigint, obj_description(c.oid, 'pg_class') "
            "from pg_class c where c.relnamespace = %s::regnamespace and c.relkind in ('r', 'p') "
            "and not c.relispartition order by 2 desc", (tenant,))]
        for t in tables:  # partitioned tables: their partitions' sizes and rows
            part = conn.execute("select coalesce(sum(pg_total_relation_size(i.relid)), 0), "
                                "coalesce(sum(c.reltuples), 0)::bigint from pg_partition_tree(%s) i "
                                "join pg_class c on c.oid = i.relid where i.isleaf",
                                (f"{tenant}.{t['table']}",)).fetchone()
            if part[0]:
                t["bytes"], t["rows"] = int(part[0]), int(part[1])
        tables.sort(key=lambda t: -t["bytes"])
        indexes = [{"index": r[0], "bytes": r[1]} for r in conn.execute(
            "select i.indexrelid::regclass::text, pg_relation_size(i.indexrelid) from pg_index i "
            "where i.indrelid in (%s::regclass, %s::regclass, %s::regclass) order by 1",
            (f"{tenant}.memory", f"{tenant}.memory_embedding", table))]
        bare = conn.execute("select pg_total_relation_size(%s::regclass), pg_relation_size(%s::regclass), "
                            "(select count(*) from " + table + ")", (table, table)).fetchone()
    return {"tables": tables, "indexes": indexes,
            "tenant_bytes": sum(t["bytes"] for t in tables),
            "bare_table": {"table": table, "bytes": bare[0], "heap_bytes": bare[1], "rows": bare[2]}}


def capture_plans(admin: str, tenant: str, text: str, vec, principal: str = "agent", modes=MODES) -> dict:
    """The nested statements' plans of one recall per mode, from auto_explain in the server log."""
    from pgrecall import server

    plans = {}
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("load 'auto_explain'")
        for setting, value in (("log_min_duration", "0"), ("log_nested_statements", "on"), ("log_analyze", "on"),
                               ("log_buffers", "on"), ("log_timing", "on")):
            conn.execute(f"set auto_explain.{setting} = {value}")
        conn.execute(f"set role pgrecall_{tenant}_app")
        for mode in modes:
            log_file = server.current_log_file()  # the server's log rotates by size
            start = log_file.stat().st_size
            conn.execute(f"select count(*) from {tenant}.recall(%s, %s, %s, 'converse', %s, %s, 10, "
                         f"p_query_model => '{MODEL}')",
                         (principal, SCOPES, text, vec.tolist() if mode != "lexical" else None, mode))
            with open(log_file, encoding="utf-8", errors="replace") as fh:
                fh.seek(start)
                plans[mode if principal == "agent" else f"{mode} as {principal}"] = fh.read()[-400000:]
        conn.execute("reset role")
    return plans


# ----------------------------------------------------------------------------- the single-call path

def _tenant_counters(conn, tenant: str) -> dict:
    conn.execute("select pg_stat_clear_snapshot()")
    rows = conn.execute(
        "select c.relname, coalesce(s.n_tup_ins, 0), coalesce(s.n_tup_upd, 0), coalesce(s.n_tup_del, 0), "
        "       case when c.relkind = 'p' then (select coalesce(sum(pg_total_relation_size(i.relid)), 0) "
        "                                         from pg_partition_tree(c.oid) i) "
        "            else pg_total_relation_size(c.oid) end "
        "from pg_class c left join pg_stat_user_tables s on s.relid = c.oid "
        "where c.relnamespace = %s::regnamespace and c.relkind in ('r', 'p') and not c.relispartition",
        (tenant,)).fetchall()
    parts = {r[0]: r[1:] for r in conn.execute(
        "select p.relname, sum(s.n_tup_ins), sum(s.n_tup_upd), sum(s.n_tup_del) from pg_class p "
        "join pg_inherits i on i.inhparent = p.oid join pg_stat_user_tables s on s.relid = i.inhrelid "
        "where p.relnamespace = %s::regnamespace group by 1", (tenant,)).fetchall()}
    wal = conn.execute("select pg_current_wal_insert_lsn()").fetchone()[0]
    tables = {}
    for name, ins, upd, dele, size in rows:
        extra = parts.get(name, (0, 0, 0))
        tables[name] = {"inserted": int(ins) + int(extra[0]), "updated": int(upd) + int(extra[1]),
                        "deleted": int(dele) + int(extra[2]), "bytes": int(size)}
    return {"tables": tables, "wal": wal}


def _amplification(admin: str, tenant: str, before: dict, after: dict, memories: int) -> dict:
    with psycopg.connect(admin, autocommit=True) as conn:
        wal = conn.execute("select pg_wal_lsn_diff(%s, %s)", (after["wal"], before["wal"])).fetchone()[0]
        purposes = dict(conn.execute("select relname, obj_description(oid, 'pg_class') from pg_class "
                                     "where relnamespace = %s::regnamespace", (tenant,)).fetchall())
    tables = []
    for name, a in after["tables"].items():
        b = before["tables"].get(name, dict.fromkeys(a, 0))
        delta = {k: (a[k] - b[k]) / memories for k in ("inserted", "updated", "deleted", "bytes")}
        if any(delta.values()):
            tables.append({"table": name, **{f"{k}_per_memory": v for k, v in delta.items()},
                           "rows_per_memory": delta["inserted"] + delta["updated"] + delta["deleted"],
                           "purpose": purposes.get(name)})
    tables.sort(key=lambda t: -t["bytes_per_memory"])
    return {"memories": memories, "tables": tables,
            "rows_per_memory": sum(t["rows_per_memory"] for t in tables),
            "bytes_per_memory": sum(t["bytes_per_memory"] for t in tables),
            "wal_bytes_per_memory": float(wal) / memories}


def _flush_stats(conn) -> None:
    # A backend reports its table counters when idle, at most once a second; ask for it now.
    conn.execute("select pg_stat_force_next_flush()")
    conn.execute("select 1")
    time.sleep(1.2)


def single_call(admin: str, app: str, tenant: str, texts: list[str]) -> dict:
    """One append_observation + one remember per memory, each its own autocommit call (an agent's live
    path): each call's latency, and what the pair writes (rows, bytes with indexes, WAL)."""
    with psycopg.connect(app, autocommit=True) as conn:
        _setup(conn, tenant)
    with psycopg.connect(admin, autocommit=True) as watch:
        before = _tenant_counters(watch, tenant)
        append_ms, remember_ms = [], []
        with psycopg.connect(app, autocommit=True) as conn:
            started = time.perf_counter()
            for i, text in enumerate(texts):
                t0 = time.perf_counter()
                off = conn.execute(f"select {tenant}.append_observation('agent', %s, 's0', %s, 'user', p_actor => %s)",
                                   (SCOPES, text, OTHERS[i % 10])).fetchone()[0]
                t1 = time.perf_counter()
                it = _item(i, text, off)
                conn.execute(f"select * from {tenant}.remember('agent', %s, 's0', %s, %s, %s, p_audience => %s)",
                             (SCOPES, text, it["evidence"], it["purposes"], it["audience"]))
                t2 = time.perf_counter()
                append_ms.append((t1 - t0) * 1000)
                remember_ms.append((t2 - t1) * 1000)
            seconds = time.perf_counter() - started
            _flush_stats(conn)
        after = _tenant_counters(watch, tenant)
    return {"memories": len(texts), "seconds": seconds, "per_second": len(texts) / seconds,
            "append_observation": summary(append_ms), "remember": summary(remember_ms),
            "writes": _amplification(admin, tenant, before, after, len(texts)), "_counters_after": after}


def worker_throughput(admin: str, sample: int = 2000) -> dict:
    """The single-call path, then the worker end to end (claim, embed, store) against the raw model
    embedding the same inputs in the same batches: every memory's input under the tenant's input
    version, and every passage (each append also writes passages, which the same worker embeds)."""
    from pgrecall.embedder import get_embedder
    from pgrecall.worker import Worker

    texts = corpus.memories(sample, seed=99)
    app = install_tenant(admin, "benchworker")
    single = single_call(admin, app, "benchworker", texts)
    with psycopg.connect(admin, autocommit=True) as conn:
        version = conn.execute("select value::int from benchworker.setting "
                               "where key = 'embedding_input_version'").fetchone()[0]
        inputs, own = ([r[0] for r in conn.execute(
            "select input from benchworker._embedding_inputs(array(select id from benchworker.memory order by id), %s) "
            "order by memory_id", (v,))] for v in (version, 1))
        passages = [r[0] for r in conn.execute("select body from benchworker.passage order by id")]
    embedder = get_embedder()
    embedder.embed(inputs[:64])  # warm

    def raw_pass(with_own_texts: bool) -> float:
        # Batches as the worker forms them: 64 jobs in id order; a memory job also embeds the memory's
        # own text (input version 1, which duplicate proposals compare) unless it equals the input.
        started = time.perf_counter()
        for start in range(0, len(inputs), 64):
            texts = inputs[start:start + 64] + (own[start:start + 64] if with_own_texts else [])
            embedder.embed(list(dict.fromkeys(texts)), batch_size=64)
        for start in range(0, len(passages), 64):
            embedder.embed(passages[start:start + 64], batch_size=64)
        return time.perf_counter() - started

    raw = raw_pass(False)
    raw_same = raw_pass(True)
    worker = Worker("benchworker", conninfo=role_uri("benchworker", "worker"), batch_size=64)
    started = time.perf_counter()
    stats = worker.drain(refresh_stats=False)
    end_to_end = time.perf_counter() - started
    with psycopg.connect(admin, autocommit=True) as conn:
        # The worker's connection has closed, so its counters have been reported.
        time.sleep(1.2)
        after = _tenant_counters(conn, "benchworker")
    single["embedding_writes"] = _amplification(admin, "benchworker", single.pop("_counters_after"), after,
                                                single["memories"])
    jobs = len(inputs) + len(passages)
    worker_rate = (stats.stored + stats.passages_stored) / end_to_end
    return {"texts": len(inputs), "passages": len(passages), "input_version": version,
            "own_texts": sum(a != b for a, b in zip(inputs, own)),
            "raw_model_per_second": jobs / raw_same, "worker_per_second": worker_rate,
            "ratio": worker_rate / (jobs / raw_same), "raw_inputs_only_per_second": jobs / raw,
            "ratio_to_inputs_only": worker_rate / (jobs / raw), "raw_same_seconds": raw_same,
            "stored": stats.stored, "passages_stored": stats.passages_stored,
            "model_seconds_in_worker": stats.embed_seconds, "worker_seconds": end_to_end, "raw_seconds": raw,
            "single_call_ingest": single}


# ----------------------------------------------------------------------------- one size

def run_size(admin: str, n: int, n_queries: int, base: int, sweep_queries: int, principal_queries: int,
             memory: ServerMemory) -> dict:
    tenant = f"bench{n}"
    wall = time.perf_counter()
    result: dict = {"size": n, "loadavg_start": os.getloadavg(), "cache": []}
    log(f"size {n}: corpus and cached embeddings")
    texts, vectors, derived = corpus_for(n, base, result["cache"])
    result["derived_corpus"] = derived
    qtexts = corpus.queries(n_queries, n)
    qvecs = cached_embeddings("queries", qtexts, result["cache"])
    app = install_tenant(admin, tenant)
    bulk = n >= BULK_INDEX_FROM

    log(f"size {n}: ingest through append_observations + remember_many")
    memory.phase = f"{n}: ingest"
    result["ingest"], memory_of_text = ingest(app, tenant, texts)
    text_of_memory = text_of_memory_index(memory_of_text)
    log(f"size {n}: {result['ingest']['per_second']:.0f} memories/s; storing the embeddings")
    if bulk:
        # Building the HNSW index once after loading is what a bulk load does; inserting
        # 100k vectors one by one into a live index runs at ~85/s here (measured).
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"drop index {tenant}.memory_embedding_hnsw")
    memory.phase = f"{n}: store embeddings"
    emb = store_embeddings(role_uri(tenant, "worker"), tenant, text_of_memory, vectors)
    if bulk:
        memory.phase = f"{n}: HNSW build"
        with psycopg.connect(admin, autocommit=True) as conn:
            started = time.perf_counter()
            conn.execute(f"create index memory_embedding_hnsw on {tenant}.memory_embedding "
                         "using hnsw (embedding vector_cosine_ops) with (m = 16, ef_construction = 64)")
            emb["index_built_after_load_seconds"] = time.perf_counter() - started
    result["embedding_store"] = emb
    log(f"size {n}: {emb['per_second']:.0f} embeddings/s stored; refreshing statistics")
    memory.phase = f"{n}: statistics and vacuum"
    with psycopg.connect(role_uri(tenant, "worker"), autocommit=True) as conn:
        started = time.perf_counter()
        conn.execute(f"select * from {tenant}.refresh_term_stats()")
        result["term_stats_refresh_seconds"] = time.perf_counter() - started
    with psycopg.connect(admin, autocommit=True) as conn:
        # Every table the load wrote (the log, passages, queues, registry too): left to
        # autovacuum, it ran during the first timed mode and doubled its median once.
        started = time.perf_counter()
        conn.execute("vacuum analyze")
        result["vacuum_seconds"] = time.perf_counter() - started

    log(f"size {n}: bare table, loaded through batched INSERTs")
    memory.phase = f"{n}: bare table"
    assignment = assign_users(memory_of_text)
    base_table = build_baseline(admin, tenant, n, texts, vectors, assignment, text_of_memory, bulk,
                                timed_rows=BARE_TIMED_ROWS)
    result["sizes"] = relation_sizes(admin, tenant, base_table["table"])
    public = result["ingest"]["seconds"] + emb["seconds"] + emb.get("index_built_after_load_seconds", 0)
    # the bare path at its measured insert rate for every row, plus its index build
    bare = base_table["rows"] / base_table["inserts_per_second"] + base_table.get("hnsw_build_seconds", 0)
    result["ingest_vs_bare"] = {"pgrecall_per_second": n / public, "bare_per_second": base_table["rows"] / bare,
                                "pgrecall_seconds": public, "bare_seconds": bare}
    ef = tenant_ef(admin, tenant)

    log(f"size {n}: recall latency, {n_queries} queries per mode, and the bare statement")
    memory.phase = f"{n}: recall"
    result["recall"] = recall_latency(app, tenant, qtexts, qvecs)
    result["baseline"] = {**baseline_latency(admin, base_table["table"], qtexts, qvecs, ef), **base_table,
                          "ef_search": ef}
    result["hybrid_vs_baseline_p50"] = result["recall"]["hybrid"]["p50_ms"] / result["baseline"]["p50_ms"]
    result["hybrid_vs_baseline_p95"] = result["recall"]["hybrid"]["p95_ms"] / result["baseline"]["p95_ms"]

    log(f"size {n}: dense arm against exact search, ef_search {', '.join(map(str, EF_SWEEP))}")
    result["dense_accuracy"] = dense_accuracy(admin, app, tenant, qtexts[:sweep_queries], qvecs[:sweep_queries],
                                              vectors, text_of_memory, EF_SWEEP)
    log(f"size {n}: query plans (auto_explain) for one query per mode")
    result["plans"] = capture_plans(admin, tenant, qtexts[0], qvecs[0])

    log(f"size {n}: erase one data subject")
    with psycopg.connect(role_uri(tenant, "admin"), autocommit=True) as conn:
        started = time.perf_counter()
        receipt = conn.execute(f"select observations_erased, rows_erased, residual "
                               f"from {tenant}.erase('bench', %s, 'bench')",
                               (json.dumps({"data_subject": f"subject-{ERASED_SUBJECT}"}),)).fetchone()
        result["erase_one_subject"] = {
            "seconds": time.perf_counter() - started, "observations": receipt[0], "rows_erased": receipt[1],
            "residual_zero": all(v == 0 for v in receipt[2].values())}
    with psycopg.connect(admin, autocommit=True) as conn:
        # The bare table keeps mirroring the tenant's memories.
        conn.execute(f"delete from {base_table['table']} b where not exists "
                     f"(select 1 from {tenant}.memory m where m.id = b.id)")

    log(f"size {n}: {USERS} users and a narrow principal, each recalling their own")
    memory.phase = f"{n}: per principal"
    result["per_principal"] = per_principal(admin, app, tenant, base_table["table"], assignment,
                                            qtexts[:principal_queries], qvecs[:principal_queries], vectors,
                                            text_of_memory, ef)
    for principal in ("u00", "narrow"):
        result["plans"].update(capture_plans(admin, tenant, qtexts[0], qvecs[0], principal, modes=("hybrid",)))
    result["loadavg_end"] = os.getloadavg()
    result["wall_seconds"] = time.perf_counter() - wall
    lat = result["recall"]["hybrid"]
    log(f"size {n}: hybrid p50 {lat['p50_ms']:.1f} ms p95 {lat['p95_ms']:.1f} ms; baseline p50 "
        f"{result['baseline']['p50_ms']:.1f} ms; dense recall@10 {result['dense_accuracy']['recall_at_10']:.3f}; "
        f"{result['wall_seconds'] / 60:.1f} min")
    return result


def main(argv=None) -> int:
    from . import report as report_md

    parser = argparse.ArgumentParser(prog="make bench")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--base", type=int, default=100_000,
                        help="memories embedded by the model; larger sizes are derived from them (bench/derive.py)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--sweep-queries", type=int, default=100, help="queries per ef_search value in the sweep")
    parser.add_argument("--principal-queries", type=int, default=100,
                        help="queries per scenario (50 users, narrow principal) and side (pgrecall, bare)")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--no-worker", action="store_true")
    parser.add_argument("--no-shell", action="store_true",
                        help="skip pgrecall recall from the shell, first and second call (bench/shell.py)")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    report = {"format": FORMAT, **new_report("make bench BENCH_ARGS='{args}'", argv, base=args.base, sizes=[])}
    out = Path(args.out)
    archive = out / "archive"
    archive.mkdir(parents=True, exist_ok=True)
    # Room for a 1M-vector HNSW graph to be built in memory (~1.7 GB), and
    # for the indexes recall reads to stay in shared buffers.
    settings = {"maintenance_work_mem": "4GB", "shared_buffers": "4GB", "max_parallel_maintenance_workers": "1"}
    with embedded_server("pgrb-", settings) as info:
        admin = info.uri()
        with psycopg.connect(admin, autocommit=True) as conn:
            report["server_settings"] = dict(conn.execute(
                "select name, current_setting(name) from pg_settings where name in "
                "('shared_buffers', 'maintenance_work_mem', 'max_parallel_maintenance_workers', 'work_mem')"
            ).fetchall())
        memory = ServerMemory(info.pid).start()
        try:
            for n in [int(s) for s in args.sizes.split(",") if s]:
                result = run_size(admin, n, args.queries, args.base, args.sweep_queries, args.principal_queries,
                                  memory)
                plans = result.pop("plans", {})
                (archive / f"plans-{stamp(report)}-{n}.txt").write_text(
                    "\n\n".join(f"===== {mode} =====\n{text}" for mode, text in plans.items()))
                report["sizes"].append(result)
                (archive / "partial.json").write_text(json.dumps(report, indent=2, default=_jsonable))
            if not args.no_worker:
                log("single-call path, then the worker against the raw model")
                memory.phase = "worker"
                report["worker"] = worker_throughput(admin)
        finally:
            report["server_memory"] = memory.stop()
    if not args.no_shell:
        from . import shell

        log("pgrecall recall from the shell: first and second call (a server of its own)")
        report["shell"] = shell.measure()
        write_report(out, "shell", report, shell.markdown(report))
    report["wall_seconds"] = time.perf_counter() - started
    md = report_md.markdown(report)
    write_report(out, "bench", report, md, latest="latest.md", default=_jsonable)
    (out / "latest.json").write_text(json.dumps(report, indent=2, default=_jsonable))
    try:
        from . import plots

        for path in plots.write_plots(out):
            log(f"figure {path}")
    except ImportError as exc:
        log(f"no figures ({exc}); install the bench extra: pip install -e '.[bench]'")
    print(md)
    return 0


def _jsonable(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value)}")


if __name__ == "__main__":
    raise SystemExit(main())
