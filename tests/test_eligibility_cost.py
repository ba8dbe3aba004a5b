"""Eligibility costs what the eligible set costs: a principal who may see a few memories of many has
them found through an index, not by reading and filtering every memory of the tenant.

Recall plans its steps once per call shape (a generic plan: it does not know which principal asks), so
the plans checked here are the generic ones, for the statements recall runs over the eligible set."""

import json

import pytest
from psycopg import sql

USERS = 100
PER_USER = 40


@pytest.fixture
def many_users(acme, db):
    """Every memory is private to one of USERS peers (an app with one audience per user)."""
    for u in range(USERS):
        acme.add_peer(f"u{u:03d}", "human")
    n = USERS * PER_USER
    offsets = acme.append_many([{"body": f"note {i} from the user", "source_role": "user", "actor": "ana"}
                                for i in range(n)])
    made = acme.remember_many([{"body": f"user {i % USERS} keeps note number {i}", "evidence": [off],
                                "purposes": ["converse"], "audience": f"u{i % USERS:03d}"}
                               for i, off in enumerate(offsets)])
    assert all(r.created for r in made)
    db.execute("analyze acme.memory")
    return db.execute("select id from acme.peer where name = 'u007'").fetchone()[0]


def generic_plan(db, statement: str, types: str, args: tuple) -> dict:
    db.execute("set plan_cache_mode = force_generic_plan")
    db.execute(f"prepare probe ({types}) as {statement}")
    try:
        values = sql.SQL(", ").join(sql.Literal(a) for a in args)
        return db.execute(sql.SQL("explain (format json) execute probe ({})").format(values)).fetchone()[0][0]["Plan"]
    finally:
        db.execute("deallocate probe")
        db.execute("reset plan_cache_mode")


def scans(plan: dict) -> list[tuple[str, str]]:
    found = [(plan["Node Type"], plan.get("Relation Name"))]
    for child in plan.get("Plans", []):
        found += scans(child)
    return found


ELIGIBLE = "acme._eligible_memories($1, $2, 'converse', false, null)"


@pytest.mark.parametrize("statement", [
    f"select count(*) from {ELIGIBLE} e",
    # the dense arm's probe: are fewer than exact_dense_below eligible?
    f"select count(*) from (select 1 from {ELIGIBLE} e limit 1000) x",
], ids=["eligible set", "dense probe"])
def test_one_users_memories_are_found_through_an_index(many_users, db, statement):
    plan = generic_plan(db, statement, "bigint, text[]", (many_users, ["default", "other"]))
    assert ("Seq Scan", "memory") not in scans(plan), json.dumps(plan, indent=1)


def test_a_user_recalls_only_their_own_among_many(many_users, acme):
    result = acme.recall("note number", mode="lexical", limit=50, principal="u007")
    assert len(result.items) == PER_USER
    assert all(i.body.startswith("user 7 keeps") for i in result.items)


def test_a_small_share_of_a_larger_tenant_is_searched_exactly(acme, db, conninfo):
    """The filtered HNSW scan visits about depth / (eligible share) memories, each visit worth ~12 exact
    distances: below sqrt(12 x depth x embedded) eligible memories the dense arm is exact, even above
    exact_dense_below (a floor; 0 always searches the index)."""
    from pgrecall.embedder import get_embedder
    from test_recall import embed_all

    offsets = acme.append_many([{"body": f"said {i}", "source_role": "user", "actor": "ana"} for i in range(100)])
    acme.remember_many([{"body": f"a note about harbour ship number {i}", "evidence": [off],
                         "purposes": ["converse"], "audience": "ana" if i % 12 == 0 else "ben"}
                        for i, off in enumerate(offsets)])  # ana sees 9 of 100
    embed_all(conninfo)
    db.execute("analyze acme.memory_embedding")
    query = list(map(float, get_embedder().embed(["a ship in the harbour"])[0]))
    ana = db.execute("select id from acme.peer where name = 'ana'").fetchone()[0]

    def method():
        return db.execute("select method, cardinality(ids) from acme._dense_arm(%s, '{default}', 'converse', false, "
                          "null, %s, 20)", (ana, query)).fetchone()

    db.execute("select pgrecall.set_tenant_setting('acme', 'exact_dense_below', '5')")
    assert method() == ("exact", 9)  # sqrt(12 x 20 x 100) = 155 > 9
    db.execute("select pgrecall.set_tenant_setting('acme', 'exact_dense_below', '0')")
    assert method()[0] == "hnsw"


