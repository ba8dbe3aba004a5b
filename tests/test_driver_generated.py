"""The catalog is the API: public functions return declared types, and the driver's generated module
(python/pgrecall/driver/_generated.py, ``make driver``) is what the catalog of a tenant says."""

from __future__ import annotations

import asyncio

import pytest

import pgrecall
from pgrecall import errors
from pgrecall.driver import GENERATED_METHODS, _codegen, _generated


def _render(db, tenant="acme"):
    text = _codegen.render(db, tenant, _codegen.public_functions())
    db.execute("reset search_path")
    return text


def test_the_generated_module_is_what_the_catalog_says(acme, db):
    assert _render(db) == _codegen.TARGET.read_text(), (
        "python/pgrecall/driver/_generated.py differs from the catalog: run make driver and commit it")


def test_the_catalog_constants_are_what_the_catalog_says(acme, db):
    """pgrecall/_catalog.py: the embedding's size (every vector column's, and _embedding_dimensions()), a new
    tenant's model, the keywords no tenant name may be; the embedder and the name rule read them there."""
    from pgrecall import _catalog, embedder, names

    assert _codegen.render_catalog(db, "acme") == _codegen.CATALOG_TARGET.read_text(), (
        "python/pgrecall/_catalog.py differs from the catalog: run make driver and commit it")
    assert (embedder.DIMENSIONS, embedder.MODEL_NAME) == (_catalog.EMBEDDING_DIMENSIONS, _catalog.EMBEDDING_MODEL)
    assert names.RESERVED_KEYWORDS is _catalog.RESERVED_KEYWORDS


def test_a_vector_column_of_another_size_is_caught(acme, db):
    db.execute("alter table acme.memory_embedding add column other_embedding public.vector(768)")
    with pytest.raises(AssertionError, match="768"):
        _codegen.render_catalog(db, "acme")


def test_a_catalog_that_changes_is_caught(acme, db):
    db.execute("alter type acme.recall_meta add attribute added_later integer")
    changed = _render(db)
    assert changed != _codegen.TARGET.read_text()
    assert "    added_later: int | None = field()" not in changed  # no comment starting NULL: not optional
    assert "    added_later: int = field()" in changed


def test_no_public_function_returns_a_jsonb_twin_or_a_meta_row(acme, db):
    """recall, message search and duplicate proposals return declared types; their *_answer functions return
    one value of a declared composite (items T[], meta T_meta), not jsonb, and no result has a meta column."""
    public = _codegen.public_functions()
    rows = db.execute("""
        select p.proname, format_type(p.prorettype, null), t.typtype,
               array(select n from unnest(p.proargnames, coalesce(p.proargmodes::text[], '{}')) a(n, m)
                      where m in ('o', 't'))
          from pg_proc p join pg_type t on t.oid = p.prorettype
         where p.pronamespace = 'acme'::regnamespace and p.proname = any (%s)""", (public,)).fetchall()
    answers = {name: (rettype, typtype, outs) for name, rettype, typtype, outs in rows if name.endswith("_answer")}
    assert set(answers) == {"recall_answer", "search_messages_answer", "duplicate_proposals_answer"}
    for name, (rettype, typtype, outs) in answers.items():
        assert typtype == "c" and rettype == f"acme.{name}", (name, rettype)
        assert not outs
    assert not [name for name, _, _, outs in rows if "meta" in outs]
    fields = db.execute("""
        select t.typname, array_agg(a.attname::text order by a.attnum), array_agg(format_type(a.atttypid, null))
          from pg_type t join pg_attribute a on a.attrelid = t.typrelid and a.attnum > 0
         where t.typnamespace = 'acme'::regnamespace and t.typname in ('recall_answer', 'search_messages_answer',
                                                                      'duplicate_proposals_answer')
         group by t.typname""").fetchall()
    assert sorted(fields) == [
        ("duplicate_proposals_answer", ["items", "meta"], ["acme.duplicate_pair[]", "acme.duplicate_meta"]),
        ("recall_answer", ["items", "meta"], ["acme.recall_item[]", "acme.recall_meta"]),
        ("search_messages_answer", ["items", "meta"], ["acme.message_hit[]", "acme.message_search_meta"]),
    ]


