"""Least privilege inside a tenant: each login role may do its duty and nothing more.

The findings of issue #12, tried as a hostile holder of the application's
credentials would, are the first tests here; the duty matrix (sql/duties.sql)
is checked against the catalog.
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

import pgrecall
from conftest import run_together
from pgrecall import errors, names
from pgrecall.embedder import to_literal


def remembered(mem, text, **kw):
    offset = mem.append(text, role="user", actor=kw.pop("actor", "ana"))
    return mem.remember(text, evidence=[offset], purposes=["converse"], **kw).memory_id


def denied(conn, statement, params=()):
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(statement, params)


@pytest.fixture
def app(acme, conninfo):
    with conninfo.connect(user="pgrecall_acme_app") as conn:
        yield conn


@pytest.fixture
def worker(acme, conninfo):
    with conninfo.connect(user="pgrecall_acme_worker") as conn:
        yield conn


@pytest.fixture
def admin(acme, conninfo):
    with conninfo.connect(user="pgrecall_acme_admin") as conn:
        yield conn


# -- the findings, each as the attacker tried it -------------------------------------------------------------------

def test_the_app_cannot_queue_and_claim_text_that_eligibility_hides(acme, app, worker):
    """Finding 1: rebuild + claim_embedding_jobs handed the app a memory private to another peer."""
    secret = remembered(acme, "zqsecret ben's private note", audience="ben")
    with pytest.raises(errors.MemoryNotFound):
        acme.read(secret, purpose="converse", principal="ana")
    denied(app, "select acme.rebuild_embeddings(true)")
    denied(app, "select input from acme.claim_embedding_jobs('x', 10000)")
    # the worker, whose duty it is, gets the text to embed and nothing else
    cur = worker.execute("select * from acme.claim_embedding_jobs('w', 10)")
    assert [c.name for c in cur.description] == ["memory_id", "generation", "input", "model", "input_version",
                                                 "text_input"]
    assert [r[0] for r in cur.fetchall()] == [secret]
    # and may not read, recall or write memories as any principal
    denied(worker, "select * from acme.read('ana', array['default'], %s, 'converse')", (secret,))
    denied(worker, "select * from acme.recall('ben', array['default'], 'zqsecret')")
    denied(worker, "select * from acme.remember('ana', array['default'], 'default', 'x', array[1], array['converse'])")


def test_the_app_cannot_claim_log_text_or_session_messages(acme, app):
    """Finding 2: claim_passage_embedding_jobs and claim_tasks returned text of any scope and session."""
    session = acme.create_session("chat")
    acme.add_session_peers(session, ["ana", "ben"])
    acme.add_messages(session, [{"actor": "ana", "body": "zqmessage I live in Lisbon"}])
    denied(app, "select * from acme.claim_passage_embedding_jobs('x', 10000)")
    denied(app, "select * from acme.claim_tasks('x', 10000)")


def test_the_app_cannot_store_vectors(acme, app, worker, db):
    """Finding 3: complete_embedding_jobs let the app poison dense recall with vectors of its choosing."""
    m = remembered(acme, "a memory to embed")
    (jid, gen, _, model, version, _), = worker.execute("select * from acme.claim_embedding_jobs('w', 10)").fetchall()
    forged = to_literal([1.0] + [0.0] * 383)
    denied(app, "select acme.complete_embedding_jobs('w', %s, %s, %s, %s, %s)", ([jid], [gen], [forged], model, version))
    denied(app, "select acme.release_embedding_jobs('w', %s)", ([jid],))
    assert db.execute("select count(*) from acme.memory_embedding").fetchone()[0] == 0
    assert jid == m


def test_the_app_cannot_switch_the_embedding_version(acme, app, db):
    """Finding 4: set_embedding_version('bogus-model', 1) took the dense arm dark."""
    denied(app, "select acme.set_embedding_version('bogus-model', 1)")
    denied(app, "select acme.set_setting('dense_floor', '0.99')")
    assert db.execute("select value #>> '{}' from acme.setting where key = 'embedding_model'").fetchone()[0] \
        == "all-MiniLM-L6-v2"


def test_erasure_is_the_admins_and_its_receipt_says_who_ran_it(acme, app, worker, acme_admin, db):
    """Finding 5: erase('{"scope": "secret"}', 'x') erased a whole scope, and erase took no principal."""
    acme.add_scope("secret")
    acme.append("zqkept in the secret scope", role="user", actor="ana", scope="secret", scopes=["secret"])
    denied(app, """select acme.erase('mallory', '{"scope": "secret"}', 'x')""")
    denied(worker, """select acme.erase('mallory', '{"scope": "secret"}', 'x')""")
    denied(app, "select acme.expire()")
    denied(app, "select * from acme.erasure_requests()")
    assert db.execute("select count(*) from acme.observation where scope = 'secret'").fetchone()[0] == 1
    with pytest.raises(errors.NotPermitted) as info:
        acme.erase({"scope": "secret"}, reason="x", actor="mallory")
    assert isinstance(info.value, PermissionError) and "_admin" in info.value.hint
    receipt = acme_admin.erase({"scope": "secret"}, reason="project closed", actor="dpo@example.org",
                               requested_by="ticket 12")
    assert receipt.observations_erased == 1 and set(receipt.residual.values()) == {0}
    assert (receipt.actor, receipt.actor_role, receipt.requested_by) == \
        ("dpo@example.org", "pgrecall_acme_admin", "ticket 12")
    [stored] = acme_admin.erasure_requests()
    assert stored.actor == "dpo@example.org" and stored.actor_role == "pgrecall_acme_admin"


# The app's functions that take no principal: each is tenant-wide by nature and returns no memory text.
TENANT_WIDE_APP_FUNCTIONS = {
    "add_peer", "add_scope", "embedding_status", "peer_config", "predicates", "queue_status", "schema_info",
    "scopes", "set_peer_config", "settings", "work_queue_status",
}


def test_every_app_function_without_a_principal_is_a_known_tenant_wide_one(acme, db):
    """Finding 6: 28 app-callable functions took no principal, all granted by one rule."""
    rows = db.execute("""
        select distinct p.proname::text from pg_proc p
         where p.pronamespace = 'acme'::regnamespace and left(p.proname, 1) <> '_'
           and has_function_privilege('pgrecall_acme_app', p.oid, 'EXECUTE')
           and not ('p_principal' = any (coalesce(p.proargnames, '{}')))""").fetchall()
    assert {r[0] for r in rows} == TENANT_WIDE_APP_FUNCTIONS


def test_recall_metadata_is_not_left_in_the_session_for_another_tenant(db, make_tenant, conninfo):
    """Finding 7, shared session: a recall in tenant a, then b.last_recall() returned a's query and terms."""
    make_tenant("a")
    make_tenant("b")
    for t in ("a", "b"):
        db.execute(f"grant pgrecall_{t}_app to pgrecall_tester")
        with pgrecall.connect(conninfo.dsn(user=f"pgrecall_{t}_app"), tenant=t) as mem:
            mem.add_scope("default")
            mem.add_peer("ana")
    # one connection (the tester is a member of both app roles, as a shared pool's user would be)
    with psycopg.connect(conninfo.dsn(), autocommit=True) as conn:
        conn.execute("select * from a.recall('ana', array['default'], 'zqwhisper about the surprise party')")
        conn.execute("select * from a.search_messages('ana', array['default'], 'zqwhisper about the party')")
        assert not conn.execute("select to_regproc('b.last_recall')").fetchone()[0]
        assert not conn.execute("select to_regproc('a.last_recall')").fetchone()[0]
        assert not conn.execute("select to_regproc('b.last_message_search')").fetchone()[0]
        leaked = conn.execute("select name from pg_settings where setting like '%zqwhisper%'").fetchall()
        assert leaked == []
        assert conn.execute("select current_setting('pgrecall.last_recall', true)").fetchone()[0] in (None, "")


