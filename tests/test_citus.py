"""pgrecall on a real Citus cluster: a coordinator and two workers started from `make citus`.

Run by `make test-citus` (PGRECALL_TEST_CITUS=1); skipped otherwise, and an error when asked for
without a Citus build. One cluster for the module; each test makes tenants of its own names and
drops them, so tests do not see each other's tenants.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import threading
import time
from datetime import UTC, datetime

import psycopg
import pytest
from psycopg.types.json import Jsonb

import pgrecall
from pgrecall import cli, errors, install
from pgrecall.cluster import LocalCluster, find_citus_build

pytestmark = pytest.mark.skipif(os.environ.get("PGRECALL_TEST_CITUS") != "1",
                                reason="the Citus cluster tests run with make test-citus (PGRECALL_TEST_CITUS=1)")

_names = itertools.count(1)

@pytest.fixture(scope="module")
def cluster():
    build = find_citus_build()
    if build is None:
        pytest.fail("PGRECALL_TEST_CITUS=1 but no Citus build in .citus/: run make citus")
    with LocalCluster(build, workers=2) as running:
        with psycopg.connect(running.coordinator.dsn()) as conn:
            install.install(conn)
        yield running


@pytest.fixture
def tenant_factory(cluster):
    made: list[str] = []

    def make(prefix: str = "t") -> str:
        name = f"{prefix}{next(_names)}"
        with psycopg.connect(cluster.coordinator.dsn()) as conn:
            install.install(conn, [name])
        made.append(name)
        return name

    yield make
    with psycopg.connect(cluster.coordinator.dsn(), autocommit=True) as conn:
        for name in made:
            conn.execute("select pgrecall.drop_tenant(%s)", (name,))


def handle(cluster, tenant, role="app", principal="bot", scopes=("default",)):
    return pgrecall.connect(cluster.coordinator.dsn(user=f"pgrecall_{tenant}_{role}"), tenant=tenant,
                            principal=principal, scopes=list(scopes))


def populated(cluster, tenant):
    with handle(cluster, tenant) as mem:
        mem.add_scope("default")
        for name, kind in (("bot", "agent"), ("ana", "human"), ("ben", "human")):
            mem.add_peer(name, kind)


def placements(cluster, tenant):
    with psycopg.connect(cluster.coordinator.dsn()) as conn:
        return conn.execute("select distinct nodeport from citus_shards where table_name::text like %s",
                            (f"{tenant}.%",)).fetchall()


@contextlib.contextmanager
def on_the_tenants_worker(cluster, tenant):
    """A session of the tenant's app role on the worker holding its shards, as the coordinator's delegated call
    runs there, and the server's notices to it (what Citus says it executes), in order."""
    node = placements(cluster, tenant)[0][0]
    holder = next(w for w in cluster.worker_nodes if w.port == node)
    said: list[str] = []
    with psycopg.connect(holder.dsn(user=f"pgrecall_{tenant}_app"), autocommit=True) as conn:
        conn.add_notice_handler(lambda d: said.append(d.message_primary or ""))
        yield conn, said


def test_a_new_tenant_is_a_distributed_schema_on_one_worker(cluster, tenant_factory):
    acme = tenant_factory("acme")
    with psycopg.connect(cluster.coordinator.dsn()) as conn:
        assert conn.execute("select schema_name::text from citus_schemas").fetchall() == [(acme,)]
        tables = conn.execute("select count(*) from citus_tables where table_name::text like %s "
                              "and citus_table_type = 'schema'", (f"{acme}.%",)).fetchone()[0]
        local = conn.execute("""select count(*) from pg_class c where c.relnamespace = %s::regnamespace
                                 and c.relkind in ('r', 'p')
                                 and not exists (select 1 from pg_dist_partition p where p.logicalrelid = c.oid)""",
                             (acme,)).fetchone()[0]
        node = conn.execute("select pgrecall.tenant_node(%s)", (acme,)).fetchone()[0]
        # The control plane stays on the coordinator, an ordinary schema.
        assert conn.execute("select count(*) from citus_tables where table_name::text like 'pgrecall.%'").fetchone() == (0,)
    assert tables >= 30 and local == 0
    assert len(placements(cluster, acme)) == 1
    assert node in {f"127.0.0.1:{w.port}" for w in cluster.worker_nodes}
    # Every function of the tenant exists on every worker, with the same grants.
    for worker in cluster.worker_nodes:
        with psycopg.connect(worker.dsn()) as conn:
            count, app_may_recall = conn.execute(
                """select count(*), bool_or(p.proname = 'recall' and has_function_privilege(%s, p.oid, 'execute'))
                     from pg_proc p where p.pronamespace = %s::regnamespace""",
                (f"pgrecall_{acme}_app", acme)).fetchone()
        assert count > 200 and app_may_recall


def test_remember_and_recall_through_the_coordinator_keep_to_the_audience(cluster, tenant_factory):
    acme = tenant_factory("acme")
    populated(cluster, acme)
    with handle(cluster, acme, principal="ana") as ana:
        # the turn is Ana's alone (her note to the agent), the tea is said to everyone in the scope
        turn = ana.append("I am planning a surprise party for Ben", role="user", actor="ana", audience=["ana"])
        tea = ana.append("I drink green tea every morning", role="user", actor="ana")
        ana.remember("Ana plans a surprise party for Ben", evidence=[turn], purposes=["converse"], audience="ana")
        ana.remember("Ana drinks green tea every morning", evidence=[tea], purposes=["converse"])
        assert [i.body for i in ana.recall("surprise party", mode="lexical").items] == \
            ["Ana plans a surprise party for Ben"]
    with handle(cluster, acme, principal="ben") as ben:
        assert ben.recall("surprise party", mode="lexical").items == []
        assert ben.search_messages("surprise party", mode="lexical").items == []
        assert [i.body for i in ben.recall("green tea", mode="lexical").items] == ["Ana drinks green tea every morning"]


