"""Embeddings, a derived index: their status, rebuilds and model switches (admin role), and the two job
queues the worker (pgrecall.worker) claims, completes and releases.

Vectors are sent as pgvector's type, in binary (the connection registers it, see ``_run.configure``); the
tenant functions take them as text[] and cast them back to vector[], so the statement casts vector[] to
text[] on the server rather than Python formatting 384 numbers per vector.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ._calls import AS_HALFVEC, Call, Cast, Handle, rows
from ._calls import value as single_value
from ._generated import EmbeddingStatus as EmbeddingStatus  # re-exported
from ._generated import PassageEmbeddingChoice as PassageEmbeddingChoice  # re-exported

Queue = Literal["embedding", "passage_embedding"]
_ID = {"embedding": "memory_id", "passage_embedding": "passage_id"}


@dataclass(frozen=True)
class EmbeddingJob:
    """A leased job: the memory's (or passage's) id, the generation it was queued at, the text to embed, and
    the model and input version the tenant expects."""

    id: int
    generation: int
    input: str
    model: str
    input_version: int


@dataclass(frozen=True)
class MemoryEmbeddingJob(EmbeddingJob):
    """A memory's job also carries the memory's own text, whose vector duplicate proposals compare (under input
    version 1 it is the input itself)."""

    text_input: str


_JOB: dict[Queue, type[EmbeddingJob]] = {"embedding": MemoryEmbeddingJob, "passage_embedding": EmbeddingJob}


def claim_jobs(h: Handle, queue: Queue, worker: str, limit: int) -> Call[list[EmbeddingJob]]:
    """Lease up to ``limit`` jobs of one queue (worker role); a memory's are :class:`MemoryEmbeddingJob`."""
    return rows(f"claim_{queue}_jobs", {"worker": worker, "limit": limit}, _JOB[queue],
                renamed={"id": _ID[queue]})


def complete_jobs(h: Handle, queue: Queue, worker: str, jobs: Sequence[EmbeddingJob],
                  vectors: npt.NDArray[np.float32], text_vectors: npt.NDArray[np.float32] | None = None) -> Call[int]:
    """Store one vector per job, all made with the jobs' model and input version (worker role), and for memory
    jobs the vectors of their own texts (``text_vectors``, in the same order). A job re-queued meanwhile
    (re-worded, lease lost, model switched) drops its vectors. Returns how many were stored."""
    args: dict[str, Any] = {
        "worker": worker, _ID[queue] + "s": [j.id for j in jobs], "generations": [j.generation for j in jobs],
        "embeddings": Cast(list(vectors), AS_HALFVEC), "model": jobs[0].model, "input_version": jobs[0].input_version,
    }
    if text_vectors is not None:
        args["text_embeddings"] = Cast(list(text_vectors), AS_HALFVEC)
    return single_value(f"complete_{queue}_jobs", args, int)


def release_jobs(h: Handle, queue: Queue, worker: str, ids: Sequence[int]) -> Call[int]:
    """Give leased jobs back (worker role), e.g. when stopping with a batch claimed."""
    return single_value(f"release_{queue}_jobs", {"worker": worker, _ID[queue] + "s": list(ids)}, int)