def test_a_pooled_connection_hands_nothing_of_one_principals_recall_to_the_next(acme, conninfo):
    """Finding 7, pooled connection: the next borrower read the previous principal's query."""
    from psycopg_pool import ConnectionPool

    remembered(acme, "the zqparty is a surprise for ben", audience="ana")
    with ConnectionPool(conninfo.dsn(user="pgrecall_acme_app"), min_size=1, max_size=1,
                        kwargs={"autocommit": True}, open=True) as pool:
        mem = pgrecall.connect(tenant="acme", pool=pool, scopes=["default"])
        ana = mem.recall("zqparty surprise", principal="ana", embed=False)
        assert ana.meta.query == "zqparty surprise" and ana.meta.fused_count == 1  # with its own answer
        ben = mem.recall("dinner", principal="ben", embed=False)
        assert ben.meta.query == "dinner" and ben.items == []
        with pool.connection() as conn:  # the same backend, as the next borrower gets it
            assert conn.execute("select name from pg_settings where setting like '%zqparty%'").fetchall() == []
            for (fn,) in conn.execute("""select p.oid::regprocedure::text from pg_proc p
                                          where p.pronamespace = 'acme'::regnamespace and p.pronargs = 0
                                            and has_function_privilege(p.oid, 'EXECUTE')
                                            and p.prorettype <> 'trigger'::regtype""").fetchall():
                text = str(conn.execute(f"select {fn.replace('()', '')}()").fetchall())
                assert "zqparty" not in text, fn


