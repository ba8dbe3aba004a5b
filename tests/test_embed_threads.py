"""The model's threads are a setting (#31 item 4): torch's default of every core starves, and is starved by, the
PostgreSQL the worker feeds on a small machine (bench/worker_threads.py measures texts/s idle and busy)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from pgrecall import cli, errors
from pgrecall.embedder import THREADS_VARIABLE, embed_threads, get_embedder
from pgrecall.worker import Worker


def test_the_default_leaves_half_the_cores_to_the_server(monkeypatch):
    monkeypatch.delenv(THREADS_VARIABLE, raising=False)
    assert embed_threads() == max(1, (os.cpu_count() or 1) // 2)
    monkeypatch.setenv(THREADS_VARIABLE, "3")
    assert embed_threads() == 3


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5", "100000"])
def test_a_bad_thread_count_is_refused_naming_the_setting(monkeypatch, value):
    monkeypatch.setenv(THREADS_VARIABLE, value)
    with pytest.raises(errors.InvalidSetting) as refused:
        embed_threads()
    assert repr(value) in str(refused.value) and THREADS_VARIABLE in refused.value.hint


def test_the_worker_command_refuses_a_bad_thread_count_before_it_connects(capsys):
    with pytest.raises(SystemExit) as usage:  # argparse: exit 2, before any server starts or model loads
        cli.main(["worker", "--tenant", "acme", "--once", "--threads", "0"])
    err = capsys.readouterr().err
    assert usage.value.code == 2, err
    assert "argument --threads: the model's threads must be a whole number from 1 to" in err


def test_vectors_do_not_depend_on_the_thread_count():
    embedder = get_embedder()
    texts = [f"Ana told Ben about the lighthouse in Porto, visit {i}" for i in range(12)]
    before = embedder.threads
    try:
        embedder.threads = 1
        one = np.array(embedder.embed(texts))
        embedder.threads = 2
        two = np.array(embedder.embed(texts))
    finally:
        embedder.threads = before
    assert np.allclose(one, two, atol=1e-5)


def test_a_custom_embedder_keeps_its_own_threads():
    class Fixed:
        name = "fixed"

        def embed(self, texts):
            return [[1.0] + [0.0] * 383 for _ in texts]

    with pytest.raises(errors.InvalidSetting, match="custom embedder"):
        Worker("acme", conninfo="dbname=none", embedder=Fixed(), threads=1)
