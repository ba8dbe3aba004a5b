"""The write paths plan their statements once per session (a generic plan): a plan made while the tables
were small must still look rows up one by one when they have grown. A statement that joins instead of
probing reads the whole log (or every entity) on each call: O(rows) per write, unseen in a fresh test.

Each test makes the session plan its statements on a nearly empty tenant, grows the table that
statement reads, then counts the rows one more call reads from it (PostgreSQL's per-transaction
table counters)."""

from __future__ import annotations

import psycopg
import pytest
from psycopg.types.json import Jsonb

GROWN = 1500
READ_AT_MOST = 20  # a handful of index probes, whatever the size of the table


def rows_read(conn: psycopg.Connection, table: str) -> int:
    """Rows of the table read so far in this transaction: by sequential scans, bitmap scans, and the index
    scans of each of its indexes."""
    return conn.execute(
        "select pg_stat_get_xact_tuples_returned(%s::regclass) + pg_stat_get_xact_tuples_fetched(%s::regclass)"
        " + (select coalesce(sum(pg_stat_get_xact_tuples_fetched(i.indexrelid)), 0)"
        "      from pg_index i where i.indrelid = %s::regclass)", (table, table, table)).fetchone()[0]


def read_by(conn: psycopg.Connection, table: str, statement: str, params: tuple) -> int:
    """Rows of ``table`` read by one call of ``statement``, in a transaction of its own."""
    with conn.transaction():
        before = rows_read(conn, table)
        conn.execute(statement, params).fetchall()
        return rows_read(conn, table) - before


@pytest.fixture
def app(acme, conninfo, db):
    # The plans are made on a tenant's first rows with the statistics of tables never analyzed. An
    # autovacuum ANALYZE in the middle of a test (it came under load) gave some plans the statistics of a
    # handful of rows instead, and the append then read the whole log: a different question from the one
    # these tests ask, and not one they can time.
    for (table,) in db.execute("select c.oid::regclass::text from pg_class c "
                               "where c.relnamespace = 'acme'::regnamespace and c.relkind = 'r'").fetchall():
        db.execute(f"alter table {table} set (autovacuum_enabled = false)")
    with psycopg.connect(conninfo.dsn(user="pgrecall_acme_app"), autocommit=True) as conn:
        yield conn


def grow_the_log(app: psycopg.Connection) -> None:
    rows = [{"body": f"filler turn {i}", "source_role": "user"} for i in range(GROWN)]
    app.execute("select count(*) from acme.append_observations('bot', array['default'], 'default', %s)", (Jsonb(rows),))


REMEMBER = ("select * from acme.remember('bot', array['default'], 'default', %s, array[%s]::bigint[], "
            "array['converse'])")
APPEND = "select acme.append_observation('bot', array['default'], 'default', %s, 'user')"


def test_remember_probes_its_evidence_instead_of_reading_the_log(app):
    first = app.execute(APPEND, ("Ana likes tea",)).fetchone()[0]
    app.execute(REMEMBER, ("Ana likes tea", first)).fetchall()  # plans made now, on a one-row log
    grow_the_log(app)
    said = app.execute(APPEND, ("Ben likes coffee",)).fetchone()[0]
    read = read_by(app, "acme.observation", REMEMBER, ("Ben likes coffee", said))
    assert read <= READ_AT_MOST, f"remember() read {read} observations of a {GROWN}-turn log to check one offset"


def test_append_queues_its_passages_without_reading_the_log(app):
    app.execute(APPEND, ("the first turn",)).fetchone()
    grow_the_log(app)
    read = read_by(app, "acme.observation", APPEND, ("one more turn",))
    assert read <= READ_AT_MOST, f"append_observation() read {read} observations of a {GROWN}-turn log"


def test_a_new_name_is_looked_up_among_aliases_not_among_every_entity(app):
    said = app.execute(APPEND, ("I like thing 0 and thing 1 and all the others",)).fetchone()[0]
    assert_fact = ("select * from acme.assert_fact('bot', array['default'], 'default', 'Ana', 'likes', %s, %s)")
    app.execute(assert_fact, ("thing 0", Jsonb([{"offset": said, "quote": "I like"}]))).fetchall()
    items = [{"subject": "Ana", "predicate": "likes", "object": f"filler {i}",
              "evidence": [{"offset": said, "quote": "I like"}]} for i in range(GROWN)]
    app.execute("select count(*) from acme.assert_facts('bot', array['default'], 'default', %s)", (Jsonb(items),))
    read = read_by(app, "acme.entity", assert_fact, ("thing 1", Jsonb([{"offset": said, "quote": "I like"}])))
    assert read <= READ_AT_MOST, f"assert_fact() read {read} of {GROWN} entities to find one new name"