def test_another_tenant_holding_lock_keys_cannot_delay_this_one(acme, make_tenant, conninfo, db, acme_worker):
    """Finding 8: tenant b's app role blocked a's remember, refresh_term_stats and log_turn by taking a key."""
    make_tenant("b")
    oid = db.execute("select 'acme'::regnamespace::oid::bigint").fetchone()[0]
    text = "Ana likes tea"
    key = __import__("hashlib").md5(text.lower().encode()).hexdigest()
    with conninfo.connect(user="pgrecall_b_app") as b:
        # the keys the old code used, and keys built from acme's schema oid as the issue suggested
        for k1, k2 in [("pgrecall.remember", f"default:{key}"), ("pgrecall.term_stats", "acme"),
                       ("pgrecall.turn_log", "default:ana-log")]:
            b.execute("select pg_advisory_lock(hashtext(%s), hashtext(%s))", (k1, k2))
            b.execute("select pg_advisory_lock(hashtextextended(%s, 0))", (f"{oid}:{k1}:{k2}",))
        b.execute("select pg_advisory_lock(%s)", (oid,))
        # and it can neither read nor lock the rows acme's writers serialise on
        denied(b, "select * from acme.lock_stripe")
        denied(b, "select * from acme.lock_stripe for update")
        with conninfo.connect(user="pgrecall_acme_app") as a:
            a.execute("set statement_timeout = '5s'")
            started = time.monotonic()
            off = a.execute("select acme.append_observation('ana', array['default'], 'default', %s, 'user')",
                            (text,)).fetchone()[0]
            a.execute("select * from acme.remember('ana', array['default'], 'default', %s, array[%s]::bigint[], "
                      "array['converse'])", (text, off))
            a.execute("select * from acme.log_turn('ana', array['default'], 'default', 'ana-log', 'ana', 'hi')")
            assert time.monotonic() - started < 5
        acme_worker.refresh_term_stats()
    # no tenant function takes an advisory lock at all (issue #28: any role can read a key in pg_locks and
    # take it, salted or not); writers serialise on rows of the tenant's own lock_stripe
    callers = db.execute("""select p.proname from pg_proc p where p.pronamespace = 'acme'::regnamespace
                             and p.prosrc ilike '%pg_advisory%' order by 1""").fetchall()
    assert callers == []