def test_two_tenants_on_two_workers_cannot_reach_each_other(cluster, tenant_factory):
    acme, umbrella = tenant_factory("acme"), tenant_factory("umb")
    with psycopg.connect(cluster.coordinator.dsn(), autocommit=True) as conn:
        where = {t: conn.execute("select pgrecall.tenant_node(%s)", (t,)).fetchone()[0] for t in (acme, umbrella)}
        if where[acme] == where[umbrella]:
            other = next(w for w in cluster.worker_nodes if f"127.0.0.1:{w.port}" != where[acme])
            conn.execute("select pgrecall.move_tenant(%s, '127.0.0.1', %s)", (umbrella, other.port))
            where[umbrella] = f"127.0.0.1:{other.port}"
    assert where[acme] != where[umbrella]
    populated(cluster, acme)
    with handle(cluster, acme) as mem:
        mem.remember("acme keeps its zqsecret plan", purposes=["converse"])
    # umbrella's application role, on the coordinator and on each worker directly
    for node in cluster.nodes:
        with psycopg.connect(node.dsn(user=f"pgrecall_{umbrella}_app")) as conn:
            for statement in (f"select * from {acme}.recall('bot', array['default'], 'zqsecret')",
                              f"select body from {acme}.memory"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(statement)
                conn.rollback()


def test_facts_keep_one_current_value_on_the_worker(cluster, tenant_factory):
    acme = tenant_factory("acme")
    populated(cluster, acme)
    with handle(cluster, acme) as mem:
        o1 = mem.append("I live in Lisbon", role="user", actor="ana")
        o2 = mem.append("I moved to Porto last May", role="user", actor="ana")
        mem.assert_fact("ana", "lives_in", "Lisbon", evidence=[{"offset": o1, "quote": "I live in Lisbon"}],
                        valid_from=datetime(2020, 1, 1, tzinfo=UTC))
        moved = mem.assert_fact("ana", "lives_in", "Porto", evidence=[{"offset": o2, "quote": "I moved to Porto"}],
                                valid_from=datetime(2026, 5, 1, tzinfo=UTC))
        assert moved.outcome == "superseded"
        assert [f.object for f in mem.facts_as_of("ana", "lives_in")] == ["Porto"]
        assert [f.object for f in mem.facts_as_of("ana", "lives_in", valid_at=datetime(2026, 4, 1, tzinfo=UTC))] \
            == ["Lisbon"]
    # The exclusion constraint holds on the shard: a second current value is refused by the database.
    # (A plain INSERT ... VALUES: routed to the shard, its error keeps its SQLSTATE; Citus reports one
    # from the COPY of an INSERT ... SELECT as an internal error.)
    with psycopg.connect(cluster.coordinator.dsn()) as conn:
        scope, subject, asserted_by = conn.execute(
            f"select f.scope, f.subject_id, f.asserted_by from {acme}.fact f "
            "where upper_inf(f.valid) and upper_inf(f.known)").fetchone()
        with pytest.raises(psycopg.errors.ExclusionViolation):
            conn.execute(f"""insert into {acme}.fact (scope, subject_id, predicate, single_valued, object_value,
                             statement, valid, known, asserted_by)
                             values (%s, %s, 'lives_in', true, 'Madrid', 'ana lives in Madrid',
                                     tstzrange('2027-01-01', null), tstzrange(now(), null), %s)""",
                         (scope, subject, asserted_by))


def test_a_fact_retracted_through_the_coordinator_is_no_longer_believed_but_its_history_stays(cluster,
                                                                                                tenant_factory):
    acme = tenant_factory("acme")
    populated(cluster, acme)
    with handle(cluster, acme) as mem:
        turn = mem.append("I work at Acme", role="user", actor="ana")
        fact = mem.assert_fact("ana", "works_at", "Acme", evidence=[{"offset": turn, "quote": "I work at Acme"}])
        believed = datetime.now(UTC)
        assert [i.body for i in mem.recall("where does ana work", embed=False).items if i.item == "fact"] == \
            ["ana works at Acme"]
        retracted = mem.retract_fact(fact.fact_id, reason="she was joking")
        assert retracted.fact_id == fact.fact_id and retracted.known.upper is not None
        assert mem.facts_as_of("ana", "works_at") == []
        assert [i for i in mem.recall("where does ana work", embed=False).items if i.item == "fact"] == []
        assert [f.object for f in mem.facts_as_of("ana", "works_at", known_at=believed)] == ["Acme"]
        with pytest.raises(errors.MemoryNotLive, match="no longer current"):
            mem.retract_fact(fact.fact_id, reason="again")


def test_an_alias_added_through_the_coordinator_names_the_entity_until_its_data_subject_is_erased(cluster,
                                                                                                   tenant_factory):
    acme = tenant_factory("acme")
    with handle(cluster, acme) as mem:
        mem.add_scope("default")
        mem.add_peer("bot", "agent")
        mem.add_peer("ana", "human", data_subject_id="subj-ana")
        turn = mem.append("I work at Acme", role="user", actor="ana")
        mem.assert_fact("ana", "works_at", "Acme", evidence=[{"offset": turn, "quote": "I work at Acme"}])
        assert mem.add_entity_alias("ana", "Ana Silva").aliases == ["ana silva"]
        assert mem.add_entity_alias("ana", "zqnick", data_subject_id="subj-nick").aliases == ["ana silva", "zqnick"]
        assert [f.object for f in mem.facts_as_of("Ana Silva", "works_at")] == ["Acme"]
        assert [f.object for f in mem.facts_as_of("zqnick", "works_at")] == ["Acme"]
    with psycopg.connect(cluster.coordinator.dsn()) as conn:
        # the alias without a subject of its own is the data of the peer it names
        assert conn.execute(f"select alias, data_subject_id from {acme}.entity_alias_subject order by alias").fetchall() \
            == [("ana silva", "subj-ana"), ("zqnick", "subj-nick")]
    with handle(cluster, acme, role="admin") as admin:
        receipt = admin.erase({"data_subject": "subj-nick"}, reason="request #2", actor="dpo")
    assert set(receipt.residual.values()) == {0} and receipt.rows_erased["entity_alias"] == 1
    with handle(cluster, acme) as mem:
        with pytest.raises(errors.UnknownEntity):
            mem.facts_as_of("zqnick")
        assert [f.object for f in mem.facts_as_of("Ana Silva", "works_at")] == ["Acme"]


def test_an_erasure_on_the_cluster_leaves_a_zero_residual_and_its_receipt(cluster, tenant_factory):
    acme = tenant_factory("acme")
    populated(cluster, acme)
    with handle(cluster, acme) as mem:
        turn = mem.append("I am zqvictor and I like sailing", role="user", actor="ana", data_subject_id="subj-v")
        mem.remember("zqvictor likes sailing", evidence=[turn], purposes=["converse"], about=["zqvictor"])
        other = mem.append("I like chess", role="user", actor="ben")
        mem.remember("someone else likes chess", evidence=[other], purposes=["converse"])
    with handle(cluster, acme, role="admin") as admin:
        receipt = admin.erase({"data_subject": "subj-v"}, reason="request #1", actor="dpo")
    assert receipt.completed_at and receipt.observations_erased == 1
    assert set(receipt.residual.values()) == {0}
    with psycopg.connect(cluster.coordinator.dsn()) as conn:
        left = conn.execute(f"select count(*) from {acme}.memory where body like '%%zqvictor%%'").fetchone()[0]
        kept = conn.execute(f"select count(*) from {acme}.memory").fetchone()[0]
    assert (left, kept) == (0, 1)


def test_a_recall_answers_through_the_coordinator(cluster, tenant_factory):
    acme = tenant_factory("acme")
    populated(cluster, acme)
    with handle(cluster, acme) as mem:
        assert mem.recall("tea", mode="lexical").items == []


def test_a_recall_runs_on_the_tenants_worker_in_one_round_trip(cluster, tenant_factory):
    acme = tenant_factory("acme")
    populated(cluster, acme)
    with psycopg.connect(cluster.coordinator.dsn(user=f"pgrecall_{acme}_app"), autocommit=True) as conn:
        plan = "\n".join(r[0] for r in conn.execute(
            f"explain (verbose) select * from {acme}.recall('bot', array['default'], 'tea')").fetchall())
    assert "Custom Scan (Citus" in plan and "Task Count: 1" in plan, plan


def test_distributing_without_citus_or_moving_to_a_stranger_is_refused(cluster, tenant_factory):
    acme = tenant_factory("acme")
    with psycopg.connect(cluster.coordinator.dsn(), autocommit=True) as conn:
        before = conn.execute("select pgrecall.tenant_node(%s)", (acme,)).fetchone()[0]
        with pytest.raises(psycopg.Error) as stranger:
            conn.execute("select pgrecall.move_tenant(%s, '127.0.0.1', 1)", (acme,))
        assert stranger.value.sqlstate == "PR010" and "127.0.0.1:1 is not a worker" in str(stranger.value)
        assert conn.execute("select pgrecall.tenant_node(%s)", (acme,)).fetchone()[0] == before
        # the command says the same, with its exit code, and moves nothing either
        os.environ["PGRECALL_DSN"] = cluster.coordinator.dsn()
        try:
            assert cli.main(["tenant", "move", acme, "--to", "127.0.0.1:1"]) != 0
            assert cli.main(["tenant", "move", acme, "--to", "nowhere"]) == 2
        finally:
            del os.environ["PGRECALL_DSN"]
        assert conn.execute("select pgrecall.tenant_node(%s)", (acme,)).fetchone()[0] == before
        with pytest.raises(psycopg.Error) as missing:
            conn.execute("select pgrecall.distribute_tenant('nosuchtenant')")
        assert missing.value.sqlstate == "PR003"


def test_an_append_and_a_remember_through_the_coordinator_are_written_once_on_the_worker(cluster, tenant_factory):
    acme = tenant_factory("acme")
    populated(cluster, acme)
    with handle(cluster, acme) as mem:
        offsets = [mem.append(f"turn {i} about zqkite flying", role="user", actor="ana") for i in range(3)]
        made = mem.remember("Ana flies zqkites on Sundays", evidence=offsets[:1], purposes=["converse"])
        again = mem.remember("Ana flies zqkites on Sundays", evidence=offsets[:1], purposes=["converse"])
    assert offsets == [1, 2, 3] and made.status == "created" and again.status == "noop"
    with psycopg.connect(cluster.coordinator.dsn()) as conn:
        node = conn.execute("select pgrecall.tenant_node(%s)", (acme,)).fetchone()[0]
        counts = conn.execute(f"""select (select count(*) from {acme}.observation), (select count(*) from {acme}.memory),
                                         (select count(*) from {acme}.passage), (select count(*) from {acme}.embedding_job),
                                         (select sum(passages) from {acme}.passage_stat)""").fetchone()
    assert counts == (3, 1, 3, 1, 3)
    # The rows are in the shard on the tenant's worker, and nowhere else.
    holder = next(w for w in cluster.worker_nodes if f"127.0.0.1:{w.port}" == node)
    with psycopg.connect(cluster.coordinator.dsn()) as conn:
        shard, port = conn.execute("select shard_name, nodeport from citus_shards where table_name = %s::regclass",
                                   (f"{acme}.observation",)).fetchone()
    assert port == holder.port
    with psycopg.connect(holder.dsn()) as conn:
        conn.execute("set citus.override_table_visibility = off")
        assert conn.execute(f"select count(*) from {shard}").fetchone() == (3,)  # shard_name is qualified


def test_a_remember_on_the_worker_writes_without_subplans(cluster, tenant_factory):
    # Citus planned remember's one writing statement (a chain of CTEs) as subplans whose results it wrote out
    # and read back, most of a remember's time on the cluster; its writes are now statements of their own.
    acme = tenant_factory("acme")
    populated(cluster, acme)
    with handle(cluster, acme, principal="ana") as ana:
        turn = ana.append("I fly kites with Ben on Sundays", role="user", actor="ana", audience=["ana"])
    with on_the_tenants_worker(cluster, acme) as (conn, said):
        conn.execute("set client_min_messages = debug1")
        made = conn.execute(f"""select * from {acme}.remember('ana', array['default'], 'default',
                                    'Ana flies kites with Ben on Sundays', array[%s]::bigint[], array['converse'],
                                    p_about => array['Ben', 'kites', ' ben '],
                                    p_widening_reason => 'Ana said the whole team may know')""", (turn,)).fetchall()
        conn.execute("reset client_min_messages")
    assert [r[1] for r in made] == ["created"]
    assert [m for m in said if "subplan" in m or "intermediate result" in m] == [], said
    # what it wrote, read through the coordinator: the memory with the reason it widens by, its links, entities
    memory_id = made[0][0]
    with psycopg.connect(cluster.coordinator.dsn()) as conn:
        widening = conn.execute(f"select widening_reason from {acme}.memory where id = %s", (memory_id,)).fetchone()
        links = conn.execute(f"""select l.link_type, coalesce(e.name, o.log_offset::text)
                                   from {acme}.memory_link l left join {acme}.entity e on e.id = l.target_entity_id
                                   left join {acme}.observation o on o.id = l.target_observation_id
                                  where l.memory_id = %s order by 1, 2""", (memory_id,)).fetchall()
        registered = conn.execute(f"""select kind, count(*) from {acme}.projection_dependency
                                        where kind in ('memory', 'memory_link', 'entity') group by 1 order by 1""").fetchall()
    assert widening == ("Ana said the whole team may know",)
    assert links == [("about", "Ben"), ("about", "kites"), ("derived_from", str(turn))]
    assert registered == [("entity", 2), ("memory", 1), ("memory_link", 3)]


def test_a_remember_on_the_worker_reads_each_table_alone_and_writes_rows_as_values(cluster, tenant_factory):
    # Inside a delegated call Citus plans each statement on a tenant table, then deparses its shard query and plans
    # it again to run it locally, unless the statement takes its fast path: one table and no subquery, CTE or join,
    # or an INSERT ... VALUES (an INSERT ... SELECT is evaluated apart and its rows copied into the shard). A
    # remember's reads are each such a statement of one table, and it writes its rows as values.
    acme = tenant_factory("acme")
    populated(cluster, acme)
    with handle(cluster, acme, principal="ana") as ana:
        turn = ana.append("Ana rides her bike to work on Mondays", role="user", actor="ana")
    with on_the_tenants_worker(cluster, acme) as (conn, said):
        conn.execute("set citus.log_local_commands = on")
        made = conn.execute(f"""select * from {acme}.remember('ana', array['default'], 'default',
                                    'Ana rides her bike to work on Mondays', array[%s]::bigint[], array['converse'],
                                    p_audience => 'ana')""", (turn,)).fetchall()
    assert [r[1] for r in made] == ["created"]
    local = [m.removeprefix("executing the command locally: ") for m in said
             if m.startswith("executing the command locally: ")]
    assert [m for m in said if m.startswith("executing the copy locally")] == [], said
    assert [q for q in local if not q.startswith(("SELECT", "INSERT"))] == [], local
    reads = [q for q in local if q.startswith("SELECT")]
    assert [q for q in reads if q.count("SELECT") > 1 or " JOIN " in q or "unnest(" in q] == [], reads
    writes = [q for q in local if q.startswith("INSERT")]
    # the memory, its queue row (by trigger), its link to the turn and the link's and the memory's registry rows
    assert len(writes) == 5 and all(" VALUES " in q for q in writes), writes


def _local_statements(said):
    return [m.removeprefix("executing the command locally: ") for m in said
            if m.startswith("executing the command locally: ")]


def _not_on_the_fast_path(local):
    """The local statements Citus plans, deparses for the shard and plans again at every call (a subquery, a join,
    an unnest, a CTE, or a subplan's result read back), and the INSERTs that are not values."""
    return [q for q in local if q.count("SELECT") > 1 or " JOIN " in q or "unnest(" in q.lower() or q.startswith("WITH")
            or "intermediate_result" in q or (q.startswith("INSERT") and " VALUES " not in q)]


def test_an_assertion_on_the_worker_reads_each_table_alone_and_writes_rows_as_values(cluster, tenant_factory):
    # A superseding assertion of a new object: it looks the name up among the aliases, closes the current value,
    # keeps what the old value said before the new one as a piece of its own (with its evidence), and writes the new
    # fact with its evidence and what each derives from. Each was a statement Citus could not take on its fast path:
    # an alias probe with a subquery, an UPDATE in a CTE, the evidence and its registry rows in a writing CTE (planned
    # as subplans whose results were written out, read back and copied into the shards), an INSERT ... SELECT of the
    # old evidence (copied) and an array of the cited turns read by a subquery.
    acme = tenant_factory("acme")
    populated(cluster, acme)
    with handle(cluster, acme, principal="ana") as ana:
        lisbon = ana.append("I live in Lisbon", role="user", actor="ana")
        porto = ana.append("I moved to Porto", role="user", actor="ana")
        first = ana.assert_fact("ana", "lives_in", "Lisbon", evidence=[{"offset": lisbon, "quote": "Lisbon"}],
                                valid_from=datetime(2020, 1, 1, tzinfo=UTC))
    with on_the_tenants_worker(cluster, acme) as (conn, said):
        conn.execute("set citus.log_local_commands = on")
        moved = conn.execute(f"""select fact_id, outcome, closed_facts from {acme}.assert_fact('ana', array['default'],
                                     'default', 'ana', 'lives_in', 'Porto', %s, p_valid_from => '2026-05-01Z')""",
                             (Jsonb([{"offset": porto, "quote": "Porto"}]),)).fetchall()
    assert [(r[1], r[2]) for r in moved] == [("superseded", [first.fact_id])]
    assert [m for m in said if m.startswith("executing the copy locally")] == [], said
    local = _local_statements(said)
    assert local and _not_on_the_fast_path(local) == [], local
    with handle(cluster, acme, principal="ana") as ana:
        assert [(f.object, [e.quote for e in f.evidence]) for f in
                ana.facts_as_of("ana", "lives_in", valid_at=datetime(2026, 4, 1, tzinfo=UTC))] == [("Lisbon", ["Lisbon"])]
        assert [(f.object, [e.quote for e in f.evidence]) for f in ana.facts_as_of("ana", "lives_in")] == \
            [("Porto", ["Porto"])]
    with psycopg.connect(cluster.coordinator.dsn()) as conn:
        registered = conn.execute(f"""select d.kind, o.log_offset from {acme}.projection_dependency d
                                        join {acme}.observation o on o.id = d.observation_id
                                       where d.kind in ('fact', 'fact_evidence', 'entity') order by 1, 2""").fetchall()
    # ana, Lisbon and Porto as entities; the first fact, the piece and the new one; their three evidence rows
    assert registered == [("entity", lisbon), ("entity", lisbon), ("entity", porto), ("entity", porto),
                          ("fact", lisbon), ("fact", lisbon), ("fact", porto),
                          ("fact_evidence", lisbon), ("fact_evidence", lisbon), ("fact_evidence", porto)]


def test_the_derivers_assertion_on_the_worker_reads_its_task_a_table_at_a_time(cluster, tenant_factory):
    # task_assert_fact read the task's scope, its sender, its observer and its message's audience by subqueries,
    # each a statement Citus plans, deparses and plans again at every call on the worker.
    from pgrecall.driver import Memory

    acme = tenant_factory("acme")
    populated(cluster, acme)
    with handle(cluster, acme) as mem:
        s = mem.create_session("chat")
        mem.add_session_peers(s, ["ana", "ben"])
        mem.add_messages(s, [{"actor": "ana", "body": "I live in Lisbon"}])
    holder = next(w for w in cluster.worker_nodes if w.port == placements(cluster, acme)[0][0])
    with psycopg.connect(holder.dsn(user=f"pgrecall_{acme}_worker"), autocommit=True) as conn:
        queue = Memory(acme, conn=conn)
        [task] = queue.claim_tasks("w", limit=1, task_types=["representation"])
        said: list[str] = []
        conn.add_notice_handler(lambda d: said.append(d.message_primary or ""))
        conn.execute("set citus.log_local_commands = on")
        fact = queue.task_assert_fact(task, "lives_in", "Lisbon", worker="w",
                                      evidence=[{"offset": task.messages[0]["offset"], "quote": "Lisbon"}])
        conn.execute("reset citus.log_local_commands")
        queue.complete_task(task, {"observations": [{"text": "ana lives in Lisbon", "fact_id": fact.fact_id}]},
                            worker="w")
    assert fact.outcome == "inserted"
    local = _local_statements(said)
    assert [m for m in said if m.startswith("executing the copy locally")] == [], said
    assert local and _not_on_the_fast_path(local) == [], local
    with handle(cluster, acme, principal="ana") as ana:
        assert [f.object for f in ana.facts_as_of("ana", "lives_in")] == ["Lisbon"]


def test_a_recall_of_memories_that_stand_on_turns_alone_walks_nothing_on_the_worker(cluster, tenant_factory):
    # The permission walk follows derived_from links between memories with a recursive statement, which Citus plans,
    # deparses and plans again on the worker; when no memory recalled stands on another, a probe of the links (one
    # table: the fast path) says so and nothing is walked (one that does is walked: test_recall.py).
    acme = tenant_factory("acme")
    populated(cluster, acme)
    with handle(cluster, acme, principal="ana") as ana:
        turn = ana.append("Ana keeps bees behind the barn", role="user", actor="ana")
        ana.remember("Ana keeps bees behind the barn", evidence=[turn], purposes=["converse"])
    with on_the_tenants_worker(cluster, acme) as (conn, said):
        conn.execute("set citus.log_local_commands = on")
        rows = conn.execute(f"""select body from {acme}.recall('ana', array['default'], 'bees barn', 'converse',
                                    null, 'lexical')""").fetchall()
    assert rows == [("Ana keeps bees behind the barn",)]
    local = [m.removeprefix("executing the command locally: ") for m in said
             if m.startswith("executing the command locally: ")]
    assert [q for q in local if q.startswith("WITH RECURSIVE")] == [], local
    # nor a subquery in a SELECT of its own, read by one-table statements instead (the fact arm's test for any
    # fact, the freshness's log watermarks and queue count)
    assert [q for q in local if q.startswith("SELECT (")] == [], local


def test_a_recall_on_the_worker_reads_its_rows_and_their_provenance_one_table_at_a_time(cluster, tenant_factory):
    # A statement joining tenant tables is planned by Citus, deparsed for the shard and planned again on every
    # delegated call (Citus keeps a local plan only for a table with a distribution key); one of a single table takes
    # the fast path. Recall's matches, its rows and their provenance (the turns cited, withheld or not, who said them,
    # the corrections, the sources, the entities) are read a table at a time and put together by statements of none.
    acme = tenant_factory("acme")
    populated(cluster, acme)
    with handle(cluster, acme, principal="ana") as ana:
        session = ana.create_session("ana and the bot")
        ana.add_session_peers(session, ["ana", "bot"])
        [secret] = [m.offset for m in ana.add_messages(session, [{"actor": "ana", "body": "the lantern key is hidden"}])]
        said = ana.append("Ana keeps the lantern in the shed", role="user", actor="ana")
        moved = ana.append("Ana moved the lantern to the barn", role="user", actor="ana")
        shed = ana.remember("Ana keeps the lantern in the shed", evidence=[said], purposes=["converse"],
                            about=["lantern"]).memory_id
        ana.correct(shed, "Ana keeps the lantern in the barn", revision=1, evidence=[moved])
        key = ana.remember("The lantern key is hidden", evidence=[secret], purposes=["converse"],
                           widening_reason="where the key is is no secret").memory_id
        gift = ana.remember("The lantern is a gift", evidence=[said], purposes=["converse"], audience="ana").memory_id
        both = ana.derive([shed, key, gift], "The lantern and its key",
                          widening_reason="the lantern and its key are no secret")
    with psycopg.connect(cluster.coordinator.dsn(), autocommit=True) as conn:
        conn.execute(f"select {acme}.refresh_term_stats()")  # a snapshot, as a tenant in use has, not a live count
    with on_the_tenants_worker(cluster, acme) as (conn, said_on_worker):
        conn.execute("set citus.log_local_commands = on")
        recall = f"select memory_id, to_jsonb(provenance) from {acme}.recall(%s, array['default'], 'lantern', 'converse', null, 'lexical')"
        rows = dict(conn.execute(recall, ("ben",)).fetchall())
        mine = dict(conn.execute(recall, ("ana",)).fetchall())
    assert set(rows) == {shed, key}  # ben: not the gift, nor what stands on it
    [quote] = rows[key]["observations"]
    assert (quote["offset"], quote["withheld"], quote["text"], quote["actor"]) == (secret, True, None, None)
    assert [(o["offset"], o["actor"], o["corrections"]) for o in rows[shed]["observations"]] == \
        [(said, "ana", []), (moved, "ana", [2])]
    assert rows[shed]["about"] == [{"entity": "lantern", "type": None}]
    assert set(mine) == {shed, key, gift, both}
    assert [m["id"] for m in mine[both]["memories"]] == [shed, key, gift]
    assert [(o["withheld"], o["audience"]) for o in mine[key]["observations"]] == [(False, ["ana", "bot"])]
    local = [m.removeprefix("executing the command locally: ") for m in said_on_worker
             if m.startswith("executing the command locally: ")]
    # Every read of a lexical recall, its matches included, but for the permission walk's recursive statement over
    # the links (which runs only when a memory stands on another) and the count of the memories waiting for their
    # vectors (only while the embedding queue holds jobs, as it does here: no worker ran).
    reads = [q for q in local if not q.startswith("WITH RECURSIVE") and "embedding_job_" not in q]
    shards = re.compile(r"\b\w+\.\w+_\d{4,}\b")
    assert reads and [q for q in reads if q.count("SELECT") > 1 or " JOIN " in q or len(set(shards.findall(q))) > 1] == [], \
        reads


def test_a_dense_and_hybrid_recall_on_the_worker_read_a_table_at_a_time_few_eligible_or_many(cluster,
                                                                                               tenant_factory):
    # The dense arm's reads, the eligible ids when few (an ARRAY(SELECT ...)) and the HNSW search when many (a CTE
    # with an EXISTS per visited vector), were each planned by Citus, deparsed for the shard and planned again on every
    # delegated call. They are statements of one table now (Citus's fast path): the ids by _eligible_ids, the search
    # as the index's order from memory_embedding alone and the eligibility of what it yields from memory alone, and,
    # where the tenant holds as many memories as the bound, whether the principal sees as many, without the ids.
    from pgrecall.worker import Worker

    acme = tenant_factory("acme")
    populated(cluster, acme)
    with handle(cluster, acme) as mem:
        for text in ("My cat Miso only eats salmon", "I drink green tea every morning", "The bike has a flat tyre",
                     "Ben plays the cello on Sundays"):
            turn = mem.append(text, role="user", actor="ana")
            mem.remember(text.replace("My", "Ana's").replace("I drink", "Ana drinks"), evidence=[turn],
                         purposes=["converse"])
        gift = mem.append("The lamp is a gift for Ben", role="user", actor="ana")
        mem.remember("The lamp is a gift for Ben", evidence=[gift], purposes=["converse"], audience="ana")
        # enough memories that "few" (at least sqrt(12 x 20 x 305) = 271) is fewer than the bot sees with a floor of 2
        garden_notes(mem, 300)
    Worker(acme, conninfo=cluster.coordinator.dsn(user=f"pgrecall_{acme}_worker")).drain()
    with psycopg.connect(cluster.coordinator.dsn(), autocommit=True) as conn:
        conn.execute(f"select {acme}.refresh_term_stats()")
    salmon = stored_vector(cluster, acme, "salmon")
    recall = f"""select (a.meta).dense_method, array(select i.body from unnest(a.items) i order by i.rank)
                   from {acme}.recall_answer('bot', array['default'], 'what does the cat eat', 'converse', %s, %s, 3) a"""
    answers = []
    for bound in (None, "2"):  # the default (1,000): few eligible; 2: many, the index searched
        if bound:
            with psycopg.connect(cluster.coordinator.dsn(), autocommit=True) as conn:
                conn.execute(f"select {acme}.set_setting('exact_dense_below', %s)", (bound,))
        with on_the_tenants_worker(cluster, acme) as (conn, said_on_worker):
            conn.execute("set citus.log_local_commands = on")
            for mode in ("dense", "hybrid"):
                method, bodies = conn.execute(recall, (salmon, mode)).fetchone()
                answers.append((mode, method, bodies[0], "The lamp is a gift for Ben" in bodies))
        local = [m.removeprefix("executing the command locally: ") for m in said_on_worker
                 if m.startswith("executing the command locally: ")]
        reads = [q for q in local if not q.startswith("WITH RECURSIVE") and "embedding_job_" not in q]
        shards = re.compile(r"\b\w+\.\w+_\d{4,}\b")
        assert reads and [q for q in reads if q.count("SELECT") > 1 or " JOIN " in q or len(set(shards.findall(q))) > 1] \
            == [], reads
    assert answers == [("dense", "exact", "Ana's cat Miso only eats salmon", False),
                       ("hybrid", "exact", "Ana's cat Miso only eats salmon", False),
                       ("dense", "hnsw", "Ana's cat Miso only eats salmon", False),
                       ("hybrid", "hnsw", "Ana's cat Miso only eats salmon", False)]


def stored_vector(cluster, tenant, fragment):
    """The stored vector of the tenant's one memory whose body holds fragment, as a recall's query embedding."""
    with psycopg.connect(cluster.coordinator.dsn()) as conn:
        [(vector,)] = conn.execute(f"""select me.embedding::real[]::float8[] from {tenant}.memory_embedding me
                                        join {tenant}.memory m on m.id = me.memory_id
                                       where m.body like %s""", (f"%{fragment}%",)).fetchall()
    return vector


def a_tenant_with_a_cat(cluster, tenant_factory, add=None, **settings):
    """A tenant whose bot may see Ana's cat memory (and whatever add writes), every vector stored by the worker, its
    term statistics counted, then the settings given: its name and the cat memory's stored vector."""
    from pgrecall.worker import Worker

    acme = tenant_factory("acme")
    populated(cluster, acme)
    with handle(cluster, acme) as mem:
        turn = mem.append("My cat Miso only eats salmon", role="user", actor="ana")
        mem.remember("Ana's cat Miso only eats salmon", evidence=[turn], purposes=["converse"])
        if add is not None:
            add(mem)
    Worker(acme, conninfo=cluster.coordinator.dsn(user=f"pgrecall_{acme}_worker")).drain()
    with psycopg.connect(cluster.coordinator.dsn(), autocommit=True) as conn:
        conn.execute(f"select {acme}.refresh_term_stats()")
        for key, value in settings.items():
            conn.execute(f"select {acme}.set_setting(%s, %s)", (key, value))
    return acme, stored_vector(cluster, acme, "salmon")


def garden_notes(mem, count):
    """count memories of one scope that the bot may see, each standing on a turn of its own (one call each)."""
    offsets = mem.append_many([{"body": f"Garden note {i}: the row {i} of beans was watered", "source_role": "user",
                                "actor": "ana"} for i in range(count)])
    mem.remember_many([{"body": f"Row {i} of the beans was watered", "evidence": [offset], "purposes": ["converse"]}
                       for i, offset in enumerate(offsets)])


def test_a_principal_seeing_a_share_of_a_distributed_tenant_is_searched_exactly_as_on_one_server(cluster,
                                                                                                  tenant_factory):
    # How many eligible memories are "few" (searched exactly, not through the HNSW index) grows with the tenant:
    # sqrt(12 x depth x memories), at least exact_dense_below. On a Citus node the bound read the planner's row
    # estimate of memory_embedding, which there is the shell of a shard (0 rows), so it stayed at its floor: a
    # principal seeing 155 memories of 156 with a floor of 100 (bound 194 on one server) was searched through the
    # index on Citus and exactly on one server, and could be answered otherwise. The bound now grows with the
    # term-statistics snapshot's count, the same figure on both.
    acme, salmon = a_tenant_with_a_cat(cluster, tenant_factory, lambda mem: garden_notes(mem, 155),
                                       exact_dense_below="100")
    with psycopg.connect(cluster.coordinator.dsn(user=f"pgrecall_{acme}_app"), autocommit=True) as conn:
        for mode in ("dense", "hybrid"):
            method, first = conn.execute(
                f"""select (a.meta).dense_method, (a.items[1]).body
                      from {acme}.recall_answer('bot', array['default'], 'what does the cat eat', 'converse', %s,
                                                %s, 3) a""", (salmon, mode)).fetchone()
            assert (method, first) == ("exact", "Ana's cat Miso only eats salmon"), mode


def test_a_reply_is_found_by_its_questions_words_on_a_distributed_tenant(cluster, tenant_factory):
    """recall_lexical_window through the coordinator: the worker writes the windows on the tenant's worker, and
    the lexical and hybrid arms read them there."""
    def asked_and_answered(mem):
        mem.append("Good morning", role="user", actor="ben")  # so the question does not border the cat's turn
        mem.append("Which zqpottery class did you join last month?", role="user", actor="ben")
        reply = mem.append("We made two bowls and a cup", role="user", actor="ana")
        mem.remember("We made two bowls and a cup", evidence=[reply], purposes=["converse"])

    acme, cat = a_tenant_with_a_cat(cluster, tenant_factory, asked_and_answered)
    with handle(cluster, acme) as mem:
        assert mem.recall("zqpottery", mode="lexical").items == []
    with psycopg.connect(cluster.coordinator.dsn(), autocommit=True) as conn:
        conn.execute(f"select {acme}.set_setting('recall_lexical_window', 'true')")
    with handle(cluster, acme) as mem:
        assert [i.body for i in mem.recall("zqpottery", mode="lexical").items] == ["We made two bowls and a cup"]
        assert mem.recall("zqpottery", mode="hybrid").items[0].body == "We made two bowls and a cup"
    # recall_window_beside: the windows a list of their own beside the memories' own words (the second call of
    # the lexical arm, on the worker too)
    with psycopg.connect(cluster.coordinator.dsn(), autocommit=True) as conn:
        conn.execute(f"select {acme}.set_setting('recall_lexical_window', 'false')")
        conn.execute(f"select {acme}.set_setting('recall_window_beside', 'true')")
    with handle(cluster, acme) as mem:
        assert [i.body for i in mem.recall("zqpottery", mode="lexical").items] == ["We made two bowls and a cup"]
        assert mem.recall("zqpottery", mode="hybrid").items[0].body == "We made two bowls and a cup"
        assert [i.body for i in mem.recall("salmon", mode="lexical").items] == ["Ana's cat Miso only eats salmon"]


def test_a_dense_recall_of_a_tenant_large_enough_for_the_estimate_answers_through_the_coordinator(cluster,
                                                                                                tenant_factory):
    # Before searching, a dense recall of a large tenant asks the planner how many memories the principal may see
    # (_eligible_estimate: EXPLAIN). Citus runs EXPLAIN of a distributed table over a connection of its own to the
    # shard's node, also from that node itself; in a delegated call, which reads the tenant by local execution, Citus
    # then refused the recall's next statement ("cannot switch local execution status"). exact_dense_below 2000 asks
    # for the estimate at any size, as 3,100 memories would at the default.
    def tea(mem):
        said = mem.append("I drink green tea every morning", role="user", actor="ana")
        mem.remember("Ana drinks green tea every morning", evidence=[said], purposes=["converse"])

    acme, salmon = a_tenant_with_a_cat(cluster, tenant_factory, tea, exact_dense_below="2000")
    with psycopg.connect(cluster.coordinator.dsn(user=f"pgrecall_{acme}_app"), autocommit=True) as conn:
        rows = conn.execute(f"""select body from {acme}.recall('bot', array['default'], 'what does the cat eat',
                                    'converse', %s, 'dense', 1)""", (salmon,)).fetchall()
    assert rows == [("Ana's cat Miso only eats salmon",)]


def test_a_recall_on_the_worker_keeps_one_plan_a_statement_from_its_first_call(cluster, tenant_factory):
    # A delegated recall runs on the tenant's worker. With the session's plan_cache_mode (auto) each of its ~200
    # statements was planned anew on its first five calls in a session, and some on every call; recall only reads, and a
    # single-shard table's statement goes to its one shard whatever the values, so it plans generically there as on one
    # server: one plan a statement a session, kept from the first call (a CachedPlan memory context each).
    acme = tenant_factory("acme")
    populated(cluster, acme)
    with handle(cluster, acme, principal="ana") as ana:
        turn = ana.append("Ana keeps bees behind the barn", role="user", actor="ana")
        ana.remember("Ana keeps bees behind the barn", evidence=[turn], purposes=["converse"])
    node = placements(cluster, acme)[0][0]
    holder = next(w for w in cluster.worker_nodes if w.port == node)
    with psycopg.connect(holder.dsn(), autocommit=True) as conn:  # to read its own session's memory contexts
        conn.execute("set citus.enable_ddl_propagation = off")
        conn.execute(f"grant select on pg_backend_memory_contexts to pgrecall_{acme}_app")
        conn.execute(f"grant execute on function pg_get_backend_memory_contexts() to pgrecall_{acme}_app")
    with on_the_tenants_worker(cluster, acme) as (conn, _):
        rows = conn.execute(f"""select body from {acme}.recall('ana', array['default'], 'bees barn', 'converse',
                                    null, 'lexical')""").fetchall()
        kept = conn.execute("""select count(*) from pg_backend_memory_contexts
                                where name = 'CachedPlan' and ident like 'with link as%'""").fetchone()[0]
    assert rows == [("Ana keeps bees behind the barn",)]
    assert kept == 1  # the provenance's assembly (_provenance_of), planned once


def test_a_remember_on_the_worker_keeps_one_plan_for_its_checks_from_its_first_call(cluster, tenant_factory):
    # A delegated remember runs on the tenant's worker. Its checks and reads (the items, their evidence, the numbering)
    # read no table or one by key; with the session's plan_cache_mode (auto) their statements were planned anew on
    # every call (~0.25 ms each for the largest). They plan generically there as on one server, one plan a statement
    # a session; the writes keep the session's mode (Citus cannot plan an INSERT ... SELECT generically).
    acme = tenant_factory("acme")
    populated(cluster, acme)
    with handle(cluster, acme, principal="ana") as ana:
        turn = ana.append("Ana keeps bees behind the barn", role="user", actor="ana")
    node = placements(cluster, acme)[0][0]
    holder = next(w for w in cluster.worker_nodes if w.port == node)
    with psycopg.connect(holder.dsn(), autocommit=True) as conn:  # to read its own session's memory contexts
        conn.execute("set citus.enable_ddl_propagation = off")
        conn.execute(f"grant select on pg_backend_memory_contexts to pgrecall_{acme}_app")
        conn.execute(f"grant execute on function pg_get_backend_memory_contexts() to pgrecall_{acme}_app")
    with on_the_tenants_worker(cluster, acme) as (conn, _):
        [(status,)] = conn.execute(f"""select status from {acme}.remember('ana', array['default'], 'default',
                                           'Ana keeps bees', array[%s]::bigint[], array['converse'])""",
                                   (turn,)).fetchall()
        kept = conn.execute("""select count(*) from pg_backend_memory_contexts
                                where name = 'CachedPlan' and ident like 'select x.ord, x.problem%'""").fetchone()[0]
    assert status == "created"
    assert kept == 1  # the items' check (_check_memory_items), planned once


def test_a_session_that_remembers_on_the_worker_keeps_its_plans_the_same_size(cluster, tenant_factory):
    # A client's session through the coordinator keeps one session on the tenant's worker as long as it lives, and
    # every delegated remember runs there. Citus 14.0.1 kept another copy of the shard's plan of each of remember's
    # INSERTs at every execution, in the memory of the plan PL/pgSQL keeps (four a remember, never given back while
    # the session lives: citusdata/citus#8824): 40 remembers grew that session's kept plans from 1.8 to 7.2 MB.
    # They do not grow now.
    acme = tenant_factory("acme")
    populated(cluster, acme)
    with handle(cluster, acme, principal="ana") as ana:
        turns = [ana.append(f"Ana keeps hive {i} behind the barn", role="user", actor="ana") for i in range(50)]
    node = placements(cluster, acme)[0][0]
    holder = next(w for w in cluster.worker_nodes if w.port == node)
    with psycopg.connect(holder.dsn(), autocommit=True) as conn:  # to read its own session's memory contexts
        conn.execute("set citus.enable_ddl_propagation = off")
        conn.execute(f"grant select on pg_backend_memory_contexts to pgrecall_{acme}_app")
        conn.execute(f"grant execute on function pg_get_backend_memory_contexts() to pgrecall_{acme}_app")

    def kept_plans(conn):
        return conn.execute("""select sum(total_bytes) from pg_backend_memory_contexts
                                where name = 'CachedPlan'""").fetchone()[0]

    with on_the_tenants_worker(cluster, acme) as (conn, _):
        statuses = []
        for i, turn in enumerate(turns):
            if i == 10:  # past the five calls on which PL/pgSQL plans anew (plan_cache_mode auto)
                after_ten = kept_plans(conn)
            statuses += conn.execute(f"""select status from {acme}.remember('ana', array['default'], 'default', %s,
                                             array[%s]::bigint[], array['converse'])""",
                                     (f"Ana keeps hive {i}", turn)).fetchall()
        after_fifty = kept_plans(conn)
    assert statuses == [("created",)] * 50
    assert after_fifty - after_ten < 256 * 1024, (after_ten, after_fifty)


def _turns_and_memories(mem, count):
    turns = [mem.append(f"Ana keeps hive {i} behind the barn", role="user", actor="ana") for i in range(count)]
    return [(mem.remember(f"Ana keeps hive {i}", evidence=[turn], purposes=["converse"], embed=False).memory_id, turn)
            for i, turn in enumerate(turns)]


def _correct_one(mem, i, state):
    memory, turn = state[0]
    revision = mem.read(memory, purpose="converse").revision
    mem.correct(memory, f"Ana keeps hive {i}, the blue one", revision=revision, evidence=[turn])


def _refresh_after_a_remember(mem, i, state):
    with pgrecall.connect(state, tenant=mem.tenant, principal="ana", scopes=["default"]) as app:  # new words
        _turns_and_memories(app, 1)
    mem.refresh_term_stats()


# Each writes with a single-row INSERT ... VALUES that Citus 14.0.1 routed by its parameters, re-planned and kept
# another copy of at every execution (citusdata/citus#8824): 32-41 KB a call (57 KB a refresh) more in the kept
# plans of the worker's session, never given back while it lives (bench/results/citus-write-paths-20261207.md).
GROWING_WRITES = {
    # the scope's passage counts (passage_stat): every append, append_many, log_turn, add_messages, store_put
    "append": ("app", lambda mem: None,
               lambda mem, i, state: mem.append(f"Ana keeps hive {i} behind the barn", role="user", actor="ana")),
    "correct": ("app", lambda mem: _turns_and_memories(mem, 1), _correct_one),  # the old text (memory_revision)
    "store_put": ("app", lambda mem: None,  # a put of a live key: its old value (memory_revision)
                  lambda mem, i, state: mem.store_put("default", ["prefs"], "hive", {"hives": i}, ["converse"])),
    "create_session": ("app", lambda mem: None, lambda mem, i, state: mem.create_session()),  # one it names
    "log_turn": ("app", lambda mem: None,  # a turn that opens its log's first session
                 lambda mem, i, state: mem.log_turn(f"log {i}", "ana", f"hive {i}", role="user")),
    "refresh_term_stats": ("worker", lambda mem: None, _refresh_after_a_remember),  # corpus_stat
}


@pytest.mark.parametrize("write", sorted(GROWING_WRITES))
def test_a_session_that_writes_on_the_worker_keeps_its_plans_the_same_size(cluster, tenant_factory, write):
    # As a remember's (above): a client's session through the coordinator keeps one session on the tenant's
    # worker, where each delegated write runs. 50 calls grew that session's kept plans by 1.75 to 5.5 MB.
    role, prepare, call = GROWING_WRITES[write]
    acme = tenant_factory("acme")
    populated(cluster, acme)
    node = placements(cluster, acme)[0][0]
    holder = next(w for w in cluster.worker_nodes if w.port == node)
    with psycopg.connect(holder.dsn(), autocommit=True) as conn:  # to read its own session's memory contexts
        conn.execute("set citus.enable_ddl_propagation = off")
        conn.execute(f"grant select on pg_backend_memory_contexts to pgrecall_{acme}_{role}")
        conn.execute(f"grant execute on function pg_get_backend_memory_contexts() to pgrecall_{acme}_{role}")
    with pgrecall.connect(holder.dsn(user=f"pgrecall_{acme}_app"), tenant=acme, principal="ana",
                          scopes=["default"]) as setup:
        state = prepare(setup) if role == "app" else holder.dsn(user=f"pgrecall_{acme}_app")
    with psycopg.connect(holder.dsn(user=f"pgrecall_{acme}_{role}"), autocommit=True) as conn:
        mem = pgrecall.Memory(acme, conn=conn, principal="ana", scopes=["default"])

        def kept_plans():
            return conn.execute("select sum(total_bytes) from pg_backend_memory_contexts where name = 'CachedPlan'"
                                ).fetchone()[0]

        for i in range(60):
            if i == 10:  # past the five calls on which PL/pgSQL plans anew (plan_cache_mode auto)
                after_ten = kept_plans()
            call(mem, i, state)
        after_sixty = kept_plans()
    assert after_sixty - after_ten < 256 * 1024, (after_ten, after_sixty)


def test_a_tenant_moves_while_writers_append_and_a_reader_recalls(cluster, tenant_factory, monkeypatch, capsys):
    acme = tenant_factory("acme")
    populated(cluster, acme)
    with psycopg.connect(cluster.coordinator.dsn(), autocommit=True) as conn:
        source = conn.execute("select pgrecall.tenant_node(%s)", (acme,)).fetchone()[0]
    target = next(w for w in cluster.worker_nodes if f"127.0.0.1:{w.port}" != source)
    stop = threading.Event()
    acknowledged: list[int] = []
    failures: list[BaseException] = []
    pauses: list[float] = []

    def writer(n):
        with handle(cluster, acme) as mem:
            i = 0
            while not stop.is_set():
                try:
                    acknowledged.append(mem.append(f"writer {n} turn {i}", role="user", actor="ana"))
                    i += 1
                except Exception as exc:
                    failures.append(exc)
                    return

    def reader():
        with handle(cluster, acme) as mem:
            while not stop.is_set():
                started = time.monotonic()
                try:
                    mem.recall("writer turn", mode="lexical")
                except Exception as exc:
                    failures.append(exc)
                    return
                pauses.append(time.monotonic() - started)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)] + [threading.Thread(target=reader)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    try:
        # pgrecall tenant move acme --to HOST:PORT (citus_schema_move), against the coordinator
        monkeypatch.setenv("PGRECALL_DSN", cluster.coordinator.dsn())
        assert cli.main(["tenant", "move", acme, "--to", f"127.0.0.1:{target.port}"]) == 0
        moved_to = capsys.readouterr().out.strip().rsplit(" ", 1)[-1]
        time.sleep(1.0)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    if failures:
        raise failures[0]
    assert moved_to == f"127.0.0.1:{target.port}"
    assert placements(cluster, acme) == [(target.port,)]
    with psycopg.connect(cluster.coordinator.dsn()) as conn:
        offsets = [r[0] for r in conn.execute(f"select log_offset from {acme}.observation "
                                              "where scope = 'default' order by log_offset").fetchall()]
    assert set(acknowledged) <= set(offsets)
    assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))  # contiguous
    print(f"\nmove: {len(acknowledged)} acknowledged appends, {len(pauses)} recalls, "
          f"longest recall {max(pauses) * 1000:.0f} ms")
    # An erasure after the move leaves nothing on the new node, and the old node holds no shard.
    with handle(cluster, acme, role="admin") as admin:
        receipt = admin.erase({"peer": "ana"}, reason="after the move", actor="dpo")
    assert set(receipt.residual.values()) == {0}
    old = next(n for n in cluster.worker_nodes if f"127.0.0.1:{n.port}" == source)
    with psycopg.connect(old.dsn()) as conn:
        shards = conn.execute("select count(*) from pg_class c join pg_namespace n on n.oid = c.relnamespace "
                              "where n.nspname = %s and c.relname ~ '_[0-9]+$' and c.relkind = 'r'",
                              (acme,)).fetchone()[0]
    assert shards == 0


