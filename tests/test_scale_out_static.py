"""A tenant stays distributable with Citus schema-based sharding (docs/scale-out.md).

The checker (tests/scaleout.py) reads an installed tenant from the catalog; these tests run it on a
fresh tenant with scopes (so the passage partitions exist) and on deliberately bad objects, each of
which it must report.
"""

import psycopg
import pytest

import scaleout
from pgrecall import sources


@pytest.fixture
def tenant(db, make_tenant):
    make_tenant("acme")
    db.execute("select acme.add_scope('default')")
    db.execute("select acme.add_scope('other')")
    return "acme"


def test_an_installed_tenant_meets_the_schema_based_sharding_rules(db, tenant):
    violations = scaleout.check(db, tenant)
    assert violations == [], "\n".join(map(str, violations))


def test_known_deviations_are_still_there_or_leave_the_list(db, tenant):
    # A KNOWN entry that no longer fires means it was fixed: remove it, and the note in docs/scale-out.md.
    still = {(v.rule, v.obj) for v in scaleout.known(db, tenant)}
    assert still == set(scaleout.KNOWN)


def test_the_reviewed_advisory_locks_are_the_ones_taken(db, tenant):
    takers = {r[0] for r in db.execute(
        "select proname from pg_proc where pronamespace = 'acme'::regnamespace "
        "and prosrc ~ 'pg_(try_)?advisory_(xact_)?lock'")}
    assert takers == scaleout.REVIEWED_ADVISORY


def test_no_shipped_sql_creates_a_schema_and_its_objects_in_one_statement():
    # Citus: "Creating a distributed schema and tables in a single SQL statement is not supported".
    import re

    texts = [m.body for m in sources.migrations()] + [sources.control_sql()]
    for text in texts:
        assert not re.search(r"create\s+schema[^;]*\bcreate\s+(table|view|index|sequence)", text, re.I)


BAD = [
    ("foreign key out of the tenant",
     ["create table elsewhere.registry (id bigint primary key)",
      "create table acme.bad (id bigint primary key, r bigint references elsewhere.registry (id))"],
     "foreign key", "acme.bad.bad_r_fkey"),
    ("foreign key into the tenant",
     ["create table elsewhere.bad (id bigint primary key, m bigint references acme.memory (id))"],
     "foreign key", "elsewhere.bad.bad_m_fkey"),
    ("view over another schema",
     ["create table elsewhere.registry (id bigint)", "create view acme.bad as select id from elsewhere.registry"],
     "dependency", "rule _RETURN on view acme.bad"),
    ("view elsewhere over the tenant",
     ["create view elsewhere.bad as select id from acme.memory"],
     "dependency", "rule _RETURN on view elsewhere.bad"),
    ("function reading another tenant",
     ["select pgrecall.create_tenant('beta')",
      "create function acme.bad() returns bigint language sql as $$ select count(*) from beta.memory $$"],
     "function body", "bad"),
    ("dynamic SQL naming another schema",
     ["create function acme.bad() returns void language plpgsql as $f$ begin "
      "execute format($q$ delete from elsewhere.x where id = %s $q$, 1); end $f$"],
     "function body", "bad"),
    ("search_path with another schema",
     ["create function acme.bad() returns int language sql set search_path = acme, elsewhere as $$ select 1 $$"],
     "search_path", "bad"),
    ("integer sequence",
     ["create table acme.bad (id integer generated always as identity primary key)"],
     "sequence", "bad_id_seq"),
    ("default from another schema's sequence",
     ["create sequence elsewhere.seq", "create table acme.bad (id bigint default nextval('elsewhere.seq'))"],
     "dependency", "default value for column id of table acme.bad"),
    ("column type from another schema",
     ["create type elsewhere.mood as enum ('ok')", "create table acme.bad (m elsewhere.mood)"],
     "dependency", "column m of table acme.bad"),
    ("inheritance",
     ["create table acme.bad () inherits (acme.memory_revision)"],
     "inheritance", "acme.bad"),
    ("partition in another schema",
     ["create table elsewhere.bad partition of acme.passage for values in ('nowhere')"],
     "partition", "elsewhere.bad"),
    ("trigger running DDL",
     ["create function acme.bad() returns trigger language plpgsql as $f$ begin "
      "execute 'create table acme.t' || new.id || ' (x int)'; return new; end $f$",
      "create trigger bad after insert on acme.peer for each row execute function acme.bad()"],
     "trigger DDL", "bad"),
    ("notify channel shared by every tenant",
     ["create function acme.bad() returns void language plpgsql as $f$ begin "
      "perform pg_notify('pgrecall_embed', ''); end $f$"],
     "notify channel", "bad"),
    ("unreviewed advisory lock",
     ["create function acme.bad() returns void language plpgsql as $f$ begin "
      "perform pg_advisory_xact_lock(42); end $f$"],
     "advisory lock", "bad"),
    ("SQL function with parameters reading a table",
     ["create function acme.bad(p bigint) returns text language sql stable "
      "as $$ select m.body from acme.memory m where m.id = p $$"],
     "sql function", "bad"),
    ("SQL set called by a tenant function",
     ["create function acme.bad(p bigint) returns bigint language plpgsql stable as $f$ begin "
      "return (select count(*) from acme._eligible_memories(p, array['default'], null, false, null)); end $f$"],
     "sql set called", "bad"),
    ("clock in DO UPDATE SET",
     ["create function acme.bad() returns void language plpgsql as $f$ begin "
      "insert into acme.corpus_stat as c (singleton, documents) values (true, 0) on conflict (singleton) "
      "do update set refreshed_at = clock_timestamp(); end $f$"],
     "do update", "bad"),
    ("clock in an UPDATE",
     ["create function acme.bad() returns void language plpgsql as $f$ begin "
      "update acme.corpus_stat c set refreshed_at = clock_timestamp(); end $f$"],
     "volatile in update", "bad"),
    ("an array subscript in an UPDATE's SET",
     ["create function acme.bad(p text[]) returns void language plpgsql as $f$ begin "
      "update acme.corpus_stat c set documents = cardinality(p), refreshed_at = (array[now()])[1]; end $f$"],
     "subscript in update", "bad"),
    ("security definer owned by someone else",
     ["create function acme.bad() returns int language sql security definer set search_path = pg_catalog "
      "as $$ select 1 $$"],
     "security definer", "bad"),
]


