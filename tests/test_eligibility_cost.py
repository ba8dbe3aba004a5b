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