def test_two_writers_of_one_text_still_serialise(acme, conninfo):
    """The salted keys still do their job inside the tenant: concurrent remembers of one text make one memory."""
    off = acme.append("Ana likes tea", role="user", actor="ana")
    results, barrier = [], threading.Barrier(4)

    def write(_):
        with pgrecall.connect(conninfo.dsn(user="pgrecall_acme_app"), tenant="acme", principal="bot",
                              scopes=["default"]) as mem:
            barrier.wait()
            results.append(mem.remember("Ana likes tea", evidence=[off], purposes=["converse"]))

    run_together(write, range(4), barrier)
    assert sorted(r.status for r in results) == ["created", "noop", "noop", "noop"]
    assert len({r.memory_id for r in results}) == 1


# -- the duty matrix --------------------------------------------------------------------------------------------------

def test_every_public_function_has_a_declared_duty_and_every_declared_one_exists(acme, db):
    declared = {r[0] for r in db.execute("select function_name from pgrecall.function_duty")}
    public = {r[0] for r in db.execute("select distinct proname::text from pg_proc where pronamespace = "
                                        "'acme'::regnamespace and left(proname, 1) <> '_'")}
    assert public == declared


def test_the_catalogs_grants_are_exactly_the_duty_matrix(acme, db):
    duties = dict(db.execute("select function_name, duties from pgrecall.function_duty").fetchall())
    rows = db.execute("""
        select p.oid::regprocedure::text, p.proname::text, r.duty,
               has_function_privilege('pgrecall_acme_' || r.duty, p.oid, 'EXECUTE')
          from pg_proc p cross join unnest(array['app', 'worker', 'admin']) r(duty)
         where p.pronamespace = 'acme'::regnamespace""").fetchall()
    wrong = [(sig, duty, can) for sig, name, duty, can in rows if can != (duty in duties.get(name, ()))]
    assert wrong == []
    # and nobody else: PUBLIC holds nothing, the ACLs name only the owner and the three roles
    grantees = {r[0] for r in db.execute("""
        select distinct a.grantee::regrole::text from pg_proc p cross join aclexplode(p.proacl) a
         where p.pronamespace = 'acme'::regnamespace""")}
    assert grantees <= {"pgrecall_acme_owner", "pgrecall_acme_app", "pgrecall_acme_worker", "pgrecall_acme_admin"}


def test_a_function_without_a_declared_duty_stops_the_install(acme, db):
    db.execute("set role pgrecall_acme_owner")
    try:
        db.execute("create function acme.sneaky() returns int language sql as 'select 1'")
    finally:
        db.execute("reset role")
    with pytest.raises(psycopg.Error) as info:
        db.execute("select * from pgrecall.upgrade_tenant('acme')")
    assert info.value.sqlstate == "PR008" and "sneaky" in str(info.value)
    assert not db.execute("select has_function_privilege('pgrecall_acme_app', 'acme.sneaky()', 'EXECUTE')").fetchone()[0]


def test_the_roles_log_in_and_can_do_nothing_else(acme, db):
    rows = db.execute("""select rolname, rolcanlogin, rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolbypassrls
                           from pg_roles where rolname like 'pgrecall\\_acme\\_%' order by 1""").fetchall()
    assert rows == [
        ("pgrecall_acme_admin", True, False, False, False, False, False),
        ("pgrecall_acme_app", True, False, False, False, False, False),
        ("pgrecall_acme_owner", False, False, False, False, False, False),
        ("pgrecall_acme_worker", True, False, False, False, False, False),
    ]
    for duty in ("app", "worker", "admin"):
        member_of = db.execute("select count(*) from pg_auth_members where member = %s::regrole",
                               (f"pgrecall_acme_{duty}",)).fetchone()[0]
        assert member_of == 0
        assert not db.execute("select has_schema_privilege(%s, 'acme', 'CREATE')", (f"pgrecall_acme_{duty}",)).fetchone()[0]


