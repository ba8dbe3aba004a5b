"""The sync and the async driver: one test body runs against each (``connect`` yields a Memory, or an
AsyncMemory behind a small adapter that runs each call on the test's event loop). Also: what is the same in
both by construction (methods, signatures, the duty table's functions), the embedder and precomputed query
embeddings, and pgvector's types."""

from __future__ import annotations

import asyncio
import inspect
import threading
import time

import numpy as np
import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

import pgrecall
from pgrecall import errors
from pgrecall.driver import (
    NOT_METHODS,
    AsyncMemory,
    ErasureReceipt,
    FactRow,
    Memory,
    MessagesFound,
    Provenance,
    RecallMeta,
    SessionPeer,
)
from pgrecall.embedder import DIMENSIONS, ModelUnavailable, get_embedder
from pgrecall.worker import Worker


class Awaited:
    """An AsyncMemory whose methods run to completion on the test's loop: the same test body drives both."""

    def __init__(self, mem: AsyncMemory, loop: asyncio.AbstractEventLoop) -> None:
        self.mem, self.loop = mem, loop

    def __getattr__(self, name):
        attr = getattr(self.mem, name)
        if not inspect.iscoroutinefunction(attr):
            return attr
        return lambda *args, **kwargs: self.loop.run_until_complete(attr(*args, **kwargs))


@pytest.fixture(params=["sync", "async"])
def connect(request, acme, conninfo):
    """connect(role="app", **kwargs): a handle on acme as that login role, acting for bot in scope default."""
    loop = asyncio.new_event_loop() if request.param == "async" else None
    closing = []

    def connect_(role="app", **kwargs):
        dsn = conninfo.dsn(user=f"pgrecall_acme_{role}")
        if loop is None:
            mem = pgrecall.connect(dsn, tenant="acme", principal="bot", scopes=["default"], **kwargs)
            closing.append(mem.close)
            return mem
        amem = loop.run_until_complete(
            pgrecall.connect_async(dsn, tenant="acme", principal="bot", scopes=["default"], **kwargs))
        closing.append(lambda: loop.run_until_complete(amem.close()))
        return Awaited(amem, loop)

    yield connect_
    for close in closing:
        close()
    if loop is not None:
        loop.close()


def embed_all(conninfo):
    return Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker")).drain()


# -- the same behaviours through either driver -------------------------------------------------------------


def test_append_remember_read_and_recall_with_provenance_and_meta(connect, conninfo):
    mem = connect()
    said = mem.append("I moved to Porto last week.", role="user", actor="ana")
    r = mem.remember("Ana lives in Porto", evidence=[said], purposes=["converse"], about=["Ana"])
    assert r.created and r.status == "created"
    rec = mem.read(r.memory_id, purpose="converse")
    assert (rec.revision, rec.body) == (1, "Ana lives in Porto")
    assert isinstance(rec.provenance, Provenance)
    assert rec.provenance.observations[0].text == "I moved to Porto last week."
    assert [a.entity for a in rec.provenance.about] == ["Ana"]
    embed_all(conninfo)
    answer = mem.recall("Where does Ana live?")
    assert isinstance(answer.meta, RecallMeta) and answer.dense_available
    top = answer.items[0]
    assert (top.item, top.memory_id, top.lexical_rank, top.dense_rank) == ("memory", r.memory_id, 1, 1)
    assert top.provenance.offsets == [said] and top.cosine > 0.5
    assert answer.meta.fused_count == 1 and answer.meta.query == "Where does Ana live?"


def test_correct_with_a_stale_revision_is_a_conflict_and_forget_hides(connect):
    mem = connect()
    m = mem.remember("Ben's birthday is March 31", evidence=[mem.append("mine is March 31", role="user",
                                                                       actor="ben")], purposes=["converse"])
    assert mem.correct(m.memory_id, "Ben's birthday is March 13", revision=1, reason="typo") == 2
    with pytest.raises(errors.RevisionConflict):
        mem.correct(m.memory_id, "Ben's birthday is March 14", revision=1)
    rec = mem.read(m.memory_id, purpose="converse")
    assert rec.body == "Ben's birthday is March 13" and [v.body for v in rec.revisions] == ["Ben's birthday is March 31"]
    assert mem.forget(m.memory_id, reason="asked", revision=2) == 3
    with pytest.raises(errors.MemoryNotFound):
        mem.read(m.memory_id, purpose="converse")


