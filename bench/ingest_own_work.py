"""pgrecall's own write work, without the HNSW inserts (issue #46 item 1).

    python -m bench.ingest_own_work [--n 5000] [--batch 500]

bench.ingest_profile's ingest (append_many + remember_many with the vectors given, then Worker.drain(), per
batch) on a throwaway embedded server whose two HNSW indexes (memory_embedding_hnsw, passage_embedding_hnsw)
are dropped after the install. The HNSW insert costs both sides of make bench-peers alike (0.6-0.7 ms an item)
and its random levels move it by a few percent from run to run, more than a 0.05 ms change of pgrecall's own
work; the application backend's CPU (from /proc) without it is that work alone. Compare two checkouts by
running this in each, alternately.
"""

from __future__ import annotations

import argparse
import os
import time

import psycopg

from .harness import embedded_server
from .ingest_profile import TENANT, Lookup, backend_cpu, corpus


def measure(n: int, batch: int) -> str:
    import pgrecall
    import pgrecall.worker
    from pgrecall import install

    texts, vecs, source = corpus(n)
    lookup = Lookup(dict(zip(texts, vecs)))
    with embedded_server("pgrecall-ingest-own-", {}) as info:
        uri = info.uri()
        admin = psycopg.connect(uri, autocommit=True)
        install.install(admin, [TENANT])
        admin.execute(f"drop index {TENANT}.memory_embedding_hnsw")
        admin.execute(f"drop index {TENANT}.passage_embedding_hnsw")
        role = {r: uri.replace("postgresql://postgres@", f"postgresql://pgrecall_{TENANT}_{r}@", 1)
                .replace("postgresql://postgres:@", f"postgresql://pgrecall_{TENANT}_{r}@", 1)
                for r in ("app", "worker", "admin")}
        app = psycopg.connect(role["app"], autocommit=True)
        mem = pgrecall.connect(tenant=TENANT, conn=app, principal="agent", scopes=["default"], embedder=lookup)
        mem.add_scope("default")
        mem.add_peer("agent", "agent")
        mem.add_peer("user-0", "human")
        with pgrecall.connect(role["admin"], tenant=TENANT, role="admin") as back:
            back.set_embedding_version("all-MiniLM-L6-v2", 1)
        worker = pgrecall.worker.Worker(TENANT, conninfo=role["worker"], batch_size=batch, name="own",
                                        embedder=lookup)
        pid = app.info.backend_pid
        appended = remembered = 0.0
        load0 = os.getloadavg()[0]
        started = time.perf_counter()
        for start in range(0, n, batch):
            chunk = texts[start:start + batch]
            c0 = backend_cpu(pid)
            offsets = mem.append_many([{"body": x, "source_role": "user", "actor": "user-0"} for x in chunk])
            c1 = backend_cpu(pid)
            mem.remember_many([{"body": x, "evidence": [off], "purposes": ["converse"], "audience": "user-0"}
                               for x, off in zip(chunk, offsets)])
            appended += c1 - c0
            remembered += backend_cpu(pid) - c1
            worker.drain()
        wall = time.perf_counter() - started
        mem.close()
        app.close()
        admin.close()
    return (f"{n} items, {batch} a batch, vectors: {source}, HNSW indexes dropped: backend CPU append "
            f"{1000 * appended / n:.3f} + remember {1000 * remembered / n:.3f} = "
            f"{1000 * (appended + remembered) / n:.3f} ms an item; wall {wall:.1f} s; load average "
            f"{load0:.1f} -> {os.getloadavg()[0]:.1f}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--batch", type=int, default=500)
    args = ap.parse_args(argv)
    print(measure(args.n, args.batch))


if __name__ == "__main__":
    main()