def test_the_embedding_worker_drains_a_tenant_through_the_coordinator(cluster, tenant_factory):
    from pgrecall.worker import Worker

    acme = tenant_factory("acme")
    populated(cluster, acme)
    with handle(cluster, acme) as mem:
        turn = mem.append("My cat Miso only eats salmon", role="user", actor="ana")
        mem.remember("Ana's cat Miso eats only salmon", evidence=[turn], purposes=["converse"])
        tea = mem.append("I drink green tea every morning", role="user", actor="ana")
        mem.remember("Ana drinks green tea every morning", evidence=[tea], purposes=["converse"])
    # pgrecall's own worker, as its login role, claims and stores through the coordinator: both queues
    stats = Worker(acme, conninfo=cluster.coordinator.dsn(user=f"pgrecall_{acme}_worker")).drain()
    assert (stats.claimed, stats.stored, stats.passages_stored) == (2, 2, 2)
    with psycopg.connect(cluster.coordinator.dsn()) as conn:
        left = conn.execute(f"select (select count(*) from {acme}.embedding_job), "
                            f"(select count(*) from {acme}.passage_embedding_job), "
                            f"(select count(*) from {acme}.memory_embedding)").fetchone()
    assert left == (0, 0, 2)
    with handle(cluster, acme) as mem:
        assert mem.recall("what does the pet like to eat", mode="dense", limit=1).items[0].body == \
            "Ana's cat Miso eats only salmon"


