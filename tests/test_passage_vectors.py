"""A turn quoted word for word by a memory borrows the memory's vector (issue #31, migration 0033): one vector
and one HNSW entry for the text, message search answering as before, the turn's own audience deciding who
finds it, and a vector of its own again once the memory's is gone.

Vectors come from the real model through the real worker (the worker role)."""

from __future__ import annotations

import pgrecall
from pgrecall.worker import Worker

MODEL = "all-MiniLM-L6-v2"
TURNS = [
    "I adopted a puppy last week, a golden retriever called Rex",
    "My sister lives in Porto and works as a nurse",
    "The quarterly budget review is scheduled for Thursday",
    "I started learning to play the violin",
    "Our garden needs watering twice a week in July",
    "Ben is severely allergic to peanuts",
]
QUESTIONS = ["Did anyone get a new dog?", "Where does the sister live?", "What instrument is being learnt?",
             "When is the finance meeting?", "What food must Ben avoid?"]


def _worker(conninfo, tenant="acme"):
    return Worker(tenant, conninfo=conninfo.dsn(user=f"pgrecall_{tenant}_worker"))


def _version_1(conninfo, tenant="acme"):
    with pgrecall.connect(conninfo.dsn(user=f"pgrecall_{tenant}_admin"), tenant=tenant) as admin:
        admin.set_embedding_version(MODEL, 1)


def _quoted(mem, texts, **turn):
    """Each text appended as ana's turn and remembered in the same words, citing it."""
    ids = []
    for text in texts:
        offset = mem.append(text, role="user", actor="ana", **turn)
        ids.append(mem.remember(text, evidence=[offset], purposes=["converse"]).memory_id)
    return ids


def _layout(db, tenant="acme"):
    """(own vectors, borrowed vectors, queued passage jobs)."""
    return db.execute(f"select (select count(*) from {tenant}.passage where embedding is not null), "
                      f"(select count(*) from {tenant}.passage where vector_memory_id is not null), "
                      f"(select count(*) from {tenant}.passage_embedding_job)").fetchone()


def _semantic(mem, question, **kw):
    return mem.search_messages(question, mode="semantic", limit=10, **kw)


def test_a_quoted_turn_borrows_its_memorys_vector_and_is_found_by_meaning(acme, db, conninfo):
    _version_1(conninfo)
    _quoted(acme, TURNS)
    stats = _worker(conninfo).drain(refresh_stats=False)
    assert (stats.stored, stats.passages_stored) == (len(TURNS), 0)  # one embedding per text, not two
    assert _layout(db) == (0, len(TURNS), 0)
    assert acme.embedding_status().passages_current == len(TURNS)
    found = _semantic(acme, "Did anyone get a new dog?")
    assert found.meta.semantic and found.items[0].body == TURNS[0]
    # the cosine is the one the memory's recall sees for the same text
    recalled = acme.recall("Did anyone get a new dog?", mode="dense", limit=1).items[0]
    assert recalled.body == TURNS[0]
    assert abs(found.items[0].cosine - recalled.cosine) < 1e-6


def test_after_the_quoting_memory_is_forgotten_the_turn_gets_its_own_vector_and_is_still_found(acme, db, conninfo):
    _version_1(conninfo)
    ids = _quoted(acme, TURNS)
    _worker(conninfo).drain(refresh_stats=False)
    before = [(q, [h.body for h in _semantic(acme, q).items]) for q in QUESTIONS]
    acme.forget(ids[0], reason="ana asked")
    assert _layout(db) == (0, len(TURNS) - 1, 1)  # the loan ended with the vector; the turn is queued
    stats = _worker(conninfo).drain(refresh_stats=False)
    assert stats.passages_stored == 1
    assert _layout(db) == (1, len(TURNS) - 1, 0)
    assert _semantic(acme, "Did anyone get a new dog?").items[0].body == TURNS[0]
    assert [(q, [h.body for h in _semantic(acme, q).items]) for q in QUESTIONS] == before


def test_a_corrected_memory_takes_its_vector_back_and_the_turn_keeps_its_words(acme, db, conninfo):
    _version_1(conninfo)
    ids = _quoted(acme, TURNS[:2])
    _worker(conninfo).drain(refresh_stats=False)
    acme.correct(ids[1], "Ana's sister moved from Porto to Lisbon", revision=1)
    _worker(conninfo).drain(refresh_stats=False)
    # the memory now says something else: the turn has a vector of its own words, the memory of its new ones
    assert _layout(db) == (1, 1, 0)
    own = db.execute("select body from acme.passage where embedding is not null").fetchone()[0]
    assert own == TURNS[1]
    assert _semantic(acme, "Where does the sister live?").items[0].body == TURNS[1]


