"""`pgrecall embeddings rebuild` given flags a careless operator types: each is refused before anything is
switched or queued, or does what it says."""

import pytest

from pgrecall.worker import Worker
from test_install_paths import run_cli
from test_recall import put


@pytest.fixture
def cli_env(conninfo):
    return {"PGRECALL_ADMIN_DSN": conninfo.dsn(user="pgrecall_acme_admin"),
            "PGRECALL_WORKER_DSN": conninfo.dsn(user="pgrecall_acme_worker"),
            "PGRECALL_APP_DSN": conninfo.dsn(user="pgrecall_acme_app"), "PGRECALL_TENANT": "acme"}


def test_a_model_this_install_cannot_run_is_refused_before_the_tenant_is_switched(acme, conninfo, cli_env):
    """`rebuild --model all-minilm-l6-v2` (a wrong case) switched the tenant, then its worker refused the
    name: the tenant stayed on a model nothing embeds with, and recall lost its dense arm."""
    put(acme, "Ana keeps bees on the roof")
    Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker")).drain()
    for name in ("all-minilm-l6-v2", ""):
        proc = run_cli("embeddings", "rebuild", "--model", name, "--quiet", env=cli_env, check=False)
        assert proc.returncode == 2, proc
        assert "not the model this install embeds with (all-MiniLM-L6-v2)" in proc.stderr, proc.stderr
        status = acme.embedding_status()
        assert (status.model, status.current, status.stale, status.queued) == ("all-MiniLM-L6-v2", 1, 0, 0)
    # the model it runs is still accepted
    proc = run_cli("embeddings", "rebuild", "--model", "all-MiniLM-L6-v2", "--quiet", env=cli_env)
    assert "queued 0" in proc.stdout, proc.stdout


def test_a_batch_size_out_of_range_is_refused_before_anything_is_queued(acme, conninfo, cli_env):
    """`rebuild --all --batch-size 0` queued every memory again, then failed at the first claim."""
    put(acme, "Ana keeps bees on the roof")
    Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker")).drain()
    for size in ("0", "-5", "10001", "lots"):
        proc = run_cli("embeddings", "rebuild", "--all", "--batch-size", size, "--quiet", env=cli_env, check=False)
        assert proc.returncode == 2 and "--batch-size" in proc.stderr, proc
        assert acme.embedding_status().queued == 0
    proc = run_cli("worker", "--once", "--batch-size", "0", env=cli_env, check=False)
    assert proc.returncode == 2 and "--batch-size" in proc.stderr, proc


def test_all_beside_a_version_re_embeds_every_memory(acme, conninfo, cli_env):
    """`rebuild --all --input-version 2` on a tenant at version 2 already queued nothing: --all was dropped
    whenever --model or --input-version was given."""
    for text in ("Ana keeps bees on the roof", "Ben repairs bicycles"):
        put(acme, text)
    Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker")).drain()
    proc = run_cli("embeddings", "rebuild", "--all", "--input-version", "2", "--quiet", env=cli_env)
    assert "embedded 2 memories" in proc.stdout, proc.stdout
    proc = run_cli("embeddings", "rebuild", "--all", "--model", "all-MiniLM-L6-v2", "--quiet", env=cli_env)
    assert "embedded 2 memories" in proc.stdout, proc.stdout
    status = acme.embedding_status()
    assert (status.current, status.stale, status.queued) == (2, 0, 0)
