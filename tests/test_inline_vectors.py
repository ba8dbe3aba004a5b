"""A caller who has the vector gives it (issue #46 item 2): remember / remember_many write the memory and its
vector in one call, stamped with the model and input version that made it, and nothing is queued. A vector
of the wrong dimensions (PR154) or stamp (PR155) is refused with nothing written; the worker never replaces
a vector a caller wrote, nor stores one of a stamp the tenant has left.

Real PostgreSQL, the real model (in this process) and the real worker."""

from __future__ import annotations

import re
import threading

import numpy as np
import psycopg
import pytest

import pgrecall
from pgrecall import errors
from pgrecall.embedder import get_embedder
from pgrecall.worker import Worker

MODEL = "all-MiniLM-L6-v2"


def _tenant(db, conninfo, name, version=1, embedder=None):
    db.execute("select pgrecall.create_tenant(%s)", (name,))
    mem = pgrecall.connect(conninfo.dsn(user=f"pgrecall_{name}_app"), tenant=name, principal="bot",
                           scopes=["default"], embedder=embedder)
    mem.add_scope("default")
    mem.add_peer("ana", "human")
    mem.add_peer("bot", "agent")
    with pgrecall.connect(conninfo.dsn(user=f"pgrecall_{name}_admin"), tenant=name, role="admin") as admin:
        admin.set_embedding_version(MODEL, version)
    return mem


def _turns(mem, texts):
    return mem.append_many([{"body": t, "source_role": "user", "actor": "ana"} for t in texts])


def _items(texts, offsets):
    return [{"body": t, "evidence": [o], "purposes": ["converse"]} for t, o in zip(texts, offsets)]


def _stored(db, tenant, ids):
    """Each memory's stored vector (float32, from halfvec), model and input version."""
    rows = db.execute(f"select memory_id, embedding::text, model, input_version from {tenant}.memory_embedding "
                      "where memory_id = any(%s)", (list(ids),)).fetchall()
    return {r[0]: (np.array(eval(r[1]), dtype=np.float32), r[2], r[3]) for r in rows}


def _jobs(db, tenant, ids):
    return db.execute(f"select count(*) from {tenant}.embedding_job where memory_id = any(%s)",
                      (list(ids),)).fetchone()[0]


def _halfvec(v):
    return np.asarray(v, dtype=np.float16).astype(np.float32)


def test_remember_many_with_the_callers_vectors_writes_them_with_the_memories_and_queues_nothing(db, conninfo):
    mem = _tenant(db, conninfo, "iv")
    texts = ["Ana keeps bees on her roof", "Ana's bees made forty jars of honey", "The hive is painted blue"]
    offsets = _turns(mem, texts)
    vectors = np.asarray(get_embedder().embed(texts), dtype=np.float32)
    before = mem.embedding_status()
    assert before.passages_queued == 3
    results = mem.remember_many(_items(texts, offsets), embeddings=list(vectors), embedding_model=MODEL,
                                embedding_input_version=1)
    ids = [r.memory_id for r in results]
    assert [r.status for r in results] == ["created"] * 3
    stored = _stored(db, "iv", ids)
    for memory_id, vector in zip(ids, vectors):
        got, model, version = stored[memory_id]
        assert (model, version) == (MODEL, 1)
        assert np.array_equal(got, _halfvec(vector))  # exactly what was sent, at half precision
    assert _jobs(db, "iv", ids) == 0
    status = mem.embedding_status()
    # queued: nothing; the three turns quote the memories word for word and borrow their vectors
    assert (status.queued, status.current, status.passages_queued, status.passages_current) == (0, 3, 0, 3)
    assert db.execute("select count(*) from iv.passage where vector_memory_id = any(%s)", (ids,)).fetchone()[0] == 3
    # registered against the turns they came from, as the worker's are (erasure finds them)
    registered = db.execute("select row_key::bigint, observation_id from iv.projection_dependency "
                            "where kind = 'memory_embedding' order by 1").fetchall()
    memory_deps = db.execute("select row_key::bigint, observation_id from iv.projection_dependency "
                             "where kind = 'memory' order by 1").fetchall()
    assert registered == memory_deps and len(registered) == 3
    # and the worker has nothing to do
    assert Worker("iv", conninfo=conninfo.dsn(user="pgrecall_iv_worker")).drain().stored == 0
    answer = mem.recall("who keeps bees?", mode="dense", limit=3)
    assert answer.items[0].memory_id == ids[0]