def test_the_checker_reports_each_bad_object(db, tenant):
    # Each bad object is created in a transaction that is rolled back (DDL is transactional), so one
    # tenant serves every case.
    missed = []
    for label, ddl, rule, obj in BAD:
        with db.transaction(force_rollback=True):
            db.execute("create schema elsewhere")
            for statement in ddl:
                db.execute(statement)
            violations = scaleout.check(db, tenant)
        if not any(v.rule == rule and v.obj == obj for v in violations):
            missed.append(f"{label}: expected {rule}: {obj}; found " + ("; ".join(map(str, violations)) or "nothing"))
    assert missed == []
    assert scaleout.check(db, tenant) == []


def test_comments_and_messages_naming_the_control_schema_are_not_references():
    body = """
        -- pgrecall.tenant is the registry (a comment)
        perform set_config('pgrecall.last_recall', v_meta::text, false);
        raise exception 'see pgrecall.set_tenant_setting()';
        select * from acme.memory m where m.id = 1;
        execute format($q$ select 1 from pgrecall.tenant $q$);
    """
    names = scaleout.qualified_names(body)
    assert ("pgrecall", "last_recall", True) in names
    assert ("pgrecall", "set_tenant_setting", True) in names
    assert ("pgrecall", "tenant", False) in names  # dollar-quoted dynamic SQL is code
    assert not any(s == "pgrecall" and t == "tenant" and lit for s, t, lit in names)
    assert ("acme", "memory", False) in names


def test_recall_and_the_other_reads_run_in_a_read_only_transaction(acme, conninfo):
    # Read replicas serve recall only if it writes nothing: a hot standby accepts read-only
    # transactions alone (no writes, no sequences, no NOTIFY), which a READ ONLY transaction mimics.
    import numpy as np
    import psycopg

    said = acme.append("Ana lives in Porto and swims in the sea", role="user", actor="ana")
    kept = acme.remember("Ana lives in Porto", evidence=[said], purposes=["converse"])
    acme.remember("Ana swims in the sea", evidence=[said], purposes=["converse"])
    vectors = np.random.default_rng(1).standard_normal((2, 384))
    with conninfo.connect(user="pgrecall_acme_worker") as worker:
        jobs = worker.execute("select memory_id, generation, model, input_version "
                              "from acme.claim_embedding_jobs('t', 10) order by memory_id").fetchall()
        worker.execute("select acme.complete_embedding_jobs('t', %s, %s, %s, %s, %s)",
                    ([j[0] for j in jobs], [j[1] for j in jobs],
                     ["[" + ",".join(map(str, v)) + "]" for v in vectors], jobs[0][2], jobs[0][3]))
    with psycopg.connect(conninfo.dsn(user="pgrecall_acme_app")) as conn:
        conn.read_only = True
        with conn.transaction():
            hybrid, meta = conn.execute(
                "select to_jsonb(items), to_jsonb(meta) from acme.recall_answer('bot', array['default'], 'where does Ana live', "
                "'converse', %s, 'hybrid', 5, p_query_model => 'all-MiniLM-L6-v2')",
                (vectors[0].tolist(),)).fetchone()
            lexical = conn.execute("select memory_id from acme.recall('bot', array['default'], 'Porto')").fetchall()
            read = conn.execute("select * from acme.read('bot', array['default'], %s, 'converse')",
                                (kept.memory_id,)).fetchall()
            passages = conn.execute("select * from acme.search_messages('bot', array['default'], 'Porto')").fetchall()
    assert hybrid and meta["dense_available"] is True
    assert lexical and read and passages


def test_distributing_a_tenant_on_a_server_without_citus_names_what_is_missing(db):
    db.execute("select pgrecall.create_tenant('solo')")
    with pytest.raises(psycopg.Error) as caught:
        db.execute("select pgrecall.distribute_tenant('solo')")
    assert caught.value.sqlstate == "PR009" and "not a Citus coordinator" in str(caught.value)
    db.rollback()
    assert db.execute("select name from pgrecall.list_tenants()").fetchall() == [("solo",)]


def test_rebalancing_on_a_server_without_citus_names_what_is_missing(db):
    db.execute("select pgrecall.create_tenant('solo')")
    with pytest.raises(psycopg.Error) as caught:
        db.execute("select * from pgrecall.rebalance_tenants()")
    assert caught.value.sqlstate == "PR009" and "not a Citus coordinator" in str(caught.value)