def test_search_messages_with_its_meta(connect, conninfo):
    mem = connect()
    mem.append("We should plan the trip to Porto in May", role="user", actor="ana")
    mem.append("The cat needs a vet appointment", role="user", actor="ben")
    embed_all(conninfo)
    found = mem.search_messages("trip to Porto")
    assert isinstance(found, MessagesFound) and found.semantic_available and found.meta.level == "tenant"
    assert found.items[0].body == "We should plan the trip to Porto in May" and found.items[0].actor == "ana"
    assert found.items[0].occurred_at.tzinfo is not None


def test_assert_fact_and_facts_as_of(connect):
    mem = connect()
    o1 = mem.append("I live in Lisbon.", role="user", actor="ana")
    o2 = mem.append("I moved to Porto!", role="user", actor="ana")
    first = mem.assert_fact("Ana", "lives_in", "Lisbon", evidence=[{"offset": o1, "quote": "I live in Lisbon"}])
    second = mem.assert_fact("Ana", "lives_in", "Porto", evidence=[{"offset": o2, "quote": "I moved to Porto"}])
    assert (first.outcome, second.outcome, second.closed_facts) == ("inserted", "superseded", [first.fact_id])
    [now] = mem.facts_as_of("Ana", "lives_in")
    assert isinstance(now, FactRow) and now.object == "Porto"
    assert [(e.offset, e.start, e.end, e.quote) for e in now.evidence] == [(o2, 0, 16, "I moved to Porto")]


def test_sessions_peers_messages_and_the_turn_log(connect):
    mem = connect()
    s = mem.create_session("flat chat")
    added = mem.add_session_peers(s, ["ana", {"peer": "ben", "observe_others": True}])
    assert [(p.peer, p.observe_others) for p in added] == [("ana", False), ("ben", True)]
    [message] = mem.add_messages(s, [{"actor": "ana", "body": "I live in Lisbon"}])
    assert message.offset == 1 and message.tasks > 0
    peers = mem.session_peers(s)
    assert all(isinstance(p, SessionPeer) for p in peers) and {p.peer for p in peers} == {"ana", "ben"}
    assert mem.session_peer_config(s, "ben").observe_others is True
    status = mem.queue_status("ben", "ana")
    assert (status.status, status.remaining) == ("pending", 1)
    turn = mem.log_turn("support", "ana", "hello")
    assert turn.opened and turn.offset == 2


def test_erase_is_the_admins(connect):
    app = connect()
    said = app.append("my email is ana@example.org", role="user", actor="ana", data_subject_id="u-42")
    app.remember("Ana's email is ana@example.org", evidence=[said], purposes=["act"])
    with pytest.raises(errors.NotPermitted):
        app.erase({"data_subject": "u-42"}, reason="request #7", actor="dpo")
    receipt = connect("admin").erase({"data_subject": "u-42"}, reason="request #7", actor="dpo")
    assert isinstance(receipt, ErasureReceipt) and receipt.clean and receipt.observations_erased == 1
    assert (receipt.actor, receipt.actor_role) == ("dpo", "pgrecall_acme_admin")
    assert app.recall("email", embed=False).items == []


def test_after_an_erasure_the_statistics_are_taken_again_and_the_tables_vacuumed(connect):
    connect().append("my nickname is zqgone", role="user", actor="ana", data_subject_id="u-9")
    admin = connect("admin")
    receipt = admin.erase({"data_subject": "u-9"}, reason="request #9", actor="dpo")
    assert receipt.statistics_refreshed_at is None and "observation" in receipt.tables_touched
    refreshed = admin.refresh_erasure_statistics(receipt.id)
    assert refreshed.id == receipt.id and refreshed.statistics_refreshed_at is not None
    assert sorted(admin.vacuum_erased(refreshed)) == sorted(refreshed.tables_touched)
    with pytest.raises(errors.UnknownErasureRequest):
        admin.refresh_erasure_statistics(receipt.id + 100)


