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

``Worker(tenant, embedder=...)`` takes any object with a ``name`` and
``embed(texts)`` (default: the local all-MiniLM-L6-v2); the tenant's
``embedding_model`` setting must name it. Vectors go to the database in binary
through pgvector's registered type.
"""

from __future__ import annotations

import os
import socket
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import psycopg

from . import db, errors, loop, names
from .driver import _generated, configure
from .driver._calls import Handle
from .driver._run import SyncRunner, _closed_by_server
from .driver.embeddings import EmbeddingJob, MemoryEmbeddingJob, Queue, claim_jobs, complete_jobs, release_jobs
from .embedder import DIMENSIONS, Embedder, TextEmbedder, default_embedder, embed_threads

T = TypeVar("T")
QUEUES: tuple[Queue, ...] = ("embedding", "passage_embedding")


@dataclass
class WorkerStats:
    claimed: int = 0
    stored: int = 0
    batches: int = 0
    passages_claimed: int = 0
    passages_stored: int = 0
    embed_seconds: float = 0.0


@dataclass(frozen=True)
class Embedded:
    """A batch's vectors: of each job's input, and (memory jobs) of each memory's own text."""

    inputs: npt.NDArray[np.float32]
    texts: npt.NDArray[np.float32] | None


class Worker:
    def __init__(self, tenant: str, *, conninfo: str | None = None, batch_size: int = 64, name: str | None = None,
                 embedder: TextEmbedder | None = None, threads: int | None = None) -> None:
        self.tenant = names.check_tenant_name(tenant)
        self.conninfo = conninfo or db.tenant_conninfo(tenant, "worker")
        self.batch_size = batch_size
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.stats = WorkerStats()
        self.embedder: TextEmbedder = embedder if embedder is not None else default_embedder()
        if threads is not None:  # the local model's threads (default: PGRECALL_EMBED_THREADS, else half the cores)
            if not isinstance(self.embedder, Embedder):
                raise errors.InvalidSetting("threads= sets the local model's threads; a custom embedder has its own")
            self.embedder.threads = embed_threads(str(threads))
        self._handle = Handle(self.tenant, None, None, self.embedder)
        # drain()'s connection, kept from one drain to the next: a new backend costs its login, the lease
        # holder it registers at its first claim and the plans of every statement made again (15-30 ms a
        # drain of a 500-item batch). Closed by close(), or when the worker is collected.
        self._kept: list[psycopg.Connection[Any]] = []
        weakref.finalize(self, _close_kept, self._kept)

    def _connect(self) -> psycopg.Connection[Any]:
        conn = psycopg.connect(self.conninfo, autocommit=True)
        configure(conn)
        return conn

    def _drain_connection(self) -> psycopg.Connection[Any]:
        """The connection the last drain used, or a new one if there is none or the server closed it since
        (a restart, a terminated backend, an idle timeout): nothing was sent on it, so nothing runs twice."""
        if self._kept and _closed_by_server(self._kept[0]):
            self.close()
        if not self._kept:
            self._kept.append(self._connect())
        return self._kept[0]

    def close(self) -> None:
        """Close the connection drain() keeps between drains (a later drain opens a new one)."""
        _close_kept(self._kept)

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run_queues(self, conn: psycopg.Connection[Any], progress: Callable[[int], object] | None = None,
                   stop: Callable[[], bool] = lambda: False) -> int:
        """Work both queues until nothing is claimable; returns how many jobs were done.

        The database work runs on a second thread while the model embeds: the next batch is claimed,
        and the previous one stored, during this one's embedding (the model would otherwise wait for
        every round trip, and for the HNSW inserts). ``conn`` is used by that thread only.
        """
        if not conn.adapters.types.get("vector"):
            configure(conn)
        runner = SyncRunner(self.tenant, conn=conn)
        done = 0
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="pgrecall-worker-db") as db_thread:
            def on_db(fn: Callable[..., T], *args: Any) -> Future[T]:
                return db_thread.submit(fn, runner, *args)

            for queue in QUEUES:
                jobs = on_db(self._claim, queue).result()
                stored: Future[int] | None = None
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

    def _claim(self, runner: SyncRunner, queue: Queue) -> list[EmbeddingJob]:
        return runner.run(claim_jobs(self._handle, queue, self.name, self.batch_size))

    def _release(self, runner: SyncRunner, queue: Queue, jobs: list[EmbeddingJob]) -> None:
        if jobs:
            runner.run(release_jobs(self._handle, queue, self.name, [j.id for j in jobs]))

    def _embed(self, jobs: list[EmbeddingJob]) -> Embedded:
        if jobs[0].model != self.embedder.name:
            raise errors.ModelMismatch(
                f"tenant {self.tenant} embeds with {jobs[0].model!r}, this worker runs {self.embedder.name!r}",
                hint="Run a worker with that model, or switch back: pgrecall embeddings rebuild --model "
                     f"{self.embedder.name}")
        started = time.perf_counter()
        texts = [j.input for j in jobs]
        # A memory job also carries the memory's own text (what duplicate proposals compare). Under input
        # version 1 that is the input itself and the tenant keeps one vector (migration 0030): none is sent.
        # Otherwise each distinct text is embedded once.
        own_texts = [j.text_input for j in jobs if isinstance(j, MemoryEmbeddingJob) and j.input_version != 1]
        unique = list(dict.fromkeys(texts + own_texts))
        vectors = np.asarray(self.embedder.embed(unique), dtype=np.float32)
        self.stats.embed_seconds += time.perf_counter() - started
        if vectors.shape != (len(unique), DIMENSIONS) or not bool(np.isfinite(vectors).all()):
            raise errors.ModelMismatch(
                f"embedder {self.embedder.name!r} returned an array of shape {vectors.shape} for {len(unique)} texts "
                f"(or numbers that are not finite); the tenant stores {DIMENSIONS} finite numbers per text",
                hint="An embedder returns one unit-length vector per text, of the tenant's dimensions.")
        row = {text: i for i, text in enumerate(unique)}
        return Embedded(vectors[[row[t] for t in texts]],
                        vectors[[row[t] for t in own_texts]] if own_texts else None)

    def _store(self, runner: SyncRunner, queue: Queue, jobs: list[EmbeddingJob], embedded: Embedded) -> int:
        stored = runner.run(complete_jobs(self._handle, queue, self.name, jobs, embedded.inputs, embedded.texts))
        if queue == "embedding":
            self.stats.claimed += len(jobs)
            self.stats.stored += stored
        else:
            self.stats.passages_claimed += len(jobs)
            self.stats.passages_stored += stored
        self.stats.batches += 1
        return stored

    def drain(self, progress: Callable[[int], object] | None = None, refresh_stats: bool = True) -> WorkerStats:
        """Work until the queues have nothing claimable, then refresh term statistics if they are stale.

        One connection serves this worker's drains, one after another (close() ends it)."""
        conn = self._drain_connection()
        try:
            self.run_queues(conn, progress)
            if refresh_stats:
                self.refresh_stats_if_stale(conn)
        except BaseException:
            # A drain that fails holds nothing afterwards: its session ends, and its leases with it.
            self.close()
            raise
        return self.stats

    def refresh_stats_if_stale(self, conn: psycopg.Connection[Any]) -> bool:
        runner = SyncRunner(self.tenant, conn=conn)
        if runner.run(_generated.term_stats_stale(self._handle)):
            runner.run(_generated.refresh_term_stats(self._handle))
            return True
        return False

    def run_forever(self, poll_seconds: float = 5.0, stop: Callable[[], bool] = lambda: False) -> None:
        """Embed as work comes (NOTIFY wakes it; ended leases need the poll), refreshing stale statistics
        between rounds. A lost connection is retried with backoff (pgrecall.loop); a permanent error, such
        as a tenant that embeds with another model, stops it."""
        loop.run(self.conninfo, self.tenant, "embed", lambda conn: self.run_queues(conn, stop=stop),
                 poll_seconds=poll_seconds, stop=stop, between=self.refresh_stats_if_stale)


def _close_kept(kept: list[psycopg.Connection[Any]]) -> None:
    while kept:
        kept.pop().close()
