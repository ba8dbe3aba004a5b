"""Issue #52, item 1: ONNX Runtime is the default runtime of the default model. Its vectors are torch's (within
cosine 0.9999 on a fixed set), so stored vectors stay current under the same model name; the ONNX file is made
once from the packaged weights into a cache, and a truncated or corrupt cached file is made again, never loaded.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest

from pgrecall import embedder, onnx_model

TEXTS = [
    "I live in Lisbon",
    "We moved to Porto last spring, and the flat is near the river.",
    "Shall we cook a mushroom risotto on Friday?",
    "Ana is allergic to peanuts; never suggest satay.",
    "x",
    "",
    "Ünïcödé: Émile a déménagé à Zürich — 東京 にも住んでいた",
    "What did Caroline research about adoption agencies in 2023?",
    "word " * 400,  # past the model's 256 tokens: truncated, as sentence-transformers truncates
] + [f"memory number {i} about the harbour and the boats" for i in range(70)]  # more than one batch of 64


def test_onnx_vectors_agree_with_torchs_within_cosine_0_9999():
    onnx = embedder.Embedder(runtime="onnx").encode_array(TEXTS)
    torch = embedder.Embedder(runtime="torch").encode_array(TEXTS)
    assert onnx.shape == torch.shape == (len(TEXTS), embedder.DIMENSIONS)
    cosines = (onnx * torch).sum(axis=1)
    assert cosines.min() >= 0.9999, (float(cosines.min()), TEXTS[int(cosines.argmin())][:60])
    assert np.allclose(np.linalg.norm(onnx, axis=1), 1.0, atol=1e-5)
    # the one-text path (a query, on one thread) gives the same vector as the batch
    [alone] = embedder.Embedder(runtime="onnx").encode_array([TEXTS[1]])
    assert float(alone @ torch[1]) >= 0.9999


def test_onnx_is_the_default_and_keeps_the_models_name(monkeypatch):
    monkeypatch.delenv(embedder.RUNTIME_VARIABLE, raising=False)
    model = embedder.Embedder()
    assert (model.runtime, model.name) == ("onnx", "all-MiniLM-L6-v2")
    with pytest.raises(embedder.InvalidSetting, match="onnx or torch"):
        embedder.Embedder(runtime="tensorflow")


def test_a_truncated_or_corrupt_cached_file_is_made_again_never_loaded(tmp_path, monkeypatch):
    monkeypatch.setenv(onnx_model.CACHE_VARIABLE, str(tmp_path))
    first = onnx_model.onnx_file()  # made here, from the packaged weights
    size = first.stat().st_size
    good = embedder.Embedder(runtime="onnx").encode_array(TEXTS[:3])

    with open(first, "r+b") as f:  # truncated, as an interrupted copy leaves it
        f.truncate(size // 2)
    assert not onnx_model._intact(first)
    assert onnx_model.onnx_file() == first and first.stat().st_size == size
    assert np.allclose(embedder.Embedder(runtime="onnx").encode_array(TEXTS[:3]), good, atol=1e-6)

    with open(first, "r+b") as f:  # the same size, one byte flipped in the middle
        f.seek(size // 2)
        byte = f.read(1)
        f.seek(size // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    assert not onnx_model._intact(first)
    remade = onnx_model.onnx_file()
    assert onnx_model._intact(remade)
    assert np.allclose(embedder.Embedder(runtime="onnx").encode_array(TEXTS[:3]), good, atol=1e-6)


def test_a_process_with_the_cache_made_embeds_without_importing_torch():
    onnx_model.onnx_file()  # made (or found) before the process starts
    code = ("import sys, time; t = time.perf_counter(); from pgrecall.embedder import Embedder; "
            "Embedder(runtime='onnx').embed(['hello']); print(time.perf_counter() - t); "
            "print('torch' in sys.modules, 'sentence_transformers' in sys.modules)")
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, embedder.RUNTIME_VARIABLE: "onnx"})
    assert done.returncode == 0, done.stderr
    seconds, imported = done.stdout.strip().splitlines()
    assert imported == "False False", "the ONNX runtime imported torch or sentence-transformers"
    assert float(seconds) < time.perf_counter() - started  # measured inside the process, reported for the note


def test_the_onnx_file_is_built_and_run_where_torch_cannot_be_imported(tmp_path):
    """Issue #52, item 4: make run installs no torch, sentence-transformers or transformers. With those imports
    made to fail, a process builds the ONNX file from the packaged weights (a fresh cache), embeds with it, and
    the torch runtime says what to install."""
    code = ("import sys\n"
            "for name in ('torch', 'transformers', 'sentence_transformers'): sys.modules[name] = None\n"
            "import numpy as np\n"
            "from pgrecall import embedder, onnx_model\n"
            "path = onnx_model.onnx_file()\n"
            "vectors = embedder.Embedder(runtime='onnx').encode_array(['I live in Lisbon', 'x'])\n"
            "np.save(sys.argv[1], vectors)\n"
            "print(path.name, onnx_model._intact(path))\n"
            "try:\n"
            "    embedder.Embedder(runtime='torch')\n"
            "except embedder.ModelUnavailable as exc:\n"
            "    print(exc)\n")
    out = tmp_path / "vectors.npy"
    done = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, onnx_model.CACHE_VARIABLE: str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    built, unavailable = done.stdout.strip().splitlines()
    assert built.endswith(f"-g{onnx_model.GRAPH_VERSION}.onnx True")
    assert "torch==2.13.0" in unavailable and "pgrecall[embed]" in unavailable, unavailable
    torch = embedder.Embedder(runtime="torch").encode_array(["I live in Lisbon", "x"])
    assert (np.load(out) * torch).sum(axis=1).min() >= 0.9999
