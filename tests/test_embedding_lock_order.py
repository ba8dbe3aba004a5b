"""Two workers storing vectors at once: one a memory's (which lends it to the turn that memory quotes word for
word, passage_vectors.sql), the other that turn's passage's own. Both write the passage and its queue row;
taken in opposite orders (the memory's path: passage, then job; the passage's path: job, then passage) the
two deadlocked, and one worker's batch was lost to a retry."""

from __future__ import annotations

import random
import threading

import psycopg
import pytest

from pgrecall import embedder as embedder_module
from test_passage_vectors import MODEL, _version_1

ROUNDS = 60


def _vector(values) -> str:
    return "[" + ",".join(f"{float(x):.7f}" for x in values) + "]"


@pytest.mark.slow
def test_a_memory_vector_and_its_turns_passage_vector_stored_at_once_never_deadlock(acme, db, conninfo):
    _version_1(conninfo)
    model = embedder_module.default_embedder()
    dsn = conninfo.dsn(user="pgrecall_acme_worker")
    deadlocks, stored = [], [0, 0]
    with psycopg.connect(dsn, autocommit=True) as w1, psycopg.connect(dsn, autocommit=True) as w2:
        for round_ in range(ROUNDS):
            texts = [f"round {round_}: item {i} is kept word for word" for i in range(8)]
            for text in texts:
                offset = acme.append(text, role="user", actor="ana")
                acme.remember(text, evidence=[offset], purposes=["converse"])
            memories = w1.execute("select memory_id, generation, input from acme.claim_embedding_jobs('w1', 100)"
                                  ).fetchall()
            passages = w2.execute("select passage_id, generation, input from "
                                  "acme.claim_passage_embedding_jobs('w2', 100)").fetchall()
            assert memories and passages
            vectors = dict(zip(texts, model.embed(texts)))
            mem_args = ("w1", [m[0] for m in memories], [m[1] for m in memories],
                        [_vector(vectors.get(m[2], vectors[texts[0]])) for m in memories], MODEL, 1)
            pas_args = ("w2", [p[0] for p in passages], [p[1] for p in passages],
                        [_vector(vectors.get(p[2], vectors[texts[0]])) for p in passages], MODEL, 1)
            start = threading.Barrier(2)

            def run(conn, sql, args, slot, delay, start=start):
                start.wait()
                threading.Event().wait(delay)
                try:
                    stored[slot] += conn.execute(sql, args).fetchone()[0]
                except psycopg.errors.DeadlockDetected as e:
                    deadlocks.append(str(e).splitlines()[0])

            delay = random.uniform(0, 0.03)
            threads = [threading.Thread(target=run, args=(w1, "select acme.complete_embedding_jobs(%s, %s, %s, %s, %s, %s)",
                                                          mem_args, 0, 0.0)),
                       threading.Thread(target=run, args=(w2, "select acme.complete_passage_embedding_jobs(%s, %s, %s, "
                                                              "%s, %s, %s)", pas_args, 1, delay))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    assert deadlocks == []
    assert stored[0] == 8 * ROUNDS