# -- Many eligible: the index first, without reading the eligible rows to count them ---------------

MANY = 4200
FLOOR = 2000  # exact_dense_below: fewer eligible than this are searched exactly


class HashEmbedder:
    """Unit vectors drawn from a hash of each text. What these tests check (which search runs, how many
    rows it reads, which memories come back) depends on how many memories are eligible, not on what the
    vectors mean, and the real model would take half a minute over 8,400 texts."""

    name = "all-MiniLM-L6-v2"

    def embed(self, texts, batch_size=64):
        import hashlib

        import numpy as np

        out = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
            out.append(v / np.linalg.norm(v))
        return np.stack(out)


@pytest.fixture
def many_eligible(acme, db, conninfo):
    from pgrecall.worker import Worker

    offsets = acme.append_many([{"body": f"said {i}", "source_role": "user", "actor": "ana"} for i in range(MANY)])
    acme.remember_many([{"body": f"harbour log entry {i}", "evidence": [off], "purposes": ["converse"]}
                        for i, off in enumerate(offsets)])
    Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker"), embedder=HashEmbedder()).drain()
    # Statistics stay as they are now, whatever the test changes next (autovacuum would refresh them).
    db.execute("alter table acme.memory set (autovacuum_enabled = false)")
    db.execute("analyze acme.memory")
    db.execute("analyze acme.memory_embedding")
    db.execute("select * from acme.refresh_term_stats()")  # else each recall counts its terms' frequencies live
    db.execute(f"select pgrecall.set_tenant_setting('acme', 'exact_dense_below', '{FLOOR}')")
    # Hashed vectors are near-orthogonal: with no floor every search returns all it finds.
    db.execute("select pgrecall.set_tenant_setting('acme', 'dense_floor', '-1')")
    return list(map(float, HashEmbedder().embed(["harbour log entry 7"])[0]))


def recall_reading(conninfo, query: str, embedding: list[float] | None, mode: str,
                   limit: int = 20) -> tuple[int, list[int], dict]:
    """Rows of acme.memory one recall by ana read, the ids it returned, and its metadata."""
    import psycopg

    from test_plans_stay_probes import rows_read

    with psycopg.connect(conninfo.dsn(user="pgrecall_acme_app")) as conn:
        before = rows_read(conn, "acme.memory")
        items, meta = conn.execute("select to_jsonb(items), to_jsonb(meta) from acme.recall_answer('ana', '{default}', %s, "
                                   "'converse', %s, %s, %s)", (query, embedding, mode, limit)).fetchone()
        read = rows_read(conn, "acme.memory") - before
    return read, [i["memory_id"] for i in items], meta


def test_many_eligible_are_searched_through_the_index_without_reading_them_first(many_eligible, conninfo):
    """Telling few from many by reading up to exact_dense_below eligible rows costs ~0.3 us a row on every
    recall (1.5 ms at 100k memories, 5 ms at 1M). When the planner expects many, the index is searched
    first and finding enough settles it."""
    read, found, meta = recall_reading(conninfo, "harbour", many_eligible, "dense")
    assert meta["dense_method"] == "hnsw"
    assert len(found) == 20
    assert read < FLOOR // 4, f"a dense recall read {read} memories to find 20 of {MANY} eligible"


def test_many_eligible_under_a_small_bound_are_searched_through_the_index_too(many_eligible, db, conninfo):
    """With the default floor the bound is about 1,000 at this size, too small to ask the planner by the
    bound alone; the term-statistics snapshot counts 4,200 memories, so many may be eligible: the index
    first, not a read of 1,000 eligible rows on every recall (0.8 ms of each recall at 10k)."""
    db.execute("select pgrecall.set_tenant_setting('acme', 'exact_dense_below', '1000')")
    limit = db.execute("select acme._exact_dense_limit(20, (select documents from acme.corpus_stat))").fetchone()[0]
    assert 1000 <= limit < 2000
    read, found, meta = recall_reading(conninfo, "harbour", many_eligible, "dense")
    assert meta["dense_method"] == "hnsw"
    assert len(found) == 20
    assert read < limit // 4, f"a dense recall read {read} memories to find 20 of {MANY} eligible"