def test_a_third_worker_and_a_rebalance_spread_whole_tenants(monkeypatch, capsys):
    # a cluster of its own: the rebalance moves every tenant there is, and the module's cluster keeps two workers
    with LocalCluster(find_citus_build(), workers=2) as cluster:
        with psycopg.connect(cluster.coordinator.dsn()) as conn:
            install.install(conn)
        tenants = [f"reb{i}" for i in range(6)]
        for t in tenants:
            with psycopg.connect(cluster.coordinator.dsn()) as conn:
                install.install(conn, [t])
            populated(cluster, t)
            with handle(cluster, t) as mem:
                turn = mem.append(f"the {t} codeword is zq{t}", role="user", actor="ana")
                mem.remember(f"{t} keeps the codeword zq{t}", evidence=[turn], purposes=["converse"])
        assert {p for t in tenants for p in placements(cluster, t)} <= {(w.port,) for w in cluster.worker_nodes[:2]}
        third = cluster.add_worker()
        monkeypatch.setenv("PGRECALL_DSN", cluster.coordinator.dsn())
        assert cli.main(["tenant", "rebalance", "--json"]) == 0
        said = capsys.readouterr().out
        where = {t: placements(cluster, t) for t in tenants}
        # each tenant whole on one node (no table of it left behind), and some of them on the new worker
        assert all(len(nodes) == 1 for nodes in where.values()), where
        moved = [t for t, nodes in where.items() if nodes == [(third.port,)]]
        assert 1 <= len(moved) < len(tenants), where
        assert f"127.0.0.1:{third.port}" in said
        for t in tenants:
            with handle(cluster, t) as mem:
                assert [i.body for i in mem.recall(f"zq{t}", mode="lexical").items] == [f"{t} keeps the codeword zq{t}"]
            with psycopg.connect(cluster.coordinator.dsn()) as conn:
                assert conn.execute(f"select (select count(*) from {t}.observation), (select count(*) from {t}.memory)"
                                    ).fetchone() == (1, 1)


