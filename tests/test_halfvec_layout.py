"""Vectors at half precision (issue #31, migration 0032): a tenant whose vectors are stored as vector(384) is
converted in place, nothing re-embedded, and recalls the same top 10 afterwards. What rounding to halfvec costs
recall against full-precision vectors is measured by ``python -m bench.halfvec``, not here."""

from __future__ import annotations

from pgrecall.worker import Worker
from test_one_vector import _answers, _pairs, _tenant


def _as_before_0032(db, tenant):
    """The layout 0031 left: float vectors and their HNSW indexes over vector_cosine_ops, and every embedded
    passage with a vector of its own (0033 lets a quoted turn borrow its memory's)."""
    db.execute(f"update {tenant}.passage p set embedding = me.embedding, embedding_model = me.model, "
               f"embedding_input_version = me.input_version, embedded_at = me.embedded_at, vector_memory_id = null "
               f"from {tenant}.memory_embedding me where me.memory_id = p.vector_memory_id")
    db.execute(f"alter table {tenant}.passage drop column vector_memory_id")
    db.execute(f"delete from {tenant}.schema_migration where version = 33")
    db.execute(f"drop index {tenant}.memory_embedding_hnsw")
    db.execute(f"drop index {tenant}.passage_embedding_hnsw")
    db.execute(f"alter table {tenant}.memory_embedding alter column embedding type vector(384), "
               f"alter column text_embedding type vector(384)")
    db.execute(f"alter table {tenant}.passage alter column embedding type vector(384)")
    db.execute(f"create index memory_embedding_hnsw on {tenant}.memory_embedding using hnsw "
               f"(embedding vector_cosine_ops) with (m = 16, ef_construction = 64)")
    db.execute(f"create index passage_embedding_hnsw on {tenant}.passage using hnsw "
               f"(embedding vector_cosine_ops) with (m = 16, ef_construction = 64)")
    db.execute(f"delete from {tenant}.schema_migration where version = 32")


def _stored(db, tenant):
    return (db.execute(f"select memory_id, embedding::text, embedded_at from {tenant}.memory_embedding "
                       f"order by 1").fetchall(),
            db.execute(f"select id, embedding::text, embedded_at from {tenant}.passage where embedding is not null "
                       f"order by 1").fetchall())


def _column_types(db, tenant):
    return db.execute("select c.relname, a.attname, format_type(a.atttypid, a.atttypmod) "
                      "from pg_attribute a join pg_class c on c.oid = a.attrelid "
                      "join pg_namespace n on n.oid = c.relnamespace "
                      "where n.nspname = %s and c.relname in ('memory_embedding', 'passage') "
                      "and a.attname in ('embedding', 'text_embedding') order by 1, 2", (tenant,)).fetchall()


def test_a_tenant_with_float_vectors_is_converted_in_place_and_recalls_the_same_top_10(db, conninfo):
    mem = _tenant(db, conninfo, "floats")
    # a turn no memory quotes keeps a vector of its own
    mem.append("The bakery on the corner closes at noon on Sundays", role="user", actor="ana")
    Worker("floats", conninfo=conninfo.dsn(user="pgrecall_floats_worker")).drain()
    recalled, pairs, stored = _answers(mem), _pairs(mem), _stored(db, "floats")
    assert stored[0] and stored[1]  # memories and passages both hold vectors
    _as_before_0032(db, "floats")
    assert {t for _, _, t in _column_types(db, "floats")} == {"vector(384)"}

    applied = [tuple(r) for r in db.execute("select * from pgrecall.upgrade_tenant('floats')").fetchall()]
    assert ("migration", "0032_halfvec.sql") in applied
    assert {t for _, _, t in _column_types(db, "floats")} == {"halfvec(384)"}
    assert _stored(db, "floats") == stored  # the same numbers and stamps: converted, not re-embedded
    assert db.execute("select count(*) from floats.embedding_job").fetchone()[0] == 0
    assert db.execute("select count(*) from floats.passage_embedding_job").fetchone()[0] == 0
    assert _answers(mem) == recalled
    assert _pairs(mem) == pairs
    dense = mem.recall("What is Ben allergic to?", mode="dense", limit=3)
    assert dense.meta.dense_available and "peanut" in dense.items[0].body
    mem.close()