def test_no_public_function_returns_a_jsonb_object(acme, db):
    """Every public result is a declared type or a table; only a setting's value, which has no fixed shape,
    comes back as jsonb."""
    rows = db.execute("""
        select p.proname from pg_proc p
         where p.pronamespace = 'acme'::regnamespace and p.proname = any (%s)
           and p.prorettype = 'jsonb'::regtype""", (_codegen.public_functions(),)).fetchall()
    assert [name for (name,) in rows] == ["set_setting"]


def test_psql_reads_the_session_bundle_and_configs_as_columns(acme, conninfo):
    acme.remember("Ana's sister is Rita", evidence=[acme.append("Ana's sister is Rita", role="user", actor="ana")],
                  purposes=["converse"], about=["Rita"])
    with conninfo.connect(user="pgrecall_acme_app") as conn:
        cur = conn.execute("""select r.body, (r.provenance).observations[1].text, (r.provenance).about[1].entity
                                from acme.session_bundle('bot', '{default}') b, unnest(b.recent) r""")
        assert cur.fetchall() == [("Ana's sister is Rita", "Ana's sister is Rita", "Rita")]
        cur = conn.execute("select e.* from acme.session_bundle('bot', '{default}') b, unnest(b.entities) e")
        assert [c.name for c in cur.description] == ["entity", "type", "scope", "memories"]
        assert cur.fetchall() == [("Rita", None, "default", 1)]
        cur = conn.execute("select * from acme.peer_config('ana')")
        assert [c.name for c in cur.description] == ["peer", "kind", "observed_globally", "follows_tenant_default"]
        assert cur.fetchone()[:2] == ("ana", "human")


def test_psql_reads_recall_metadata_as_a_table(acme, conninfo):
    with conninfo.connect(user="pgrecall_acme_app") as conn:
        cur = conn.execute("select (a.meta).* from acme.recall_answer('bot', '{default}', 'lighthouse') a")
        row = cur.fetchone()
        names = [c.name for c in cur.description]
    assert names[:3] == ["query", "mode", "purpose"] and "dense_available" in names
    assert row[:3] == ("lighthouse", "hybrid", "converse")


def _put(mem, text, **kwargs):
    offset = mem.append(f"said: {text}", role="user", actor="ana")
    assert mem.remember(text, evidence=[offset], **kwargs).created


def test_memory_count_counts_what_the_principal_may_see(acme, conninfo):
    """The proof of a new operation: its SQL, its duty line and its reference entry; the method comes from the
    generated module, sync and async alike."""
    assert "memory_count" in GENERATED_METHODS
    assert acme.memory_count() == 0
    _put(acme, "Ana likes green tea", purposes=["converse"])
    _put(acme, "Ana's birthday is in May", purposes=["personalize"])
    _put(acme, "Ben's surprise party", purposes=["converse"], audience="ben")  # bot is not ben
    assert acme.memory_count() == 1
    assert acme.memory_count(purpose="personalize") == 1
    with pgrecall.connect(conninfo.dsn(user="pgrecall_acme_app"), tenant="acme", principal="ben",
                          scopes=["default"]) as ben:
        assert ben.memory_count() == 2

    async def counted() -> int:
        async with await pgrecall.connect_async(conninfo.dsn(user="pgrecall_acme_app"), tenant="acme",
                                                principal="bot", scopes=["default"]) as amem:
            return await amem.memory_count(purpose="converse")

    assert asyncio.run(counted()) == 1
    with pytest.raises(errors.PgrecallError) as bad:
        acme.memory_count(purpose="gossip")
    assert bad.value.sqlstate == "PR102"


def test_generated_signatures_are_the_functions(acme):
    assert _generated.SIGNATURES["memory_count"] == (
        ("principal", "text", False), ("scopes", "text[]", False), ("purpose", "text", True),
        ("include_superseded", "boolean", True))