def test_the_deriver_claims_finishes_gives_back_and_dead_letters_through_the_coordinator(cluster, tenant_factory):
    from pgrecall.deriver import Deriver, first_person
    from pgrecall.driver import Memory

    acme = tenant_factory("acme")
    populated(cluster, acme)
    with psycopg.connect(cluster.coordinator.dsn(), autocommit=True) as conn:
        for key, value in (("task_backoff_seconds", "0"), ("task_max_attempts", "2")):
            conn.execute("select pgrecall.set_tenant_setting(%s, %s, %s)", (acme, key, value))
    with handle(cluster, acme) as mem:
        s = mem.create_session("chat")
        mem.add_session_peers(s, ["ana", "ben"])
        mem.add_messages(s, [{"actor": "ana", "body": "I live in Lisbon"},
                             {"actor": "ben", "body": "My name is Ben, zqpoison"}])

    def extract(messages):
        if any("zqpoison" in m["body"] for m in messages):
            raise RuntimeError("zqpoison is not for the model")
        return first_person(messages)

    worker = cluster.coordinator.dsn(user=f"pgrecall_{acme}_worker")
    # ana's task is claimed and finished; ben's is given back twice, the second time dead
    with Deriver(acme, conninfo=worker, extract=extract) as deriver:
        stats = deriver.drain()
    assert (stats.claimed, stats.completed, stats.failed, stats.memories) == (3, 1, 2, 1), stats.errors
    with psycopg.connect(cluster.coordinator.dsn()) as conn:
        tasks = conn.execute(f"""select p.name, t.status, t.attempts, t.last_error, t.finished_at is not null
                                   from {acme}.work_task t join {acme}.peer p on p.id = t.sender_id
                                  order by p.name""").fetchall()
    assert tasks == [("ana", "done", 1, None, True),
                     ("ben", "dead", 2, "RuntimeError: zqpoison is not for the model", True)]
    with handle(cluster, acme, principal="ana") as ana:
        # the memory (task_remember) and the fact with its quote (task_assert_fact)
        assert sorted((i.item, i.body) for i in ana.recall("Lisbon", mode="lexical").items) == \
            [("fact", "ana lives in Lisbon"), ("memory", "ana lives in Lisbon")]
        assert [i.text for i in ana.get_representation(s, "ana").representation["ana"]] == ["ana lives in Lisbon"]

    # A lease that runs out on the last allowed attempt: the next claim dead-letters the task.
    with psycopg.connect(cluster.coordinator.dsn(), autocommit=True) as conn:
        for key, value in (("task_max_attempts", "1"), ("task_lease_seconds", "0.5")):
            conn.execute("select pgrecall.set_tenant_setting(%s, %s, %s)", (acme, key, value))
    with handle(cluster, acme) as mem:
        mem.add_messages(s, [{"actor": "ana", "body": "I work at Initech"}])
    with psycopg.connect(worker, autocommit=True) as conn:
        queue = Memory(acme, conn=conn)
        [task] = queue.claim_tasks("stalled", limit=5)
        time.sleep(1.0)
        assert queue.claim_tasks("next", limit=5) == []
        with pytest.raises(errors.PgrecallError):
            queue.complete_task(task, {"observations": []}, worker="stalled")
    with psycopg.connect(cluster.coordinator.dsn()) as conn:
        assert conn.execute(f"select status, attempts, last_error from {acme}.work_task where id = %s",
                            (task.task_id,)).fetchone() == ("dead", 1, "lease expired on attempt 1")


