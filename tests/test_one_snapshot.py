"""A multi-step read reads one snapshot (issue #47, item 2): chat's three reads (representation, recall, the
working representation) see the tenant as it was when the first began, whatever commits between them, on a
pool (one connection held for them, not three) as on one connection, sync and async; the connection goes
back to the pool as it was lent, also when a step fails."""

import asyncio

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

import pgrecall
from pgrecall.embedder import get_embedder


class WritesWhileEmbedding:
    """The real model, which, the first time it embeds a query, lets another client remember something that the
    query would find: a write committed between chat's first read and its recall."""

    def __init__(self, conninfo):
        self.model = get_embedder()
        self.conninfo = conninfo
        self.written: list[int] = []

    @property
    def name(self):
        return self.model.name

    def embed(self, texts):
        if not self.written:
            with self.conninfo.connect(user="pgrecall_acme_app") as other:
                off = other.execute("select acme.append_observation('bot', '{default}', 'default', "
                                    "'zqkiwi: Ana now grows kiwis', 'user', p_actor => 'ana')").fetchone()[0]
                self.written.append(other.execute(
                    "select memory_id from acme.remember('bot', '{default}', 'default', 'Ana grows zqkiwi fruit', "
                    "%s, '{converse}')", ([off],)).fetchone()[0])
        return self.model.embed(texts)


def seed(mem):
    off = mem.append("I grow tomatoes", role="user", actor="ana")
    mem.remember("Ana grows tomatoes", evidence=[off], purposes=["converse"], about=["ana"])


def found(chat):
    return [e.body for e in chat.evidence]


@pytest.mark.parametrize("pooled", [True, False])
def test_chat_reads_one_snapshot(acme, conninfo, pooled):
    seed(acme)
    embedder = WritesWhileEmbedding(conninfo)
    if pooled:
        pool = ConnectionPool(conninfo.dsn(user="pgrecall_acme_app"), min_size=1, max_size=2, open=True)
        mem = pgrecall.connect(tenant="acme", pool=pool, principal="bot", scopes=["default"], embedder=embedder)
    else:
        pool = None
        mem = pgrecall.connect(conninfo.dsn(user="pgrecall_acme_app"), tenant="acme", principal="bot",
                               scopes=["default"], embedder=embedder)
    try:
        chat = mem.chat(None, "ana", "zqkiwi or tomatoes?")
        assert embedder.written, "the write between the reads happened"
        assert "Ana grows tomatoes" in found(chat)
        assert "Ana grows zqkiwi fruit" not in found(chat)  # committed after the snapshot began
        # the next read sees it
        assert "Ana grows zqkiwi fruit" in [i.body for i in mem.recall("zqkiwi fruit", mode="lexical").items]
        if pool is not None:
            with pool.connection() as conn:
                assert (conn.autocommit, conn.info.transaction_status) == (False, psycopg.pq.TransactionStatus.IDLE)
                assert conn.read_only is None and conn.isolation_level is None
    finally:
        mem.close()
        if pool is not None:
            pool.close()


def test_a_failed_step_inside_the_snapshot_gives_the_pools_connection_back(acme, conninfo):
    seed(acme)
    with ConnectionPool(conninfo.dsn(user="pgrecall_acme_app"), min_size=1, max_size=1, open=True,
                        timeout=5) as pool:
        mem = pgrecall.connect(tenant="acme", pool=pool, principal="bot", scopes=["default"], embedder=get_embedder())
        with pytest.raises(LookupError):
            mem.chat(None, "ana", "what does Ana grow?", session=987654)  # no such session: the third read fails
        # one connection in the pool: had the snapshot kept it, this would wait and time out
        assert "Ana grows tomatoes" in found(mem.chat(None, "ana", "what does Ana grow?"))
        with pool.connection() as conn:
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_async_chat_reads_one_snapshot_on_a_pool(acme, conninfo):
    seed(acme)
    embedder = WritesWhileEmbedding(conninfo)

    async def main():
        async with AsyncConnectionPool(conninfo.dsn(user="pgrecall_acme_app"), min_size=1, max_size=1,
                                       configure=pgrecall.configure_async, timeout=5) as pool:
            mem = await pgrecall.connect_async(tenant="acme", pool=pool, principal="bot", scopes=["default"],
                                               embedder=embedder)
            chat = await mem.chat(None, "ana", "zqkiwi or tomatoes?")
            after = await mem.recall("zqkiwi fruit", mode="lexical")
            async with pool.connection() as conn:
                idle = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            return chat, after, idle

    chat, after, idle = asyncio.run(main())
    assert embedder.written and idle
    assert "Ana grows tomatoes" in found(chat) and "Ana grows zqkiwi fruit" not in found(chat)
    assert "Ana grows zqkiwi fruit" in [i.body for i in after.items]
