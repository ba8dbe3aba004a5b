"""One vector where one serves (issue #31, migration 0030): under input version 1 a memory's recall vector is
the vector of its own text, so it is stored once; duplicate proposals read it there. A tenant upgraded from
0029 sheds the second copy without re-embedding and recalls the same top 10.

Vectors come from the real model through the real worker (the worker role)."""

from __future__ import annotations

import pgrecall
from pgrecall.worker import Worker

MODEL = "all-MiniLM-L6-v2"
TEXTS = [
    "Ben is severely allergic to peanuts",
    "Ana works night shifts as a nurse at the city hospital",
    "Ben has a severe peanut allergy",
    "The team meets on Tuesdays to plan the garden",
    "Ana's sister lives in Lisbon and visits every summer",
    "Ben's favourite film is an old western",
    "The garden needs watering twice a week in July",
    "Ana adopted a grey cat called Pebble",
    "Ben plays the trumpet in a brass band",
    "The hospital moved Ana to the children's ward",
    "Ben wants to visit Lisbon next spring",
    "Pebble the cat sleeps on the piano",
]
QUESTIONS = ["What is Ben allergic to?", "Where does Ana's sister live?", "Tell me about the cat",
             "When does the garden need water?", "What instrument does Ben play?"]


def _tenant(db, conninfo, name):
    """A tenant holding TEXTS as memories of peer ana, embedded by the
    worker under input version 1."""
    db.execute("select pgrecall.create_tenant(%s)", (name,))
    mem = pgrecall.connect(conninfo.dsn(user=f"pgrecall_{name}_app"), tenant=name, principal="bot",
                           scopes=["default"])
    mem.add_scope("default")
    mem.add_peer("ana", "human")
    mem.add_peer("bot", "agent")
    with pgrecall.connect(conninfo.dsn(user=f"pgrecall_{name}_admin"), tenant=name) as admin:
        admin.set_embedding_version(MODEL, 1)
    for text in TEXTS:
        offset = mem.append(text, role="user", actor="ana")
        mem.remember(text, evidence=[offset], purposes=["converse"])
    Worker(name, conninfo=conninfo.dsn(user=f"pgrecall_{name}_worker")).drain()
    return mem


def _answers(mem):
    return {(q, mode): [i.memory_id for i in mem.recall(q, mode=mode, limit=10).items]
            for q in QUESTIONS for mode in ("dense", "hybrid")}


def _pairs(mem):
    return [(p.a.id, p.b.id, round(p.cosine, 6)) for p in mem.duplicate_proposals().pairs]


def _vectors(db, tenant):
    return db.execute(f"select count(*), count(text_embedding), sum(pg_column_size(text_embedding)), "
                      f"sum(pg_column_size(embedding)) from {tenant}.memory_embedding").fetchone()


def test_under_input_version_1_a_memory_stores_one_vector_and_duplicates_still_pair(db, conninfo):
    mem = _tenant(db, conninfo, "onevec")
    assert _vectors(db, "onevec")[:2] == (len(TEXTS), 0)
    peanuts = [m for m, in db.execute("select id from onevec.memory where body like '%%peanut%%' order by id")]
    pairs = _pairs(mem)
    assert [(a, b) for a, b, _ in pairs] == [tuple(peanuts)]
    assert 0.8 <= pairs[0][2] < 1
    # A decision shows the reviewer the same cosine the proposal did, read from the one vector.
    mem.decide_duplicate(peanuts[0], peanuts[1], "distinct", reason="two ways of saying it, both kept",
                         revision_a=1, revision_b=1)
    shown = db.execute("select cosine from onevec.duplicate_decision").fetchone()[0]
    assert abs(shown - pairs[0][2]) < 1e-4
    mem.close()


def test_under_input_version_2_the_own_text_vector_is_still_kept(acme, conninfo, db):
    for text in TEXTS[:3]:
        acme.remember(text, evidence=[acme.append(text, role="user", actor="ana")], purposes=["converse"])
    Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker")).drain()
    # each memory's input carries the turns around it, so its own text needs a vector of its own
    assert _vectors(db, "acme")[:2] == (3, 3)


def test_a_tenant_upgraded_from_0029_drops_the_copy_and_recalls_the_same_top_10(db, conninfo):
    # A tenant at 0029 runs no functions until upgraded (they are written against the latest schema), so the
    # tenant is built current and put back to what 0029 stored: 0030 changes rows and a comment, no table.
    mem = _tenant(db, conninfo, "older")
    db.execute("update older.memory_embedding set text_embedding = embedding")  # 0029's worker: the copy
    db.execute("delete from older.schema_migration where version = 30")
    count, copies, copy_bytes, vector_bytes = _vectors(db, "older")
    assert (count, copies, copy_bytes) == (len(TEXTS), len(TEXTS), vector_bytes)
    recalled, pairs = _answers(mem), _pairs(mem)
    assert pairs  # the peanut pair, compared on the copies
    embedded_at = db.execute("select memory_id, embedded_at from older.memory_embedding order by 1").fetchall()

    applied = db.execute("select * from pgrecall.upgrade_tenant('older')").fetchall()
    assert ("migration", "0030_one_vector_where_one_serves.sql") in [tuple(r) for r in applied]
    assert _vectors(db, "older")[:2] == (len(TEXTS), 0)
    # nothing re-embedded: the same rows, the same stamps, no job queued
    assert db.execute("select memory_id, embedded_at from older.memory_embedding order by 1").fetchall() == embedded_at
    assert db.execute("select count(*) from older.embedding_job").fetchone()[0] == 0
    assert _answers(mem) == recalled
    assert _pairs(mem) == pairs
    mem.close()