def test_pgrecall_tenant_upgrade_of_a_distributed_tenant(cluster, tenant_factory, monkeypatch, capsys):
    # Before: "cannot perform query on placements that were modified in this transaction by a different
    # user" (the installer read the ledgers the owner wrote), then the migration's ALTER TABLE sent to the
    # shard with the rest of its script ("cannot insert multiple commands into a prepared statement").
    monkeypatch.setenv("PGRECALL_DSN", cluster.coordinator.dsn())
    acme = tenant_factory("acme")
    populated(cluster, acme)
    with handle(cluster, acme) as mem:
        turn = mem.append("I drink green tea every morning", role="user", actor="ana")
        mem.remember("Ana drinks green tea every morning", evidence=[turn], purposes=["converse"])
    # As a release before the last left it: migration 0034 not applied, two function files changed since
    with psycopg.connect(cluster.coordinator.dsn(), autocommit=True) as conn:
        conn.execute(f"alter table {acme}.setting drop constraint setting_recall_question_time_boolean")
        conn.execute(f"delete from {acme}.setting where key = 'recall_question_time'")
        conn.execute(f"delete from {acme}.schema_migration where version = 34")
        conn.execute(f"update {acme}.function_ledger set sha256 = repeat('0', 64) "
                     "where file in ('recall/recall.sql', 'memory/remember.sql')")
    assert cli.main(["tenant", "upgrade", acme]) == 0
    said = capsys.readouterr().out
    assert "0034_recall_question_time.sql" in said and "recall/recall.sql" in said and "memory/remember.sql" in said, said
    assert cli.main(["tenant", "upgrade", acme]) == 0
    assert "already current" in capsys.readouterr().out
    with psycopg.connect(cluster.coordinator.dsn(), autocommit=True) as conn:
        assert conn.execute("select value from pgrecall.tenant_settings(%s) where key = 'recall_question_time'",
                            (acme,)).fetchone() == (True,)
        # the migration's constraint holds on the shard
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute(f"update {acme}.setting set value = '1' where key = 'recall_question_time'")
    with handle(cluster, acme) as mem:
        assert [i.body for i in mem.recall("green tea", mode="lexical").items] == ["Ana drinks green tea every morning"]
        assert mem.remember("Ana walks to work", evidence=[turn], purposes=["converse"]).status == "created"
    # the functions made again are on the worker and colocated: a recall is still one delegated task
    with psycopg.connect(cluster.coordinator.dsn(user=f"pgrecall_{acme}_app"), autocommit=True) as conn:
        plan = "\n".join(r[0] for r in conn.execute(
            f"explain (verbose) select * from {acme}.recall('bot', array['default'], 'tea')").fetchall())
    assert "Custom Scan (Citus" in plan and "Task Count: 1" in plan, plan


