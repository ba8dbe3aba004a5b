"""A user who may see only their own memories (an app with one audience per user): recall searches
those memories exactly and reads each of them no more than it must, however many other users' memories
the tenant holds. Costs are counted as rows read (PostgreSQL's per-transaction table counters), not
timed: a read of the eligible set more than the arms need costs every recall of every user."""

import psycopg
import pytest

from test_plans_stay_probes import read_by
from test_recall import embed_all, embedder  # noqa: F401 (a fixture)

USERS = 20
PER_USER = 60


@pytest.fixture
def per_user(acme, db, conninfo, embedder):
    """Every memory is private to one of USERS peers, and embedded."""
    for u in range(USERS):
        acme.add_peer(f"u{u:02d}", "human")
    n = USERS * PER_USER
    offsets = acme.append_many([{"body": f"note {i} from the user", "source_role": "user", "actor": "ana"}
                                for i in range(n)])
    made = acme.remember_many([{"body": f"user {i % USERS} keeps harbour note number {i} about ships",
                                "evidence": [off], "purposes": ["converse"], "audience": f"u{i % USERS:02d}"}
                               for i, off in enumerate(offsets)])
    assert all(r.created for r in made)
    embed_all(conninfo)
    db.execute("analyze acme.memory")
    db.execute("analyze acme.memory_embedding")


RECALL = ("select (a.meta).dense_method, cardinality(a.items) from acme.recall_answer("
          "%s, array['default'], 'harbour ships note', 'converse', %s::real[], null, 5) a")


def test_a_users_recall_reads_each_of_their_memories_at_most_twice(per_user, conninfo, embedder):
    """Once to learn they are few (their ids, shared by both arms), once for the lexical arm's text; the
    dense arm reads their vectors, and the rows returned are a few probes more. Reading the eligible set
    a third time (the few were counted twice) cost every user's recall ~0.2 ms at 200 memories."""
    [vector] = embedder.embed(["harbour ships note"])
    with psycopg.connect(conninfo.dsn(user="pgrecall_acme_app"), autocommit=True) as app:
        app.execute(RECALL, ("u07", list(map(float, vector)))).fetchall()  # plans made, caches warm
        with app.transaction():
            method, returned = app.execute(RECALL, ("u07", list(map(float, vector)))).fetchone()
        assert (method, returned) == ("exact", 5)
        read = read_by(app, "acme.memory", RECALL, ("u07", list(map(float, vector))))
    assert read <= 2 * PER_USER + 4 * 5, read
