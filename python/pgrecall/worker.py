"""``pgrecall worker``: turns queued memories and passages into embeddings.

It claims jobs through the tenant's SQL functions (SKIP LOCKED with a lease),
embeds a batch with the local model, and stores the vectors; a job is removed
only when its vector is stored. A worker that dies keeps nothing: its lease
runs out and another worker takes the jobs. LISTEN/NOTIFY wakes it when new
work is queued; it also polls, to pick up expired leases.
"""

from __future__ import annotations

import os
import select
import socket
import time
from dataclasses import dataclass

import psycopg

from . import db, errors
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
        self.tenant = tenant
        self.conninfo = conninfo or db.tenant_conninfo(tenant)
        self.batch_size = batch_size
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.stats = WorkerStats()
        self.embedder = get_embedder()

    def _call(self, conn: psycopg.Connection, sql: str, params: tuple):
        try:
            return conn.execute(sql.replace("$T", self.tenant), params)
        except psycopg.Error as exc:
            raise errors.translate(exc) from exc

    def run_batch(self, conn: psycopg.Connection) -> int:
        """Claim, embed and store one batch of memories and one of passages; returns how many jobs were claimed."""
        claimed = self._run_queue(conn, "embedding")
        return claimed + self._run_queue(conn, "passage_embedding")

    def _run_queue(self, conn: psycopg.Connection, queue: str) -> int:
        jobs = self._call(conn, f"select * from $T.claim_{queue}_jobs(%s, %s)", (self.name, self.batch_size)).fetchall()
        if not jobs:
            return 0
        ids = [j[0] for j in jobs]
        if jobs[0][3] != self.embedder.name:
            self._call(conn, f"select $T.release_{queue}_jobs(%s, %s)", (self.name, ids))
            raise errors.ModelMismatch(
                f"tenant {self.tenant} embeds with {jobs[0][3]!r}, this worker runs {self.embedder.name!r}",
                hint="Run a worker with that model, or switch back: pgrecall embeddings rebuild --model "
                     f"{self.embedder.name}")
        started = time.perf_counter()
        try:
            vectors = self.embedder.embed([j[2] for j in jobs], batch_size=self.batch_size)
        except Exception:
            self._call(conn, f"select $T.release_{queue}_jobs(%s, %s)", (self.name, ids))
            raise
        self.stats.embed_seconds += time.perf_counter() - started
        model, version = jobs[0][3], jobs[0][4]
        stored = self._call(conn, f"select $T.complete_{queue}_jobs(%s, %s, %s, %s, %s, %s)",
                            (self.name, ids, [j[1] for j in jobs], [to_literal(v) for v in vectors], model,
                             version)).fetchone()[0]
        if queue == "embedding":
            self.stats.claimed += len(jobs)
            self.stats.stored += stored
        else:
            self.stats.passages_claimed += len(jobs)
            self.stats.passages_stored += stored
        self.stats.batches += 1
        return len(jobs)

    def drain(self, progress=None, refresh_stats: bool = True) -> WorkerStats:
        """Work until the queue has nothing claimable, then refresh term statistics if they are stale."""
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            while True:
                n = self.run_batch(conn)
                if progress is not None:
                    progress(n)
                if n == 0:
                    break
            if refresh_stats:
                self.refresh_stats_if_stale(conn)
        return self.stats

    def refresh_stats_if_stale(self, conn: psycopg.Connection) -> bool:
        if self._call(conn, "select $T.term_stats_stale()", ()).fetchone()[0]:
            self._call(conn, "select * from $T.refresh_term_stats()", ())
            return True
        return False

    def run_forever(self, poll_seconds: float = 5.0, stop=lambda: False) -> None:
        with psycopg.connect(self.conninfo, autocommit=True) as conn, \
                psycopg.connect(self.conninfo, autocommit=True) as listener:
            listener.execute(f'listen "pgrecall_embed_{self.tenant}"')
            while not stop():
                while self.run_batch(conn):
                    if stop():
                        return
                self.refresh_stats_if_stale(conn)
                # Sleep until NOTIFY or the poll interval (expired leases need a poll).
                select.select([listener.fileno()], [], [], poll_seconds)
                for _ in listener.notifies(timeout=0):
                    pass