def test_upgrading_a_distributed_tenant_to_0053_folds_the_entities_the_old_rule_split(cluster, tenant_factory):
    """Migration 0053 on a distributed schema: its fold (a table of its own, updates around memory_link's
    trigger) and its new key (normalized_name dropped and added again, the unique key with it) run on the
    shards, and the NFD and NFC Émile end as one entity carrying both facts."""
    nfc, nfd = "\u00c9mile", "E\u0301mile"
    acme = tenant_factory("nfc")
    populated(cluster, acme)
    with handle(cluster, acme) as mem:
        turn = mem.append("Émile lives in Lisbon and likes the cello", role="user", actor="ana")
        lives = mem.assert_fact(nfc, "lives_in", "Lisbon", evidence=[{"offset": turn, "quote": "lives in Lisbon"}])
        mem.remember("Émile lives in Lisbon", evidence=[turn], purposes=["converse"], about=[nfc])
    # As a tenant left by a release before 0053, with an entity the old rule made for the NFD spelling
    with psycopg.connect(cluster.coordinator.dsn(), autocommit=True) as conn:
        conn.execute(f"alter table {acme}.entity drop column normalized_name")
        conn.execute(f"alter table {acme}.entity add column normalized_name text generated always as "
                     "(lower(regexp_replace(btrim(name), '[[:space:]]+', ' ', 'g'))) stored")
        conn.execute(f"alter table {acme}.entity add constraint entity_identity unique (scope, normalized_name)")
        conn.execute(f"delete from {acme}.schema_migration where version = 53")
        emile, ana, memory = conn.execute(
            f"select e.id, f.asserted_by, l.memory_id from {acme}.entity e join {acme}.fact f on f.subject_id = e.id"
            f" join {acme}.memory_link l on l.target_entity_id = e.id").fetchone()
        [split] = conn.execute(f"insert into {acme}.entity (scope, name) values ('default', %s) returning id",
                               (nfd,)).fetchone()
        [cello] = conn.execute(f"insert into {acme}.entity (scope, name) values ('default', 'cello') returning id"
                               ).fetchone()
        [likes] = conn.execute(
            f"insert into {acme}.fact (scope, subject_id, predicate, single_valued, object_id, statement, valid,"
            " known, asserted_by) values ('default', %s, 'likes', false, %s, 'Émile likes the cello',"
            " tstzrange(now(), null), tstzrange(now(), null), %s) returning id", (split, cello, ana)).fetchone()
        conn.execute(f"insert into {acme}.memory_link (memory_id, link_type, target_entity_id) values (%s, 'about', %s)",
                     (memory, split))
        assert conn.execute(f"select count(*) from {acme}.entity where name in (%s, %s)", (nfc, nfd)).fetchone() == (2,)

        applied = conn.execute("select * from pgrecall.upgrade_tenant(%s)", (acme,)).fetchall()
        assert ("migration", "0053_entity_names_nfc.sql") in applied
        assert conn.execute(f"select id, name from {acme}.entity where name in (%s, %s)", (nfc, nfd)).fetchall() == [
            (emile, nfc)]
        assert conn.execute(f"select subject_id from {acme}.fact where id = %s", (likes,)).fetchone() == (emile,)
        assert conn.execute(f"select count(*) from {acme}.memory_link where target_entity_id is not null").fetchone() \
            == (1,)
    with handle(cluster, acme) as mem:
        assert sorted(f.fact_id for f in mem.facts_as_of(nfd)) == sorted([lives.fact_id, likes])
        assert [e.name for e in mem.entities(nfd)] == [nfc]