def test_an_old_tenant_gains_its_worker_and_admin_roles_on_upgrade(db):
    """A tenant made before the split had only an app role: the upgrade creates the others and re-grants."""
    db.execute("select pgrecall.create_tenant('old')")
    db.execute("update pgrecall.tenant set worker_role = null, admin_role = null where name = 'old'")
    db.execute("drop owned by pgrecall_old_worker")
    db.execute("drop role pgrecall_old_worker")
    db.execute("select * from pgrecall.upgrade_tenant('old')")
    assert db.execute("select worker_role, admin_role from pgrecall.tenant where name = 'old'").fetchone() == \
        ("pgrecall_old_worker", "pgrecall_old_admin")
    assert db.execute("select has_function_privilege('pgrecall_old_worker', 'old.claim_tasks(text,integer,text[])', "
                      "'EXECUTE')").fetchone()[0]


# -- the deriver's writes go through the task it holds ------------------------------------------------------------

def test_a_worker_writes_only_what_a_leased_task_allows(acme, acme_worker, db):
    session = acme.create_session("chat")
    acme.add_session_peers(session, ["ana", {"peer": "ben", "observe_others": True}])
    first = acme.add_messages(session, [{"actor": "ana", "body": "I live in Lisbon"}])[0].offset
    other = acme.append("ben's unrelated words", role="user", actor="ben")
    tasks = acme_worker.claim_tasks("w", limit=10)
    local = next(t for t in tasks if t.observer == "ben")
    item = {"body": "ana lives in Lisbon", "evidence": [first], "purposes": ["converse"]}
    with pytest.raises(errors.InvalidArgument):  # evidence outside the task's messages
        acme_worker.task_remember(local, [{**item, "evidence": [other]}])
    with pytest.raises(errors.InvalidArgument):  # the perspective is the task's, not the deriver's choice
        acme_worker.task_remember(local, [{**item, "audience": None}])
    [r] = acme_worker.task_remember(local, [item])
    row = db.execute("""select p.name, o.name, m.scope from acme.memory m
                          left join acme.peer p on p.id = m.audience_peer_id
                          left join acme.peer o on o.id = m.observer_peer_id where m.id = %s""",
                     (r.memory_id,)).fetchone()
    assert row == ("ben", "ben", "default")  # ben's local view, visible to ben only
    with pytest.raises(errors.InvalidArgument):
        acme_worker.task_assert_fact(local, "lives_in", "Lisbon", evidence=[{"offset": other, "quote": "ben"}])
    fact = acme_worker.task_assert_fact(local, "lives_in", "Lisbon", evidence=[{"offset": first, "quote": "Lisbon"}])
    assert db.execute("select s.name from acme.fact f join acme.entity s on s.id = f.subject_id where f.id = %s",
                      (fact.fact_id,)).fetchone()[0] == "ana"
    assert acme_worker.complete_task(local, {"observations": [{"text": "ana lives in Lisbon",
                                                                "memory_id": r.memory_id}]}) == "done"
    with pytest.raises(errors.LeaseLost):  # a finished task allows nothing more
        acme_worker.task_remember(local, [item])


def test_notifications_carry_only_a_wake_up(acme, conninfo, acme_worker):
    """Whoever listens on a tenant's channels (its worker; no other role can name them, test_hostile_neighbour)
    hears nothing but a wake-up."""
    with conninfo.connect(user="pgrecall_acme_worker") as listener:
        channels = {names.listen(listener, kind, "acme") for kind in ("embed", "derive")}
        session = acme.create_session("chat")
        acme.add_session_peers(session, ["ana", "ben"])
        acme.add_messages(session, [{"actor": "ana", "body": "zqnotify I live in Lisbon"}])
        remembered(acme, "zqnotify a memory")
        heard = list(listener.notifies(timeout=2, stop_after=3))
    assert {n.channel for n in heard} == channels
    assert {n.payload for n in heard} == {""}