def test_an_item_without_a_vector_is_queued_and_a_noop_takes_none(db, conninfo):
    mem = _tenant(db, conninfo, "iv")
    texts = ["Ben repairs old clocks", "Ben's workshop is in the basement", "Ben repairs old clocks"]
    offsets = _turns(mem, texts)
    vectors = list(np.asarray(get_embedder().embed(texts), dtype=np.float32))
    vectors[1] = None
    results = mem.remember_many(_items(texts, offsets), embeddings=vectors, embedding_model=MODEL,
                                embedding_input_version=1)
    assert [r.status for r in results] == ["created", "created", "noop"]
    assert set(_stored(db, "iv", [results[0].memory_id, results[1].memory_id])) == {results[0].memory_id}
    assert _jobs(db, "iv", [results[1].memory_id]) == 1


def test_a_memory_whose_vector_is_given_is_never_queued_and_one_without_is_whatever_the_session_says(db, conninfo):
    """No job row is written for a memory whose vector comes with it (it was queued and unqueued in the same
    call, issue #46); the item beside it without one is queued, and so is every memory of a caller who turns
    the setting that skips the queue on in its own session."""
    _tenant(db, conninfo, "iv")
    texts = ["Ana grows tomatoes", "Ana's tomatoes ripen in August", "Ana waters them at dawn"]
    vectors = list(np.asarray(get_embedder().embed(texts), dtype=np.float32))
    vectors[1] = None
    with psycopg.connect(conninfo.dsn(user="pgrecall_iv_app")) as conn:
        mem = pgrecall.connect(tenant="iv", conn=conn, principal="bot", scopes=["default"])
        offsets = _turns(mem, texts)
        conn.commit()
        results = mem.remember_many(_items(texts, offsets), embeddings=vectors, embedding_model=MODEL,
                                    embedding_input_version=1)
        written = conn.execute("select pg_stat_get_xact_tuples_inserted('iv.embedding_job'::regclass)").fetchone()[0]
        conn.commit()
        assert [r.status for r in results] == ["created"] * 3
        assert written == 1
        assert _jobs(db, "iv", [r.memory_id for r in results]) == 1
        conn.execute("set pgrecall.memory_vectors_given = on")
        [offset] = _turns(mem, ["Ana's greenhouse is made of old windows"])
        r = mem.remember("Ana's greenhouse is made of old windows", evidence=[offset], purposes=["converse"])
        conn.commit()
    assert _jobs(db, "iv", [r.memory_id]) == 1
    assert _stored(db, "iv", [r.memory_id]) == {}


def test_a_handle_with_a_model_sends_its_own_vectors_under_input_version_1_only(db, conninfo):
    model = get_embedder()
    mem = _tenant(db, conninfo, "iv", embedder=model)
    [offset] = _turns(mem, ["  Ana's cat is called Pebble  "])
    r = mem.remember("  Ana's cat is called Pebble  ", evidence=[offset], purposes=["converse"], title="Pets")
    assert _jobs(db, "iv", [r.memory_id]) == 0
    got, stamp_model, version = _stored(db, "iv", [r.memory_id])[r.memory_id]
    assert (stamp_model, version) == (MODEL, 1)
    # the text the worker would have embedded: the title and the stored (trimmed) body
    [text] = [row[0] for row in db.execute("select iv._embedding_input(%s, 1)", (r.memory_id,))]
    assert text == "Pets\nAna's cat is called Pebble"
    assert np.array_equal(got, _halfvec(model.embed([text])[0]))
    # under input version 2 the text holds turns this process does not have: queued, as before
    mem2 = _tenant(db, conninfo, "iv2", version=2, embedder=model)
    [offset] = _turns(mem2, ["Ana's dog is called Biscuit"])
    r2 = mem2.remember("Ana's dog is called Biscuit", evidence=[offset], purposes=["converse"])
    assert _jobs(db, "iv2", [r2.memory_id]) == 1
    assert _stored(db, "iv2", [r2.memory_id]) == {}


