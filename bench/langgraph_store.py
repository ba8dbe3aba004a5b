"""``make bench-langgraph``: a LangGraph ``search`` through pgrecall's store against LangGraph's own
``PostgresStore`` (langgraph-checkpoint-postgres), with the same vectors, on the peers bench's corpus
(issue #49, item 3).

Both stores hold the corpus of ../shared/bench-peers (synthetic facts about people and places, 10k by
default) as items ``{"content": text}`` under one namespace, and answer its 200 paraphrased questions with
``store.search(namespace, query=question, limit=5)``. The vectors are the same on both sides: every text and
question is embedded once with pgrecall's model (all-MiniLM-L6-v2 on ONNX Runtime), and both stores are
given an embedder that looks the vector up (pgrecall's worker stores the items' vectors with it, and the
store embeds each question with it; PostgresStore embeds on put and on search with it), so the model's cost
is left out of both. Measured: each search's client-side time (p50, p95), after an untimed pass, the two
stores interleaved query by query; recall@5 (the question's target is among the five items); and the time to
put the corpus. Both stores live in one throwaway embedded server.

    python -m bench.langgraph_store                 # 10k items, 200 questions
    python -m bench.langgraph_store --size 2000     # a quick look

Results: bench/results/latest-langgraph.md, the runs in bench/results/archive/.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PEERS = next((p for p in (ROOT.parent / "shared" / "bench-peers", ROOT.parent.parent / "shared" / "bench-peers")
              if p.exists()), ROOT.parent / "shared" / "bench-peers")
TENANT = "lgbench"
NAMESPACE = ("memories", "agent")
K = 5


class Lookup:
    """An embedder that answers from vectors computed beforehand (the model for anything else, counted)."""

    def __init__(self, model: Any, table: dict[str, np.ndarray]) -> None:
        self.model, self.table, self.name, self.misses = model, table, model.name, 0

    def embed(self, texts: list[str]) -> list[np.ndarray]:
        out = []
        for text in texts:
            if text not in self.table:
                self.misses += 1
                self.table[text] = np.asarray(self.model.embed([text])[0], dtype=np.float32)
            out.append(self.table[text])
        return out

    # LangChain's Embeddings interface, which PostgresStore calls
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [v.tolist() for v in self.embed(texts)]

    def embed_query(self, text: str) -> list[float]:
        return self.embed([text])[0].tolist()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def run(size: int, nq: int, uri: str, input_version: int) -> dict[str, Any]:
    sys.path.insert(0, str(PEERS))
    from corpus import make_corpus, make_queries  # the peers bench's corpus, the same at every size
    from langchain_core.embeddings import Embeddings
    from langgraph.store.postgres import PostgresStore

    import pgrecall
    from pgrecall import install
    from pgrecall.embedder import default_embedder
    from pgrecall.integrations.langgraph import PgrecallStore
    from pgrecall.worker import Worker

    items = make_corpus(size)
    queries = make_queries(items, nq)
    model = default_embedder()
    texts = [it["text"] for it in items] + [q["question"] for q in queries]
    started = time.perf_counter()
    vectors = [np.asarray(v, dtype=np.float32)
               for i in range(0, len(texts), 256) for v in model.embed(texts[i:i + 256])]
    embed_s = time.perf_counter() - started
    lookup = Lookup(model, dict(zip(texts, vectors, strict=True)))

    class LookupEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return lookup.embed_documents(texts)

        def embed_query(self, text: str) -> list[float]:
            return lookup.embed_query(text)

    with psycopg.connect(uri, autocommit=True) as conn:
        install.install(conn, [TENANT])
        conn.execute(f"select {TENANT}.add_scope('default')")  # as the installer: the app role may too
        conn.execute(f"select {TENANT}.add_peer('agent', 'agent')")
        # Input version 1 embeds a memory's own text, here the item's content: the vector PostgresStore gets.
        # The tenant's default (2) adds the turns around its evidence, here the puts before and after it.
        conn.execute(f"select {TENANT}.set_embedding_version(%s, %s)", (model.name, input_version))
        conn.execute("create database lgstore")  # PostgresStore's own database: its tables and pgvector in public
    from pgrecall import server

    theirs_uri = server.status().uri(database="lgstore")
    app = server.status().uri(user=f"pgrecall_{TENANT}_app")
    worker = server.status().uri(user=f"pgrecall_{TENANT}_worker")
    result: dict[str, Any] = {"size": size, "queries": len(queries), "embed_s": round(embed_s, 1),
                              "input_version": input_version}

    with pgrecall.connect(app, tenant=TENANT, principal="agent", scopes=["default"], embedder=lookup) as mem:
        ours = PgrecallStore(mem)
        started = time.perf_counter()
        for it in items:
            ours.put(NAMESPACE, str(it["id"]), {"content": it["text"]})
        put_s = time.perf_counter() - started
        started = time.perf_counter()
        Worker(TENANT, conninfo=worker, embedder=lookup).drain()
        result["pgrecall_put_per_s"] = round(size / put_s, 1)
        result["pgrecall_worker_s"] = round(time.perf_counter() - started, 1)

        with PostgresStore.from_conn_string(theirs_uri, index={"dims": 384, "embed": LookupEmbeddings(),
                                                        "fields": ["content"]}) as theirs:
            theirs.setup()
            started = time.perf_counter()
            for i in range(0, size, 500):
                theirs.batch([_put(NAMESPACE, str(it["id"]), {"content": it["text"]}) for it in items[i:i + 500]])
            result["postgres_store_put_per_s"] = round(size / (time.perf_counter() - started), 1)

            stores = {"pgrecall": ours, "PostgresStore": theirs}
            times: dict[str, list[float]] = {name: [] for name in stores}
            found: dict[str, int] = dict.fromkeys(stores, 0)
            for q in queries:  # untimed
                for store in stores.values():
                    store.search(NAMESPACE, query=q["question"], limit=K)
            for n, q in enumerate(queries):
                order = list(stores) if n % 2 == 0 else list(reversed(stores))
                for name in order:
                    started = time.perf_counter()
                    hits = stores[name].search(NAMESPACE, query=q["question"], limit=K)
                    times[name].append((time.perf_counter() - started) * 1000)
                    found[name] += str(q["target"]) in [h.key for h in hits]
            for name in stores:
                result[name] = {"p50_ms": round(statistics.median(times[name]), 2),
                                "p95_ms": round(percentile(times[name], 95), 2),
                                f"recall_at_{K}": round(found[name] / len(queries), 3)}
    result["lookup_misses"] = lookup.misses
    # what the model alone finds: exact cosine over the same vectors
    corpus = np.stack(vectors[:size])
    exact = 0
    for q in queries:
        scores = corpus @ lookup.table[q["question"]]
        exact += q["target"] in np.argsort(-scores)[:K]
    result[f"exact_cosine_recall_at_{K}"] = round(exact / len(queries), 3)
    return result


def _put(namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> Any:
    from langgraph.store.base import PutOp

    return PutOp(namespace, key, value)


def markdown(report: dict[str, Any]) -> str:
    r = report["result"]
    md = [f"# A LangGraph search: pgrecall's store against PostgresStore, {r['size']:,} items",
          "", f"{report['started']}, {report['machine']}; load average {report['load_start']} at the start, "
          f"{report['load_end']} at the end. `{report['command']}`.", "",
          f"{r['queries']} questions of the peers bench, `store.search(namespace, query=..., limit={K})` on each "
          "store, interleaved, client-side, after an untimed pass. Both stores are given the same vectors "
          f"(all-MiniLM-L6-v2, embedded once: {r['embed_s']} s). Exact cosine over those vectors finds "
          f"{r[f'exact_cosine_recall_at_{K}']:.3f} of the targets in its top {K}. pgrecall's tenant embeds input "
          f"version {r['input_version']} ("
          + ("the item's own text: the same vectors as PostgresStore's" if r["input_version"] == 1 else
             "its default: the item with the puts logged around it") + f"; {r['lookup_misses']} texts were not among "
          "those embedded beforehand and were embedded by the model).", "",
          f"| store | search p50 ms | p95 ms | recall@{K} | puts/s |", "|---|---:|---:|---:|---:|",
          f"| pgrecall (`PgrecallStore`, hybrid recall) | {r['pgrecall']['p50_ms']} | {r['pgrecall']['p95_ms']} | "
          f"{r['pgrecall'][f'recall_at_{K}']:.3f} | {r['pgrecall_put_per_s']} (then the worker: "
          f"{r['pgrecall_worker_s']} s) |",
          f"| LangGraph `PostgresStore` (pgvector) | {r['PostgresStore']['p50_ms']} | "
          f"{r['PostgresStore']['p95_ms']} | {r['PostgresStore'][f'recall_at_{K}']:.3f} | "
          f"{r['postgres_store_put_per_s']} (batches of 500, vectors with them) |", "",
          "pgrecall's put is one call per item (a turn appended to the log, the memory, its links); its vectors "
          "come from the embedding worker after. PostgresStore writes batches of 500 with their vectors.", ""]
    return "\n".join(md)


def main(argv: list[str] | None = None) -> int:
    from .harness import embedded_server, new_report, write_report

    parser = argparse.ArgumentParser(prog="make bench-langgraph")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--input-version", type=int, default=1, choices=(1, 2),
                        help="the text pgrecall embeds: 1 the item's own (PostgresStore's vector), "
                             "2 the tenant default")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    report = new_report("python -m bench.langgraph_store {args}", argv,
                        load_start="/".join(f"{x:.1f}" for x in os.getloadavg()))
    with embedded_server("pgrecall-bench-langgraph-") as info:
        os.environ["PGRECALL_DSN"] = info.uri()
        report["result"] = run(args.size, args.queries, info.uri(), args.input_version)
    report["load_end"] = "/".join(f"{x:.1f}" for x in os.getloadavg())
    write_report(args.out, "langgraph", report, markdown(report), default=str)
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
