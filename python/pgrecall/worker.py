"""``pgrecall worker``: turns queued memories and passages into embeddings.

It logs in as the tenant's worker role, claims jobs through the tenant's SQL
functions (SKIP LOCKED with a lease),
embeds a batch with the local model, and stores the vectors; a job is removed
only when its vector is stored. A worker that dies keeps nothing: its leases
end with its database session, and the next claim of any worker takes the jobs
(a worker that hangs keeps them until embedding_lease_seconds). LISTEN/NOTIFY
wakes it when new work is queued; it also polls, to pick up leases that ended.
Its loop is the deriver's (pgrecall.loop): a lost connection is retried with
backoff, a permanent error stops it.
"""

from __future__ import annotations

import os
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import psycopg
from psycopg import sql

from . import db, errors, loop, names
from .embedder import get_embedder, to_literal


@dataclass
class WorkerStats:
    claimed: int = 0
    stored: int = 0
    batches: int = 0
    passages_claimed: int = 0
    passages_stored: int = 0
    embed_seconds: float = 0.0


class Worker:
    def __init__(self, tenant: str, *, conninfo: str | None = None, batch_size: int = 64, name: str | None = None):
        self.tenant = names.check_tenant_name(tenant)
        self.conninfo = conninfo or db.tenant_conninfo(tenant, "worker")
        self.batch_size = batch_size
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.stats = WorkerStats()
        self.embedder = get_embedder()

    def _call(self, conn: psycopg.Connection, function: str, params: tuple, *, rows: bool = False):
        """``select [* from] <tenant>.<function>(%s, ...)``: the names as identifiers, the values bound."""
        query = sql.SQL("select * from {}.{}({})" if rows else "select {}.{}({})").format(
            sql.Identifier(self.tenant), sql.Identifier(function),
            sql.SQL(", ").join(sql.Placeholder() for _ in params))
        try:
            return conn.execute(query, params)
        except psycopg.Error as exc:
            raise errors.translate(exc) from exc

    def run_queues(self, conn: psycopg.Connection, progress=None, stop=lambda: False) -> int:
        """Work both queues until nothing is claimable; returns how many jobs were done.

        The database work runs on a second thread while the model embeds: the next batch is claimed,
        and the previous one stored, during this one's embedding (the model would otherwise wait for
        every round trip, and for the HNSW inserts). ``conn`` is used by that thread only.
        """
        done = 0
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="pgrecall-worker-db") as db_thread:
            def on_db(fn, *args):
                return db_thread.submit(fn, conn, *args)

            for queue in ("embedding", "passage_embedding"):
                jobs = on_db(self._claim, queue).result()
                stored = None
                while jobs and not stop():
                    following = on_db(self._claim, queue)
                    try:
                        vectors = self._embed(jobs)
                    except Exception:
                        # Give back what is held rather than let the leases run out.
                        on_db(self._release, queue, jobs).result()
                        on_db(self._release, queue, following.result()).result()
                        raise
                    if stored is not None:
                        stored.result()  # a failed store stops the worker, as it would without the pipeline
                    stored = on_db(self._store, queue, jobs, vectors)
                    done += len(jobs)
                    if progress is not None:
                        progress(len(jobs))
                    jobs = following.result()
                if stored is not None:
                    stored.result()
                if jobs:  # stopped with a batch claimed
                    on_db(self._release, queue, jobs).result()
        if progress is not None:
            progress(0)
        return done

    def _claim(self, conn: psycopg.Connection, queue: str) -> list:
        return self._call(conn, f"claim_{queue}_jobs", (self.name, self.batch_size), rows=True).fetchall()

    def _release(self, conn: psycopg.Connection, queue: str, jobs: list) -> None:
        if jobs:
            self._call(conn, f"release_{queue}_jobs", (self.name, [j[0] for j in jobs]))

    def _embed(self, jobs: list):
        if jobs[0][3] != self.embedder.name:
            raise errors.ModelMismatch(
                f"tenant {self.tenant} embeds with {jobs[0][3]!r}, this worker runs {self.embedder.name!r}",
                hint="Run a worker with that model, or switch back: pgrecall embeddings rebuild --model "
                     f"{self.embedder.name}")
        started = time.perf_counter()
        texts = [j[2] for j in jobs]
        if len(jobs[0]) > 5:
            # A memory job also carries the memory's own text (what duplicate proposals compare); under
            # input version 1 it is the input itself, and each distinct text is embedded once.
            texts += [j[5] for j in jobs]
        unique = list(dict.fromkeys(texts))
        embedded = dict(zip(unique, self.embedder.embed(unique, batch_size=self.batch_size)))
        self.stats.embed_seconds += time.perf_counter() - started
        return [embedded[t] for t in texts]

    def _store(self, conn: psycopg.Connection, queue: str, jobs: list, vectors) -> int:
        ids = [j[0] for j in jobs]
        model, version = jobs[0][3], jobs[0][4]
        params = (self.name, ids, [j[1] for j in jobs], [to_literal(v) for v in vectors[:len(jobs)]], model, version)
        if len(vectors) > len(jobs):  # and the vectors of the memories' own texts
            params += ([to_literal(v) for v in vectors[len(jobs):]],)
        stored = self._call(conn, f"complete_{queue}_jobs", params).fetchone()[0]
        if queue == "embedding":
            self.stats.claimed += len(jobs)
            self.stats.stored += stored
        else:
            self.stats.passages_claimed += len(jobs)
            self.stats.passages_stored += stored
        self.stats.batches += 1
        return stored

    def drain(self, progress=None, refresh_stats: bool = True) -> WorkerStats:
        """Work until the queues have nothing claimable, then refresh term statistics if they are stale."""
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            self.run_queues(conn, progress)
            if refresh_stats:
                self.refresh_stats_if_stale(conn)
        return self.stats

    def refresh_stats_if_stale(self, conn: psycopg.Connection) -> bool:
        if self._call(conn, "term_stats_stale", ()).fetchone()[0]:
            self._call(conn, "refresh_term_stats", (), rows=True)
            return True
        return False

    def run_forever(self, poll_seconds: float = 5.0, stop=lambda: False) -> None:
        """Embed as work comes (NOTIFY wakes it; ended leases need the poll), refreshing stale statistics
        between rounds. A lost connection is retried with backoff (pgrecall.loop); a permanent error, such
        as a tenant that embeds with another model, stops it."""
        loop.run(self.conninfo, self.tenant, "embed", lambda conn: self.run_queues(conn, stop=stop),
                 poll_seconds=poll_seconds, stop=stop, between=self.refresh_stats_if_stale)