def test_a_handle_whose_tenant_moved_to_another_version_falls_back_to_the_queue(db, conninfo):
    mem = _tenant(db, conninfo, "iv", embedder=get_embedder())
    [first, second] = _turns(mem, ["Ana plays chess on Sundays", "Ana's chess club meets at the library"])
    r1 = mem.remember("Ana plays chess on Sundays", evidence=[first], purposes=["converse"])
    assert _jobs(db, "iv", [r1.memory_id]) == 0  # the handle has read the tenant's stamp: version 1
    with pgrecall.connect(conninfo.dsn(user="pgrecall_iv_admin"), tenant="iv", role="admin") as admin:
        admin.set_embedding_version(MODEL, 2)
    # the handle still believes version 1: the tenant refuses its vector (PR155), the call is made again
    r2 = mem.remember("Ana's chess club meets at the library", evidence=[second], purposes=["converse"])
    assert r2.status == "created"
    assert _jobs(db, "iv", [r2.memory_id]) == 1 and _stored(db, "iv", [r2.memory_id]) == {}


@pytest.mark.parametrize("stamp,dims,code", [
    ((MODEL, 1), 383, "PR154"),
    (("another-model", 1), 384, "PR155"),
    ((MODEL, 2), 384, "PR155"),
    ((None, 1), 384, "PR107"),
])
def test_a_vector_of_the_wrong_dimensions_or_stamp_is_refused_and_nothing_is_written(db, conninfo, stamp, dims,
                                                                                        code):
    mem = _tenant(db, conninfo, "iv")
    texts = ["Ana grows tomatoes", "Ana's tomatoes are ripe in August"]
    offsets = _turns(mem, texts)
    vectors = [np.full(dims, 0.05, dtype=np.float32) for _ in texts]
    counts = db.execute("select (select count(*) from iv.memory), (select count(*) from iv.memory_embedding)").fetchone()
    with pytest.raises(errors.PgrecallError) as info:
        mem.remember_many(_items(texts, offsets), embeddings=vectors, embedding_model=stamp[0],
                          embedding_input_version=stamp[1])
    assert info.value.sqlstate == code
    if code == "PR155":
        assert isinstance(info.value, errors.WrongEmbeddingStamp)
    with pytest.raises(errors.PgrecallError) as info:
        mem.remember(texts[0], evidence=[offsets[0]], purposes=["converse"], embedding=vectors[0],
                     embedding_model=stamp[0], embedding_input_version=stamp[1])
    assert info.value.sqlstate == code
    assert db.execute("select (select count(*) from iv.memory), (select count(*) from iv.memory_embedding)"
                      ).fetchone() == counts


def test_embeddings_of_another_length_than_the_items_are_refused(db, conninfo):
    mem = _tenant(db, conninfo, "iv")
    offsets = _turns(mem, ["one", "two"])
    with conninfo.connect(user="pgrecall_iv_app") as app, pytest.raises(psycopg.Error) as info:
        app.execute("select * from iv.remember_many('bot', '{default}', 'default', %s::jsonb, %s, %s, 1)",
                    (psycopg.types.json.Jsonb(_items(["one fact", "two facts"], offsets)),
                     ["[" + ",".join(["0.05"] * 384) + "]"], MODEL))
    assert info.value.sqlstate == "PR107"
    assert "1 embeddings for 2 items" in str(info.value)