def test_a_call_through_the_driver_is_one_task_on_the_tenants_worker(cluster, tenant_factory):
    # Counted with citus_stat_counters on each node (every Citus-planned statement a node executes, its
    # own shards' included): a delegated call is one task on the coordinator, its statements run on the
    # tenant's worker, nothing on the other. Not delegated (inside a transaction block), the coordinator
    # sends each statement of the function as a task of its own.
    from psycopg_pool import ConnectionPool

    for node in cluster.nodes:
        with psycopg.connect(node.dsn(), autocommit=True) as conn:
            conn.execute("alter system set citus.enable_stat_counters = on")
            conn.execute("select pg_reload_conf()")
    acme = tenant_factory("acme")
    populated(cluster, acme)
    with psycopg.connect(cluster.coordinator.dsn()) as conn:
        node = conn.execute("select pgrecall.tenant_node(%s)", (acme,)).fetchone()[0]
    holder = next(w for w in cluster.worker_nodes if f"127.0.0.1:{w.port}" == node)
    other = next(w for w in cluster.worker_nodes if w is not holder)
    time.sleep(0.5)  # the reload reaches every backend

    def tasks():
        counts = []
        for n in (cluster.coordinator, holder, other):
            with psycopg.connect(n.dsn(), autocommit=True) as conn:
                counts.append(conn.execute("select query_execution_single_shard + query_execution_multi_shard "
                                           "from citus_stat_counters where name = current_database()").fetchone()[0])
        return counts

    def counted(call):
        before = tasks()
        call()
        return [a - b for a, b in zip(tasks(), before)]

    app = cluster.coordinator.dsn(user=f"pgrecall_{acme}_app")
    with ConnectionPool(app, min_size=1, max_size=1, open=True, configure=pgrecall.configure) as pool:
        for where, mem in (("its own connection", handle(cluster, acme, principal="ana")),
                           ("a pool", pgrecall.connect(tenant=acme, principal="ana", scopes=["default"], pool=pool))):
            turn = mem.append("I fly kites on Sundays", role="user", actor="ana")
            calls = {
                "recall": (mem.recall, "kites", {"mode": "lexical"}),
                "append_many": (mem.append_many, [{"body": f"turn {i} about zqkites", "source_role": "user",
                                                   "actor": "ana"} for i in range(3)], {}),
                # a bulk batch takes the scope's counter before it writes (_append_batch)
                "append_many in bulk": (mem.append_many, [{"body": f"bulk turn {i} about zqkites",
                                                           "source_role": "user", "actor": "ana"}
                                                          for i in range(40)], {}),
                "remember_many": (mem.remember_many, [{"body": f"Ana flies kite {i}", "evidence": [turn],
                                                       "purposes": ["converse"]} for i in range(3)], {}),
            }
            for name, (method, argument, options) in calls.items():
                method(argument, **options)  # the first call of a kind plans it
                coordinator, on_holder, on_other = counted(lambda m=method, a=argument, o=options: m(a, **o))
                assert (coordinator, on_other) == (1, 0) and on_holder >= 3, \
                    f"{name} through {where}: {coordinator} tasks on the coordinator, {on_holder} statements on " \
                    f"the tenant's worker, {on_other} on the other"
            mem.close()


def _agent(cluster, tenant, stop, log):
    """Appends and remembers, adds a message to a session, then recalls, until stopped; logs (kind, seconds, end,
    error or None, memory id)."""
    with handle(cluster, tenant) as mem:
        session = mem.create_session(f"{tenant} lantern talk")
        mem.add_session_peers(session, ["ana", "bot"])
        i = 0
        while not stop.is_set():
            for kind in ("write", "recall"):
                started = time.monotonic()
                try:
                    if kind == "write":
                        turn = mem.append(f"{tenant} turn {i} about zqlantern", role="user", actor="ana")
                        made = mem.remember(f"{tenant} fact {i} about zqlantern", evidence=[turn],
                                            purposes=["converse"])
                        mem.add_messages(session, [{"actor": "ana", "body": f"{tenant} message {i}"}])
                        log.append((kind, time.monotonic() - started, time.monotonic(), None, made.memory_id))
                    else:
                        mem.recall("zqlantern", mode="lexical")
                        log.append((kind, time.monotonic() - started, time.monotonic(), None, None))
                except Exception as exc:
                    log.append((kind, time.monotonic() - started, time.monotonic(), exc, None))
                    time.sleep(0.05)
            i += 1


def test_a_worker_lost_stops_only_its_tenants_and_loses_no_acknowledged_write():
    """Kill one worker while agents of a tenant on each worker run: the other worker's tenant keeps answering,
    the lost worker's calls fail at once with NodeUnavailable naming the node, and after its restart every
    write it acknowledged is there."""
    with LocalCluster(find_citus_build(), workers=2, settings={"synchronous_commit": "on"}) as cluster:
        with psycopg.connect(cluster.coordinator.dsn()) as conn:
            install.install(conn)
        by_node: dict[str, str] = {}
        for n in range(8):  # a tenant on each worker
            with psycopg.connect(cluster.coordinator.dsn()) as conn:
                install.install(conn, [f"lost{n}"])
                by_node.setdefault(conn.execute("select pgrecall.tenant_node(%s)", (f"lost{n}",)).fetchone()[0],
                                   f"lost{n}")
            if len(by_node) == 2:
                break
        victim = cluster.worker_nodes[1]
        lost_node = f"127.0.0.1:{victim.port}"
        lost, kept = by_node[lost_node], next(t for node, t in by_node.items() if node != lost_node)
        for t in (lost, kept):
            populated(cluster, t)
        stop, logs = threading.Event(), {lost: [], kept: []}
        agents = [threading.Thread(target=_agent, args=(cluster, t, stop, logs[t])) for t in (lost, kept)
                  for _ in range(2)]
        for a in agents:
            a.start()
        try:
            time.sleep(2.0)
            killed_at = time.monotonic()
            cluster.kill(victim)
            time.sleep(4.0)
            restarted_at = time.monotonic()
            cluster.restart(victim)
            time.sleep(2.0)
        finally:
            stop.set()
            for a in agents:
                a.join(120)
        assert not any(a.is_alive() for a in agents), "an agent hung"
        during = lambda log: [e for e in log if killed_at + 0.5 < e[2] < restarted_at]
        # the other worker's tenant never failed, and kept answering during the outage
        assert [e[3] for e in logs[kept] if e[3] is not None] == []
        assert len(during(logs[kept])) >= 4
        # the lost worker's tenant: every call during the outage failed, quickly, naming the node; so did the
        # calls the kill cut short
        assert all(e[3] is not None for e in during(logs[lost]))
        failed = [e for e in logs[lost] if e[3] is not None]
        assert len(failed) >= 4 and all(isinstance(e[3], errors.NodeUnavailable) for e in failed), \
            {type(e[3]).__name__: str(e[3])[:300] for e in failed}
        assert all(e[3].node == lost_node and lost_node in str(e[3]) for e in failed)
        assert max(e[1] for e in failed) < 10.0
        # after the restart it answers again, and every write it acknowledged is there
        with handle(cluster, lost) as mem:
            assert mem.recall("zqlantern", mode="lexical").items
        for t in (lost, kept):
            acknowledged = {e[4] for e in logs[t] if e[0] == "write" and e[3] is None}
            with psycopg.connect(cluster.coordinator.dsn()) as conn:
                stored = {r[0] for r in conn.execute(f"select id from {t}.memory").fetchall()}
            assert acknowledged and acknowledged <= stored, (t, sorted(acknowledged - stored))
        kept_p99 = sorted(e[1] for e in during(logs[kept]))[max(0, int(len(during(logs[kept])) * 0.99) - 1)]
        print(f"\nworker lost: {len(failed)} calls of {lost} failed during the outage (slowest "
              f"{max(e[1] for e in failed) * 1000:.0f} ms); {kept}: {len(during(logs[kept]))} calls, p99 "
              f"{kept_p99 * 1000:.0f} ms")


def test_an_admin_switches_the_embedding_version_of_a_distributed_tenant(cluster, tenant_factory):
    """set_embedding_version queues the passages again with a delete that joined the stamp function: Citus
    refused it on every distributed tenant ("input of anonymous composite types is not implemented")."""
    acme = tenant_factory("acme")
    populated(cluster, acme)
    with handle(cluster, acme) as mem:
        turn = mem.append("Ana keeps a zqfern on the balcony", role="user", actor="ana")
        mem.remember("Ana keeps a zqfern on the balcony", evidence=[turn], purposes=["converse"])
    with psycopg.connect(cluster.coordinator.dsn(user=f"pgrecall_{acme}_admin"), autocommit=True) as conn:
        assert conn.execute(f"select {acme}.set_embedding_version('all-MiniLM-L6-v2', 1)").fetchone()[0] >= 2
        version, queued, passages_queued = conn.execute(
            f"select input_version, queued, passages_queued from {acme}.embedding_status()").fetchone()
        assert (version, queued, passages_queued) == (1, 1, 1)
        assert conn.execute(f"select {acme}.set_embedding_version('all-MiniLM-L6-v2', 2)").fetchone()[0] >= 1
        assert conn.execute(f"select {acme}.rebuild_embeddings(true)").fetchone()[0] == 2


def test_an_imported_store_item_is_made_again_on_a_distributed_tenant(cluster, tenant_factory):
    """import --export makes a LangGraph store item again with store_restore (a remembered memory becomes the
    item, each later value a revision): through the coordinator, on the tenant's worker."""
    acme = tenant_factory("acme")
    populated(cluster, acme)
    with handle(cluster, acme, principal="ana") as mem:
        turn = mem.append("Ana keeps three zqhives", role="user", actor="ana")
        made = mem.remember("three zqhives", evidence=[turn], purposes=["converse"], audience="ana")
        assert mem.store_restore(made.memory_id, 1, ["prefs", "ana"], "hives", {"hives": 3}) == 1
        assert mem.store_restore(made.memory_id, 1, ["prefs", "ana"], "hives", {"hives": 4}) == 2
        [got] = mem.store_get("default", ["prefs", "ana"], "hives")
        assert got.value == {"hives": 4}
        assert [r.key for r in mem.store_search("default", namespace_prefix=["prefs"])] == ["hives"]
    with handle(cluster, acme, principal="ben") as mem:
        assert mem.store_get("default", ["prefs", "ana"], "hives") == []
