"""Every projection row is registered against the observations it came from."""

from datetime import UTC, datetime

from pgrecall.worker import Worker
from test_memory_operations import said


def workload(acme):
    o1, o2, o3 = said(acme, "I live in Lisbon"), said(acme, "I work at Acme"), said(acme, "I moved to Porto")
    a = acme.remember("Ana lives in Lisbon", evidence=[o1], purposes=["converse"], about=["Ana", "Lisbon"]).memory_id
    b = acme.remember("Ana works at Acme", evidence=[o2], purposes=["converse", "act"], about=["Ana", "Acme"]).memory_id
    d = acme.derive([a, b], "Ana: Lisbon, Acme", about=["Ana"])
    # search keys from what was said (memory_key rows)
    acme.remember_keys(b, ["ana works at Acme"])
    # a correction citing what justified it (memory_correction_evidence rows)
    o4 = said(acme, "It is Acme Corp, by the way")
    acme.correct(b, "Ana works at Acme Corp", revision=1, reason="full name", evidence=[o4])
    acme.supersede(a, "Ana lives in Porto", revision=1, evidence=[o3])
    # a reviewer's duplicate decision: its reason may quote the two memories
    acme.decide_duplicate(b, d, "distinct", reason="a summary is not a duplicate of its source")
    acme.assert_fact("ana", "lives_in", "Lisbon", evidence=[{"offset": o1, "quote": "I live in Lisbon"}],
                     valid_from=datetime(2020, 1, 1, tzinfo=UTC))
    # splits the Lisbon fact: the surviving piece is registered too
    acme.assert_fact("ana", "lives_in", "Porto", evidence=[{"offset": o3, "quote": "I moved to Porto"}],
                     valid_from=datetime(2024, 1, 1, tzinfo=UTC),
                     valid_to=datetime(2025, 1, 1, tzinfo=UTC))
    # session messages queue derivation work (work_task rows)
    s = acme.create_session("registry")
    acme.add_session_peers(s, ["ana", {"peer": "ben", "observe_others": True}])
    acme.add_messages(s, [{"actor": "ana", "body": "I live in Porto"}])
    return d


def test_kinds_written_equal_kinds_registered(acme, db, conninfo):
    workload(acme)
    Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker")).drain()
    registered = {r[0] for r in db.execute("select kind from acme.projection_kind")}
    written = {r[0] for r in db.execute("select distinct kind from acme.projection_dependency")}
    assert written == registered
    # and every row of every projection table is registered
    for kind, table in db.execute("select kind, table_name from acme.projection_kind").fetchall():
        key = {"memory_revision": "t.memory_id || ':' || t.revision", "memory_embedding": "t.memory_id::text"}.get(
            table, "t.id::text")
        orphans = db.execute(
            f"select count(*) from acme.{table} t where not exists (select 1 from acme.projection_dependency d "
            f"where d.kind = %s and d.row_key = ({key}))", (kind,)).fetchone()[0]
        total = db.execute(f"select count(*) from acme.{table}").fetchone()[0]
        assert total > 0 and orphans == 0, (kind, orphans, total)


def test_derived_memory_depends_on_its_sources_observations(acme, db):
    d = workload(acme)
    offsets = [r[0] for r in db.execute(
        "select o.log_offset from acme.projection_dependency p join acme.observation o on o.id = p.observation_id "
        "where p.kind = 'memory' and p.row_key = %s order by 1", (str(d),))]
    assert offsets == [1, 2]


def test_every_tenant_table_is_a_projection_or_known_infrastructure(acme, db):
    """A new table holding derived content must be added to projection_kind."""
    infrastructure = {"setting", "schema_migration", "function_ledger", "scope", "peer", "observation",
                      # row locks that serialise writers: 4096 fixed stripe numbers, no key and no content
                      "lock_stripe",
                      # the backends holding queue leases (pid, login role, start time): no content
                      "lease_holder",
                      # the secret names of the tenant's NOTIFY channels
                      "notification_channel",
                      "projection_kind", "projection_dependency",
                      # holds only a memory id, and dies with the memory (foreign key, on delete cascade)
                      "embedding_job",
                      # aggregates over all live memories, brought up to date by refresh_term_stats() (erasure takes its memories out)
                      "term_stat", "corpus_stat",
                      # erasure receipts: the selector and reason, never content
                      "erasure_request",
                      # sessions: a name and metadata given by the application, like a scope, tagged with the
                      # data subjects whose calls wrote them; erasing a subject clears them (with a residual)
                      "session",
                      # which data subject gave which entity alias (add_entity_alias): an erasure of the subject
                      # removes the alias (with a residual); rows die with their entity (on delete cascade)
                      "entity_alias_subject",
                      # membership and flags; its working_representation document holds derived items, each
                      # citing its observation, which erasure scrubs (_scrub_working_representations, with a
                      # residual of its own)
                      "session_peer",
                      # the predicate ontology: shipped or added by SQL, not derived from the log
                      "predicate",
                      # merge receipts: entity and fact ids only
                      "entity_merge",
                      # holds only a passage id, and dies with the passage (foreign key, on delete cascade)
                      "passage_embedding_job",
                      # per scope: how many passages and lexemes (counts, no content), kept by triggers on passage
                      "passage_stat",
                      # the data step ledger: helper names and when they ran
                      "data_step"}
    # A partition is part of its partitioned table (passage): its rows are that projection's rows.
    tables = {r[0] for r in db.execute("select c.relname from pg_class c where c.relnamespace = 'acme'::regnamespace "
                                       "and c.relkind in ('r', 'p') and not c.relispartition")}
    projections = {r[0] for r in db.execute("select table_name from acme.projection_kind")}
    assert tables - infrastructure == projections
