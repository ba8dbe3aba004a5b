"""Freshness: the log watermark, embeddings current to an offset, and waiting for them."""

import threading
import time

from pgrecall.driver import Freshness
from pgrecall.worker import Worker


def test_embeddings_freshness_follows_the_worker(acme, conninfo):
    o1 = acme.append("first", role="user", actor="ana")
    acme.remember("Ana said something first", evidence=[o1], purposes=["converse"])
    o2 = acme.append("second", role="user", actor="ana")
    assert acme.freshness() == Freshness(scope="default", log_watermark=2, embeddings_current_to=0, embedding_jobs=1)
    assert acme.wait_for(o2, projection="log", timeout=0.1)
    assert not acme.wait_for(o1, timeout=0.2)
    worker = Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker"))
    t = threading.Thread(target=lambda: (time.sleep(0.5), worker.drain()))
    t.start()
    try:
        assert acme.wait_for(o2, timeout=60)  # returns once the worker has stored the embedding
    finally:
        t.join()
    assert acme.freshness().embeddings_current_to == 2