def test_a_private_turn_never_shows_for_another_principal_through_the_vector_it_borrows(acme, db, conninfo):
    _version_1(conninfo)
    secret = "Keep the surprise party for Ben a secret"
    offset = acme.append(secret, role="user", actor="ana", audience=["ana", "bot"])
    # the memory reaches everyone (with a reason): its vector may be lent, its audience is not
    acme.remember(secret, evidence=[offset], purposes=["converse"], widening_reason="the plan is shared now")
    _quoted(acme, TURNS)
    _worker(conninfo).drain(refresh_stats=False)
    assert _layout(db) == (0, len(TURNS) + 1, 0)
    assert secret in [h.body for h in _semantic(acme, "surprise party", principal="ana").items]
    for principal in ("ben", "bot"):
        seen = [h.body for h in _semantic(acme, "surprise party", principal=principal).items]
        assert (secret in seen) == (principal == "bot")
        # the other turns, borrowing the same way, are ben's to find
        assert _semantic(acme, "Did anyone get a new dog?", principal=principal).items[0].body == TURNS[0]
    # the memory itself may reach ben: only the turn is private
    assert secret in [i.body for i in acme.recall("surprise party", principal="ben").items]


def test_a_tenant_upgraded_from_0032_lends_without_re_embedding_and_answers_the_same(db, conninfo):
    db.execute("select pgrecall.create_tenant('lender')")
    mem = pgrecall.connect(conninfo.dsn(user="pgrecall_lender_app"), tenant="lender", principal="bot",
                           scopes=["default"])
    mem.add_scope("default")
    mem.add_peer("ana", "human")
    mem.add_peer("bot", "agent")
    _version_1(conninfo, "lender")
    _quoted(mem, TURNS)
    mem.append("Unquoted: the bakery on the corner closes at noon on Sundays", role="user", actor="ana")
    _worker(conninfo, "lender").drain(refresh_stats=False)
    # what 0032 stored: every passage with its own vector (the memory's, the same text), no lender column
    db.execute("update lender.passage p set embedding = me.embedding, embedding_model = me.model, "
               "embedding_input_version = me.input_version, embedded_at = me.embedded_at, vector_memory_id = null "
               "from lender.memory_embedding me where me.memory_id = p.vector_memory_id")
    assert _layout(db, "lender") == (len(TURNS) + 1, 0, 0)
    answers = _answers(mem)
    db.execute("alter table lender.passage drop column vector_memory_id")
    db.execute("delete from lender.schema_migration where version = 33")
    embedded_at = db.execute("select memory_id, embedded_at from lender.memory_embedding order by 1").fetchall()

    applied = [tuple(r) for r in db.execute("select * from pgrecall.upgrade_tenant('lender')").fetchall()]
    assert ("migration", "0033_passage_borrows_memory_vector.sql") in applied
    assert _layout(db, "lender") == (1, len(TURNS), 0)  # the unquoted turn keeps its own
    assert db.execute("select memory_id, embedded_at from lender.memory_embedding order by 1").fetchall() == embedded_at
    assert db.execute("select count(*) from lender.embedding_job").fetchone()[0] == 0
    assert _answers(mem) == answers
    mem.close()


def _answers(mem):
    """Message search (semantic and hybrid) and recall (dense and hybrid): the top 10 of each question."""
    return ({(q, mode): [(h.passage_id, round(h.cosine or 0, 4)) for h in mem.search_messages(q, mode=mode).items]
             for q in QUESTIONS for mode in ("semantic", "hybrid")},
            {(q, mode): [i.memory_id for i in mem.recall(q, mode=mode, limit=10).items]
             for q in QUESTIONS for mode in ("dense", "hybrid")})


def test_borrowed_vectors_answer_alike_exact_and_through_the_memories_hnsw_index(acme, db, conninfo):
    _version_1(conninfo)
    _quoted(acme, TURNS)
    acme.append("Unquoted: the bakery on the corner closes at noon on Sundays", role="user", actor="ana")
    _worker(conninfo).drain(refresh_stats=False)
    assert _layout(db) == (1, len(TURNS), 0)  # both kinds of vector in one search
    exact = {q: _semantic(acme, q) for q in QUESTIONS + ["When is the bakery open?"]}
    db.execute("select pgrecall.set_tenant_setting('acme', 'exact_dense_below', '1')")
    hnsw = {q: _semantic(acme, q) for q in exact}
    assert {(e.meta.semantic_method, hnsw[q].meta.semantic_method) for q, e in exact.items()} == {("exact", "hnsw")}
    assert {q: [(h.body, round(h.cosine, 5)) for h in found.items] for q, found in hnsw.items()} == \
        {q: [(h.body, round(h.cosine, 5)) for h in found.items] for q, found in exact.items()}
    assert hnsw["When is the bakery open?"].items[0].body.startswith("Unquoted")