def test_vacuum_is_refused_inside_a_transaction(acme_admin, conninfo):
    receipt = acme_admin.erase({"data_subject": "nobody"}, reason="request #10", actor="dpo")
    with conninfo.connect(user="pgrecall_acme_admin", autocommit=False) as conn:
        mem = pgrecall.connect(tenant="acme", conn=conn)
        with pytest.raises(errors.InvalidArgument):
            mem.vacuum_erased(receipt)


def test_a_precomputed_query_embedding_is_used_as_given(connect, conninfo):
    class Refuses:
        name = "all-MiniLM-L6-v2"

        def embed(self, texts):
            raise AssertionError("the driver embedded a query it was given a vector for")

    mem = connect(embedder=Refuses())
    m = mem.remember("The lighthouse keeper trims the lamp", evidence=[mem.append("x", role="user")],
                     purposes=["converse"]).memory_id
    embed_all(conninfo)
    vector = np.asarray(get_embedder().embed(["who looks after the light at night"])[0], dtype=np.float32)
    for given in (vector, vector.tolist()):
        r = mem.recall("who looks after the light at night", query_embedding=given, mode="dense")
        assert r.dense_available and [i.memory_id for i in r.items] == [m]
    found = mem.search_messages("x", query_embedding=vector, mode="semantic")
    assert found.meta.semantic_reason is None or found.semantic_available
    r = mem.recall("lamp", query_embedding=vector, query_model="another-model", mode="dense")
    assert not r.dense_available and "another-model" in r.meta.dense_reason


def test_a_bad_query_embedding_is_refused_before_sql(connect):
    mem = connect()
    for bad in ([0.1] * 10, [[0.1] * DIMENSIONS], [float("nan")] * DIMENSIONS, ["a"] * DIMENSIONS):
        with pytest.raises(errors.InvalidArgument) as info:
            mem.recall("anything", query_embedding=bad)
        assert info.value.sqlstate == "PR107" and info.value.hint


def test_a_custom_embedder_embeds_queries_and_a_down_one_degrades(connect, conninfo):
    class Constant:
        name = "all-MiniLM-L6-v2"
        calls = 0

        def embed(self, texts):
            Constant.calls += 1
            return [[1.0] + [0.0] * (DIMENSIONS - 1) for _ in texts]

    class Down:
        name = "all-MiniLM-L6-v2"

        def embed(self, texts):
            raise ModelUnavailable("the model server is down")

    mem = connect(embedder=Constant())
    mem.remember("Ana likes jazz", evidence=[mem.append("I like jazz", role="user", actor="ana")],
                 purposes=["converse"])
    embed_all(conninfo)
    r = mem.recall("jazz")
    assert Constant.calls == 1 and r.meta.dense_method is not None
    r = connect(embedder=Down()).recall("jazz")
    assert not r.dense_available and r.meta.dense_reason == "no query embedding" and len(r.items) == 1


# -- the async driver's own --------------------------------------------------------------------------------


def test_both_drivers_have_the_same_methods_and_arguments():
    def operations(cls):
        return {name: inspect.signature(attr.build) for name, attr in inspect.getmembers(cls)
                if hasattr(attr, "build")}

    sync_ops, async_ops = operations(Memory), operations(AsyncMemory)
    assert sync_ops == async_ops and len(sync_ops) > 55


def test_every_public_function_has_a_method_or_a_reason(db, make_tenant):
    make_tenant("acme")
    declared = {r[0] for r in db.execute("select function_name from pgrecall.function_duty")}
    in_catalog = {r[0] for r in db.execute("select proname from pg_proc where pronamespace = 'acme'::regnamespace "
                                           "and proname !~ '^_' and prorettype <> 'trigger'::regtype")}
    assert declared == in_catalog
    methods = {name for name, attr in inspect.getmembers(Memory) if hasattr(attr, "build")}
    missing = declared - methods - NOT_METHODS.keys()
    assert not missing, f"public functions without a Memory method or a reason in NOT_METHODS: {sorted(missing)}"
    assert not (NOT_METHODS.keys() - declared), "NOT_METHODS names a function that does not exist"


