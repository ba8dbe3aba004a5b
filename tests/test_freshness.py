"""Freshness: the log watermark, embeddings current to an offset, and waiting for them."""

import threading

from conftest import wait_until
from pgrecall.driver import Freshness
from pgrecall.worker import Worker


def test_embeddings_freshness_follows_the_worker(acme, conninfo, db):
    o1 = acme.append("first", role="user", actor="ana")
    acme.remember("Ana said something first", evidence=[o1], purposes=["converse"])
    o2 = acme.append("second", role="user", actor="ana")
    assert acme.freshness() == Freshness(scope="default", log_watermark=2, embeddings_current_to=0, embedding_jobs=1)
    assert acme.wait_for(o2, projection="log", timeout=0.1)
    assert not acme.wait_for(o1, timeout=0.2)
    worker = Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker"))

    def drain_once_waiting():
        # The worker stores the embedding only once wait_for is waiting for it.
        wait_until(lambda: db.execute("select exists (select 1 from pg_stat_activity where datname = current_database() "
                                      "and state = 'active' and query like '%wait_for%' and pid <> pg_backend_pid())")
                   .fetchone()[0], what="wait_for to be waiting")
        worker.drain()

    t = threading.Thread(target=drain_once_waiting)
    t.start()
    try:
        assert acme.wait_for(o2, timeout=60)  # returns once the worker has stored the embedding
    finally:
        t.join()
    assert acme.freshness().embeddings_current_to == 2