def test_a_worker_draining_while_callers_write_vectors_inline_never_replaces_theirs(db, conninfo):
    """The race: a worker drains the queue over and over while the caller writes memories in batches, half
    with their vectors and half without. The caller's vectors are of another text than the worker embeds
    (a prefix), so a vector the worker wrote over one of them would show. And one batch is written inside a
    transaction the worker claims during: its jobs (queued by the insert, settled before the commit) are
    never claimable."""
    model = get_embedder()
    mem = _tenant(db, conninfo, "iv")
    worker_dsn = conninfo.dsn(user="pgrecall_iv_worker")
    stop = threading.Event()
    failures: list[BaseException] = []

    def drain_forever():
        try:
            worker = Worker("iv", conninfo=worker_dsn, batch_size=7, embedder=model)
            while not stop.is_set():
                worker.drain(refresh_stats=False)
        except BaseException as exc:
            failures.append(exc)

    inline: dict[int, np.ndarray] = {}
    queued: dict[int, str] = {}
    thread = threading.Thread(target=drain_forever)
    thread.start()
    try:
        for round_ in range(6):
            texts = [f"round {round_}: Ana noted fact number {i} about the allotment" for i in range(8)]
            offsets = _turns(mem, texts)
            given = np.asarray(model.embed([f"inline: {t}" for t in texts[:4]]), dtype=np.float32)
            results = mem.remember_many(_items(texts[:4], offsets[:4]), embeddings=list(given),
                                        embedding_model=MODEL, embedding_input_version=1)
            inline.update({r.memory_id: v for r, v in zip(results, given)})
            results = mem.remember_many(_items(texts[4:], offsets[4:]), embed=False)
            queued.update({r.memory_id: t for r, t in zip(results, texts[4:])})
        # a batch written in a transaction the worker claims during
        texts = [f"in a transaction: fact {i} about the shed" for i in range(4)]
        offsets = _turns(mem, texts)
        given = np.asarray(model.embed([f"inline: {t}" for t in texts]), dtype=np.float32)
        with conninfo.connect(user="pgrecall_iv_app", autocommit=False) as app:
            held = pgrecall.connect(tenant="iv", conn=app, principal="bot", scopes=["default"])
            results = held.remember_many(_items(texts, offsets), embeddings=list(given), embedding_model=MODEL,
                                         embedding_input_version=1)
            with conninfo.connect(user="pgrecall_iv_worker") as other:
                claimed = [r[0] for r in other.execute("select memory_id from iv.claim_embedding_jobs('w2', 1000)")]
            app.commit()
        assert not {r.memory_id for r in results} & set(claimed)
        inline.update({r.memory_id: v for r, v in zip(results, given)})
    finally:
        stop.set()
        thread.join(timeout=120)
    assert not failures, failures
    with conninfo.connect(user="pgrecall_iv_worker") as other:  # give back what w2 claimed, then finish
        other.execute("select iv.release_embedding_jobs('w2', %s)", (claimed,))
    Worker("iv", conninfo=worker_dsn, embedder=model).drain()
    stored = _stored(db, "iv", list(inline) + list(queued))
    for memory_id, vector in inline.items():
        assert np.array_equal(stored[memory_id][0], _halfvec(vector)), f"memory {memory_id}: the caller's vector was replaced"
    for memory_id, text in queued.items():
        assert np.allclose(stored[memory_id][0], _halfvec(model.embed([text])[0]), atol=2e-3)
    assert _jobs(db, "iv", list(inline) + list(queued)) == 0


def test_a_worker_never_stores_a_vector_of_a_stamp_the_tenant_has_left(db, conninfo):
    """A worker that claimed under version 1 completes after the tenant moved to version 2 and a caller wrote
    version-2 vectors with new memories: the worker's results are dropped, the caller's stay."""
    model = get_embedder()
    mem = _tenant(db, conninfo, "iv")
    [old_turn] = _turns(mem, ["Ana's bike is green"])
    old = mem.remember("Ana's bike is green", evidence=[old_turn], purposes=["converse"], embed=False)
    with conninfo.connect(user="pgrecall_iv_worker") as worker:
        [(memory_id, generation, text, stamp_model, version, _)] = worker.execute(
            "select * from iv.claim_embedding_jobs('slow', 10)").fetchall()
        assert (memory_id, version) == (old.memory_id, 1)
        with pgrecall.connect(conninfo.dsn(user="pgrecall_iv_admin"), tenant="iv", role="admin") as admin:
            admin.set_embedding_version(MODEL, 2)
        [new_turn] = _turns(mem, ["Ana's bike has a basket"])
        given = np.asarray(model.embed(["any text the caller embedded for version 2"])[0], dtype=np.float32)
        new = mem.remember("Ana's bike has a basket", evidence=[new_turn], purposes=["converse"], embedding=given,
                           embedding_model=MODEL, embedding_input_version=2)
        late = "[" + ",".join(f"{x:.7g}" for x in model.embed([text])[0]) + "]"
        stored = worker.execute("select iv.complete_embedding_jobs('slow', %s, %s, %s, %s, %s)",
                                ([memory_id], [generation], [late], stamp_model, version)).fetchone()[0]
    assert stored == 0
    vectors = _stored(db, "iv", [old.memory_id, new.memory_id])
    assert old.memory_id not in vectors
    assert vectors[new.memory_id][1:] == (MODEL, 2)
    assert np.array_equal(vectors[new.memory_id][0], _halfvec(given))