def test_the_embedding_model_runs_off_the_event_loop(acme, conninfo):
    """A slow embedder (CPU-bound, like the real model) must not stop the loop serving other work."""

    class Slow:
        name = "all-MiniLM-L6-v2"

        def embed(self, texts):
            self.thread = threading.current_thread()
            time.sleep(0.5)
            return [[1.0] + [0.0] * (DIMENSIONS - 1) for _ in texts]

    slow = Slow()

    async def main():
        mem = await pgrecall.connect_async(conninfo.dsn(user="pgrecall_acme_app"), tenant="acme", principal="bot",
                                           scopes=["default"], embedder=slow)
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.02)
                ticks += 1

        task = asyncio.create_task(ticker())
        try:
            await mem.recall("anything")
        finally:
            task.cancel()
            await mem.close()
        return ticks

    assert asyncio.run(main()) >= 10
    assert slow.thread is not threading.main_thread()


def test_async_pool_and_the_callers_transaction(acme, conninfo, db):
    async def main():
        async with AsyncConnectionPool(conninfo.dsn(user="pgrecall_acme_app"), min_size=1, max_size=2,
                                       kwargs={"autocommit": True}, configure=pgrecall.configure_async) as pool:
            mem = await pgrecall.connect_async(tenant="acme", pool=pool, principal="bot", scopes=["default"])
            off = await mem.append("I like jazz", role="user", actor="ana")
            await mem.remember("Ana likes jazz", evidence=[off], purposes=["converse"])
        async with await psycopg.AsyncConnection.connect(conninfo.dsn(user="pgrecall_acme_app")) as conn:
            mem = await pgrecall.connect_async(tenant="acme", conn=conn, principal="bot", scopes=["default"])
            off = await mem.append("I like tea", role="user", actor="ana")
            await mem.remember("Ana likes tea", evidence=[off], purposes=["converse"])
            await conn.rollback()

    asyncio.run(main())
    assert [r[0] for r in db.execute("select body from acme.memory")] == ["Ana likes jazz"]


# -- pgvector's types --------------------------------------------------------------------------------------


def test_vectors_go_through_pgvectors_type_on_any_connection(acme, conninfo):
    """The handle's own connection registers pgvector's type; a caller's pool that did not gets it on first
    use; the extension is found even when its schema is not on the role's search_path."""
    mem = pgrecall.connect(conninfo.dsn(user="pgrecall_acme_app"), tenant="acme", principal="bot", scopes=["default"])
    assert mem._runner.conn.adapters.types.get("vector") is not None
    vector = get_embedder().embed(["jazz"])[0]
    with ConnectionPool(conninfo.dsn(user="pgrecall_acme_app"), min_size=1, max_size=1,
                        kwargs={"autocommit": True}, open=True) as pool:
        pooled = pgrecall.connect(tenant="acme", pool=pool, principal="bot", scopes=["default"])
        assert pooled.recall("jazz", query_embedding=vector).meta.dense_reason == "no embeddings yet"
        with pool.connection() as conn:
            assert conn.adapters.types.get("vector") is not None
    with conninfo.connect(user="pgrecall_acme_app") as conn:
        conn.execute("set search_path = pg_catalog")
        pgrecall.configure(conn)
        assert conn.adapters.types.get("vector") is not None


def test_the_worker_stores_what_its_embedder_returns_and_refuses_a_wrong_shape(acme, conninfo, db):
    class Unit:
        name = "all-MiniLM-L6-v2"

        def embed(self, texts):
            return np.eye(DIMENSIONS, dtype=np.float32)[: len(texts)]

    class Short:
        name = "all-MiniLM-L6-v2"

        def embed(self, texts):
            return [[0.5] * 10 for _ in texts]

    dsn = conninfo.dsn(user="pgrecall_acme_worker")
    acme.remember("Ana likes jazz", evidence=[acme.append("I like jazz", role="user", actor="ana")],
                  purposes=["converse"])
    with pytest.raises(errors.ModelMismatch):
        Worker("acme", conninfo=dsn, embedder=Short()).drain()
    assert db.execute("select count(*) from acme.embedding_job where leased_by is null").fetchone()[0] == 1
    stats = Worker("acme", conninfo=dsn, embedder=Unit()).drain()
    assert stats.stored == 1 and stats.passages_stored == 1
    stored = db.execute("select embedding::text from acme.memory_embedding").fetchone()[0]
    assert stored == "[" + ",".join(["1"] + ["0"] * (DIMENSIONS - 1)) + "]"