def test_a_wrong_estimate_still_searches_the_few_eligible_exactly(many_eligible, acme, db, conninfo):
    """Statistics taken while ana could see every memory: now she may see 12. The planner still expects
    thousands; the index search finds fewer than asked, and the few are then searched exactly, all of them."""
    ben = db.execute("select id from acme.peer where name = 'ben'").fetchone()[0]
    kept = [r[0] for r in db.execute("select id from acme.memory order by id limit 12")]
    db.execute("update acme.memory set audience_peer_id = %s where not id = any(%s)", (ben, kept))
    estimate = db.execute("select acme._eligible_estimate((select id from acme.peer where name = 'ana'), "
                          "'{default}', 'converse', false, null)").fetchone()[0]
    assert estimate >= 2 * FLOOR  # the statistics are stale, as meant
    _, found, meta = recall_reading(conninfo, "harbour", many_eligible, "dense")
    assert meta["dense_method"] == "exact"
    assert sorted(found) == sorted(kept)


def test_counting_missing_embeddings_reads_the_queue_not_every_eligible_memory(many_eligible, conninfo):
    """The queue's statistics still count the 8,400 jobs the worker has just done: a plan made from them
    joined the empty queue to every memory the principal may see, on every recall until autovacuum came.
    (A query of stop words only: the lexical arm then reads nothing either.)"""
    read, _, meta = recall_reading(conninfo, "of the", None, "lexical", 5)
    assert meta["missing_embeddings"] == 0
    assert read < FLOOR // 4, f"a lexical recall read {read} memories of {MANY}"


# -- Turns: a user's messages among many users' sessions ------------------------------------------------------

@pytest.fixture
def many_sessions(acme, db):
    """USERS users, each in a session of their own with the bot: every turn is seen by its user and the bot."""
    for u in range(USERS):
        acme.add_peer(f"u{u:03d}", "human")
    for u in range(USERS):
        s = acme.create_session(f"with u{u:03d}")
        acme.add_session_peers(s, [f"u{u:03d}", "bot"])
        acme.add_messages(s, [{"actor": f"u{u:03d}", "body": f"user {u} asks about the harbour schedule {i}"}
                              for i in range(PER_USER // 4)])
    db.execute("analyze acme.passage")
    return db.execute("select id from acme.peer where name = 'u007'").fetchone()[0]


VISIBLE_PASSAGES = "acme._passages_in($1, $2, null, null)"


@pytest.mark.parametrize("statement", [
    f"select count(*) from {VISIBLE_PASSAGES} p",
    # the semantic arm's probe: are fewer than exact_dense_below passages of the principal's embedded?
    f"select count(*) from (select 1 from {VISIBLE_PASSAGES} p where p.embedding_model = 'm' limit 1000) x",
], ids=["visible passages", "semantic probe"])
def test_one_users_turns_are_found_through_an_index(many_sessions, db, statement):
    """Message search filters passages by the audience each copies from its turn (the memories' rule): for a
    user who may see 10 of 1,000 turns, through the audience index, not by reading every passage."""
    plan = generic_plan(db, statement, "bigint, text[]", (many_sessions, ["default"]))
    # (a generic plan keeps every partition: the empty ones are read whole, which costs nothing)
    partition = db.execute("select acme._passage_partition_name('default')").fetchone()[0]
    assert ("Seq Scan", partition) not in scans(plan), json.dumps(plan, indent=1)
    assert ("Bitmap Heap Scan", partition) in scans(plan)


def test_a_user_searches_only_their_own_turns_among_many(many_sessions, acme):
    found = acme.search_messages("harbour schedule", mode="lexical", limit=50, principal="u007")
    assert len(found.items) == PER_USER // 4
    assert all(h.body.startswith("user 7 asks") for h in found.items)
    assert found.meta.lexical_count == PER_USER // 4