def passages_read(conn: psycopg.Connection) -> int:
    """Rows of the tenant's passages read so far in this transaction, over every partition of the table."""
    parts = [r[0] for r in conn.execute(
        "select inhrelid::regclass::text from pg_inherits where inhparent = 'acme.passage'::regclass").fetchall()]
    return sum(rows_read(conn, part) for part in parts)


def passages_read_by(conn: psycopg.Connection, statement: str, params: tuple) -> int:
    with conn.transaction():
        before = passages_read(conn)
        conn.execute(statement, params).fetchall()
        return passages_read(conn) - before


def refresh_as_the_worker_does(conninfo) -> None:
    """What the worker runs after a drain when the statistics are stale (the first time: always)."""
    with psycopg.connect(conninfo.dsn(user="pgrecall_acme_worker"), autocommit=True) as worker:
        worker.execute("select * from acme.refresh_term_stats()").fetchall()


def test_append_registers_and_queues_its_passages_without_reading_the_scopes_passages(app, conninfo):
    """The session's plans, PostgreSQL's foreign-key checks among them, are made on an empty passage table;
    the scope grows and the worker refreshes the statistics once, as after its first drain."""
    app.execute(APPEND, ("the first turn",)).fetchone()  # plans made now, on an empty passage table
    grow_the_log(app)
    refresh_as_the_worker_does(conninfo)
    read = passages_read_by(app, APPEND, ("one more turn",))
    assert read <= READ_AT_MOST, f"append_observation() read {read} passages of a {GROWN}-turn scope"


def test_a_vector_given_with_a_memory_finds_the_passage_it_lends_to_by_key(acme, app, db, conninfo):
    """At input version 1 a memory's vector is lent to the turn it quotes word for word (passage_vectors.sql):
    the passage is found by its turn, not among every passage of the scope."""
    import pgrecall

    with pgrecall.connect(conninfo.dsn(user="pgrecall_acme_admin"), tenant="acme", role="admin") as admin:
        admin.set_embedding_version("all-MiniLM-L6-v2", 1)
    vector = "[" + ",".join(["0.05"] * 384) + "]"
    remember = ("select * from acme.remember_many('bot', '{default}', 'default', %s::jsonb, %s, "
                "'all-MiniLM-L6-v2', 1)")

    def quoted(text: str) -> tuple:
        offset = app.execute(APPEND, (text,)).fetchone()[0]
        return (Jsonb([{"body": text, "evidence": [offset], "purposes": ["converse"]}]), [vector])

    app.execute(remember, quoted("Ana likes tea")).fetchall()  # plans made now, on a one-turn scope
    grow_the_log(app)
    refresh_as_the_worker_does(conninfo)
    args = quoted("Ben likes coffee")
    read = passages_read_by(app, remember, args)
    assert read <= READ_AT_MOST, f"remember_many() with a vector read {read} passages of a {GROWN}-turn scope"
    lent = db.execute("select count(*) from acme.passage where vector_memory_id is not null").fetchone()[0]
    assert lent == 2, "each memory's vector is lent to the turn it quotes"


def test_an_append_queues_the_turn_befores_memory_without_reading_the_conversation(app):
    """_queue_turns_before: each append looks up the turn before it in its conversation and that turn's
    memories (to embed them again with the new turn); a plan made on a short conversation must still probe."""
    session = app.execute("select acme.create_session('bot', array['default'], 'default', 'a long chat')").fetchone()[0]
    app.execute("""select count(*) from acme.add_session_peers('bot', array['default'], %s, '["ana", "bot"]')""",
                (session,))
    append = ("select acme.append_observation('bot', array['default'], 'default', %s, 'user', 'message', 'ana', %s)")
    remember = ("select memory_id from acme.remember('bot', array['default'], 'default', %s, array[%s]::bigint[], "
                "array['converse'], p_audience => 'ana', p_embedding => %s::halfvec, "
                "p_embedding_model => 'all-MiniLM-L6-v2', p_embedding_input_version => 2)")
    vector = "[" + ",".join(["0.1"] * 384) + "]"

    def turn(k: int) -> None:
        said = app.execute(append, (f"Ana sailed on day {k}", session)).fetchone()[0]
        app.execute(remember, (f"Ana sailed on day {k}", said, vector)).fetchall()

    for k in range(3):  # plans made now, on a three-turn conversation
        turn(k)
    for k in range(3, 300):
        turn(k)
    for table in ("acme.observation", "acme.memory_link", "acme.memory", "acme.memory_embedding"):
        read = read_by(app, table, append, ("one more turn", session))
        assert read <= READ_AT_MOST, f"append_observation() read {read} rows of {table} in a 300-turn conversation"