def test_a_session_that_turns_the_skip_on_still_gets_derived_superseded_and_stored_memories_queued(db, conninfo):
    """pgrecall.memory_vectors_given is any role's to set in its own session: the other statements that write
    memories (derive, supersede, store_put) left theirs with neither a vector nor a job while it was on."""
    _tenant(db, conninfo, "iv")
    with psycopg.connect(conninfo.dsn(user="pgrecall_iv_app"), autocommit=True) as conn:
        mem = pgrecall.connect(tenant="iv", conn=conn, principal="bot", scopes=["default"])
        [o1, o2, o3] = _turns(mem, ["Ana rows on Tuesdays", "Ana rows on Thursdays now", "Ana's boat is red"])
        rowing = mem.remember("Ana rows on Tuesdays", evidence=[o1], purposes=["converse"]).memory_id
        boat = mem.remember("Ana's boat is red", evidence=[o3], purposes=["converse"]).memory_id
        conn.execute("set pgrecall.memory_vectors_given = on")
        moved = mem.supersede(rowing, "Ana rows on Thursdays now", revision=1, evidence=[o2])
        drawn = mem.derive([moved, boat], "Ana rows a red boat on Thursdays")
        [put] = mem.store_put("default", ["prefs"], "colour", {"colour": "red"}, ["converse"])
        assert conn.execute("show pgrecall.memory_vectors_given").fetchone()[0] == "on"
    for memory_id in (moved, drawn, put.memory_id):
        assert _jobs(db, "iv", [memory_id]) == 1, memory_id


def test_a_sql_caller_gives_pgvectors_vectors_as_they_are(db, conninfo):
    """remember_many and remember take the vectors as pgvector's halfvec: a SQL caller passes its vector[] (or
    halfvec[]) values without turning them into text, and each is stored as given, at half precision."""
    mem = _tenant(db, conninfo, "iv")
    offsets = _turns(mem, ["Ana bakes sourdough", "Ana's starter is called Bob"])
    first, second = np.linspace(-0.1, 0.1, 384, dtype=np.float32), np.linspace(0.1, -0.1, 384, dtype=np.float32)
    with conninfo.connect(user="pgrecall_iv_app") as app:
        made = app.execute(
            "select memory_id from iv.remember_many('bot', '{default}', 'default', %s::jsonb,"
            " array[%s::real[]::vector, null], %s, 1)",
            (psycopg.types.json.Jsonb(_items(["Ana bakes sourdough", "Ana's starter is called Bob"], offsets)),
             first.tolist(), MODEL)).fetchall()
        one = app.execute("select memory_id from iv.remember('bot', '{default}', 'default', 'Ana bakes on Sundays',"
                          " %s, '{converse}', p_embedding => %s::real[]::halfvec, p_embedding_model => %s,"
                          " p_embedding_input_version => 1)", ([offsets[0]], second.tolist(), MODEL)).fetchone()
    stored = _stored(db, "iv", [made[0][0], made[1][0], one[0]])
    assert np.array_equal(stored[made[0][0]][0], _halfvec(first))
    assert made[1][0] not in stored and _jobs(db, "iv", [made[1][0]]) == 1  # the item without one is queued
    assert np.array_equal(stored[one[0]][0], _halfvec(second))


@pytest.mark.parametrize("bad", [np.full(384, np.nan), np.full(384, 1e6)])
def test_a_vector_half_precision_cannot_hold_is_refused_by_the_driver_naming_it(db, conninfo, bad):
    mem = _tenant(db, conninfo, "iv")
    [offset] = _turns(mem, ["Ana rows on the Douro"])
    with pytest.raises(errors.InvalidArgument, match="384 finite numbers within"):
        mem.remember_many(_items(["Ana rows on the Douro"], [offset]), embeddings=[bad], embedding_model=MODEL,
                          embedding_input_version=1)
    assert db.execute("select count(*) from iv.memory").fetchone()[0] == 0


@pytest.mark.parametrize("shaped", [np.zeros((2, 384), dtype=np.float32), [[0.1] * 384], np.float32(0.5)],
                         ids=["matrix", "nested list", "scalar"])
def test_a_vector_of_the_wrong_shape_is_refused_naming_its_shape(db, conninfo, shaped):
    mem = _tenant(db, conninfo, "iv")
    [offset] = _turns(mem, ["Ana rows on the Douro"])
    shape = str(np.asarray(shaped).shape)
    with pytest.raises(errors.InvalidArgument, match=re.escape(f"not an array of shape {shape}")):
        mem.remember_many(_items(["Ana rows on the Douro"], [offset]), embeddings=[shaped], embedding_model=MODEL,
                          embedding_input_version=1)
    assert db.execute("select count(*) from iv.memory").fetchone()[0] == 0
