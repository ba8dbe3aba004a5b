"""Forward-only migrations: a ledger, frozen checksums, serialised and idempotent installs."""

import dataclasses
import threading

import psycopg
import pytest

from catalog import snapshot
from conftest import run_together
from pgrecall import errors, install, sources


def ledger(conn, tenant):
    return conn.execute(f"select version, name, sha256, applied_at from {tenant}.schema_migration order by 1").fetchall()


def test_install_is_idempotent(db):
    first = install.install(db, ["acme"])
    assert first == [("tenant", "acme")]
    before = ledger(db, "acme")
    assert [r[0] for r in before] == [m.version for m in sources.migrations()]
    assert install.install(db, ["acme"]) == []
    assert ledger(db, "acme") == before


def test_changed_released_migration_is_an_error_and_changes_nothing(db, monkeypatch):
    install.install(db, ["acme"])
    before = (ledger(db, "acme"), db.execute("select kind, name, sha256 from pgrecall.source order by 1, 2").fetchall())
    original = sources.migrations

    def edited():
        ms = original()
        first = ms[0]
        ms[0] = sources.Source(first.kind, first.name, first.version, first.body + "\n-- an innocent edit\n")
        return ms

    monkeypatch.setattr(sources, "migrations", edited)
    with pytest.raises(errors.MigrationChanged):
        install.install(db, ["acme"])
    after = (ledger(db, "acme"), db.execute("select kind, name, sha256 from pgrecall.source order by 1, 2").fetchall())
    assert after == before


def edit_settings_file(monkeypatch, change, before=()):
    """From here on the sources hold function file settings.sql with its text passed through change(), and the
    function files in before applied ahead of every other."""
    original = sources.functions

    def edited():
        fs = original()
        i = next(i for i, f in enumerate(fs) if f.name == "shared/settings.sql")
        fs[i] = sources.Source("function", "shared/settings.sql", None, change(fs[i].body))
        return [dataclasses.replace(f, position=n) for n, f in enumerate([*before, *fs], start=1)]

    monkeypatch.setattr(sources, "functions", edited)


def test_changed_function_file_is_reapplied_alone(db, monkeypatch):
    install.install(db, ["acme"])
    edit_settings_file(monkeypatch, lambda body: body + "\n-- reworded\n")
    assert install.install(db, ["acme"]) == [("function", "shared/settings.sql")]
    assert install.install(db, ["acme"]) == []


def test_tenant_newer_than_sources_is_refused(db, make_tenant):
    make_tenant("acme")
    db.execute("insert into acme.schema_migration (version, name, sha256) values (9999, '9999_future.sql', repeat('0', 64))")
    with pytest.raises(errors.SchemaTooNew):
        try:
            db.execute("select * from pgrecall.upgrade_tenant('acme')")
        except psycopg.Error as exc:
            raise errors.translate(exc) from exc


def test_concurrent_installers_are_serialised(conninfo):
    results = []
    barrier = threading.Barrier(4)

    def installer(_):
        with conninfo.connect(autocommit=True) as conn:
            barrier.wait()
            results.append(install.install(conn, ["acme"]))

    run_together(installer, range(4), barrier)
    assert sorted(results, key=len) == [[], [], [], [("tenant", "acme")]]
    with conninfo.connect() as conn:
        versions = [r[0] for r in ledger(conn, "acme")]
    assert versions == [m.version for m in sources.migrations()]


def test_fresh_install_equals_step_by_step_upgrade(db):
    db.execute("select pgrecall.create_tenant('fresh')")
    versions = [m.version for m in sources.migrations()]
    db.execute("select pgrecall.create_tenant('stepped', %s)", (versions[0],))
    assert [r[0] for r in ledger(db, "stepped")] == versions[:1]
    for v in versions[1:]:
        db.execute("select * from pgrecall.upgrade_tenant('stepped', %s)", (v,))
        assert [r[0] for r in ledger(db, "stepped")][-1] == v
    db.execute("select * from pgrecall.upgrade_tenant('stepped')")
    assert snapshot(db, "stepped") == snapshot(db, "fresh")



def test_new_recall_defaults_reach_old_tenants_but_not_their_own_values(db):
    """Migration 0011 moves the recall settings a tenant left at their old defaults, and only those."""
    db.execute("select pgrecall.create_tenant('older', 10)")
    db.execute("update older.setting set value = '250' where key = 'hnsw_ef_search'")   # the tenant's own choice
    db.execute("select * from pgrecall.upgrade_tenant('older')")
    got = dict(db.execute("select key, value #>> '{}' from older.setting where key in "
                          "('arm_candidates', 'hnsw_ef_search', 'exact_dense_below', 'lexical_match_budget')").fetchall())
    assert got == {"arm_candidates": "20", "hnsw_ef_search": "250", "exact_dense_below": "1000",
                   "lexical_match_budget": "1000"}

def test_fusion_rrf_scores_reaches_tenants_on_rrf_but_not_one_that_chose_scores(db):
    """Migration 0022 moves a tenant left on the old default fusion (rrf) to rrf_scores, and only that."""
    db.execute("select pgrecall.create_tenant('onrrf', 21)")
    db.execute("select pgrecall.create_tenant('onscores', 21)")
    db.execute("update onscores.setting set value = '\"scores\"' where key = 'fusion'")   # the tenant's own choice
    for tenant in ("onrrf", "onscores"):
        db.execute("select * from pgrecall.upgrade_tenant(%s)", (tenant,))
    got = [db.execute(f"select value #>> '{{}}' from {t}.setting where key = 'fusion'").fetchone()[0]
           for t in ("onrrf", "onscores")]
    assert got == ["rrf_scores", "scores"]
    db.execute("select pgrecall.set_tenant_setting('onrrf', 'fusion', '\"rrf\"')")   # rrf stays available
    with pytest.raises(psycopg.Error) as refused:
        db.execute("select pgrecall.set_tenant_setting('onrrf', 'fusion', '\"borda\"')")
    assert refused.value.sqlstate == errors.InvalidSetting.sqlstate


def test_snapshot_notices_a_difference(db):
    """The catalog comparison above can fail: a schema change shows up in it."""
    db.execute("select pgrecall.create_tenant('zq_first')")
    db.execute("select pgrecall.create_tenant('zq_second')")
    assert snapshot(db, "zq_first") == snapshot(db, "zq_second")
    db.execute("create index setting_extra on zq_second.setting (description)")
    assert snapshot(db, "zq_first") != snapshot(db, "zq_second")


def test_a_function_renamed_in_its_file_leaves_no_stale_overload(db, monkeypatch):
    install.install(db, ["acme"])
    edit_settings_file(monkeypatch, lambda body: body.replace("__tenant__.settings()", "__tenant__.tenant_settings()"))
    with pytest.raises(errors.UndeclaredDuty):  # a renamed public function needs its duty declared
        install.install(db, ["acme"])
    declared = sources.duties_sql().replace("('settings',", "('tenant_settings',")
    monkeypatch.setattr(sources, "duties_sql", lambda: declared)
    install.install(db, ["acme"])
    names = {r[0] for r in db.execute("select proname from pg_proc where pronamespace = 'acme'::regnamespace")}
    assert "tenant_settings" in names and "settings" not in names
    assert "_setting_value" in names  # the file's other function is back
    app_can = db.execute("select has_function_privilege('pgrecall_acme_app', 'acme.tenant_settings()', 'EXECUTE')").fetchone()[0]
    assert app_can


# Texts whose passages differ: a turn is one passage, a long document several, with overlaps.
LOGGED_BEFORE_PASSAGES = [
    "I moved to Lisbon last spring.",
    "  Ana prefers green tea.  ",
    " ".join(f"Sentence number {i} of a long report about the harbour, its ships and their cargo." for i in range(40)),
    "Première ligne.\n\nSeconde ligne, après un paragraphe: ça compte en octets, pas en caractères. " * 20,
]


def _passages(db, tenant):
    return db.execute(f"""
        select o.log_offset, p.ordinal, p.start_byte, p.end_byte, p.body
          from {tenant}.passage p join {tenant}.observation o on o.id = p.observation_id
         order by 1, 2""").fetchall()


def test_a_tenant_upgraded_from_0009_gets_the_passages_of_its_logged_observations(db, acme):
    """Observations logged before passages existed get the passages that the trigger writes for new ones,
    registered and queued for embedding; the data step that writes them runs once and is in the ledger."""
    db.execute("select pgrecall.create_tenant('older', 9)")
    db.execute("insert into older.scope (name, log_watermark) values ('default', %s)", (len(LOGGED_BEFORE_PASSAGES),))
    db.execute("insert into older.peer (name, kind) values ('ana', 'human')")
    for offset, body in enumerate(LOGGED_BEFORE_PASSAGES, 1):
        db.execute("""insert into older.observation (scope, log_offset, kind, occurred_at, source_role, actor_id, body)
                      values ('default', %s, 'message', now(), 'user', (select id from older.peer), %s)""",
                   (offset, body))

    applied = db.execute("select * from pgrecall.upgrade_tenant('older')").fetchall()
    assert applied[-2:] == [("data_step", "_backfill_passages"), ("data_step", "_clear_zero_vectors")]
    for body in LOGGED_BEFORE_PASSAGES:  # the same texts appended to a current tenant
        acme.append(body, role="user", actor="ana")
    written = _passages(db, "older")
    assert len(written) > len(LOGGED_BEFORE_PASSAGES)  # the long texts were split
    assert written == _passages(db, "acme")
    assert db.execute("select count(*) from older.projection_dependency where kind = 'passage'").fetchone()[0] == \
        len(written)
    assert db.execute("select count(*) from older.passage_embedding_job").fetchone()[0] == len(written)
    assert db.execute("select passages from older.passage_stat").fetchone()[0] == len(written)
    assert db.execute("select requested_by, done_at is not null, rows_written from older.data_step order by 1"
                      ).fetchall() == [(17, True, len(written)), (50, True, 0)]

    # Done once: a later upgrade, even one that re-applies passages.sql, writes no passage twice.
    db.execute("update older.function_ledger set sha256 = repeat('0', 64) where file = 'log/passages.sql'")
    assert db.execute("select * from pgrecall.upgrade_tenant('older')").fetchall() == [("function", "log/passages.sql")]
    assert _passages(db, "older") == written


def test_a_function_moved_to_a_file_applied_earlier_survives_the_upgrade(db, monkeypatch):
    """Splitting a file moves functions between files. A function moved into a file that is applied before
    its old one used to be created by the new file and then dropped by the old one's re-application."""
    install.install(db, ["acme"])
    body = next(f.body for f in sources.functions() if f.name == "shared/settings.sql")
    start = body.index("create or replace function __tenant__._settings()")
    end = body.index("comment on function __tenant__._settings()", start)
    end = body.index(";\n", end) + 2
    edit_settings_file(monkeypatch, lambda body: body[:start] + body[end:],
                       before=[sources.Source("function", "a/settings_moved.sql", None, body[start:end])])
    assert ("function", "a/settings_moved.sql") in install.install(db, ["acme"])
    assert db.execute("select to_regprocedure('acme._settings()') is not null").fetchone()[0]
    ledger_of = dict(db.execute("select file, functions from acme.function_ledger").fetchall())
    assert ledger_of["a/settings_moved.sql"] == ["acme._settings()"]
    assert "acme._settings()" not in ledger_of["shared/settings.sql"]
    assert install.install(db, ["acme"]) == []


def test_a_renamed_function_file_leaves_no_stale_ledger_row_and_a_removed_one_takes_its_functions(db, monkeypatch):
    """Renaming a file (plpgsql/ moved into folders, old names gone) applies it under its new name; the ledger
    row of the old name went, so a later change to the file still drops what it defined. A file no longer
    shipped at all takes its functions with it."""
    install.install(db, ["acme"])
    original = sources.functions
    extra = sources.Source("function", "zz/gone_soon.sql", None, (
        "create or replace function __tenant__._gone_soon() returns integer language sql immutable\n"
        "set search_path = pg_catalog, __tenant__, __ext__, pg_temp as $$ select 1 $$;\n"
        "comment on function __tenant__._gone_soon() is 'Internal: a file that is removed later.';\n"))

    def shipped(rename=None, with_extra=True):
        fs = [f if f.name != "shared/settings.sql" or rename is None else dataclasses.replace(f, name=rename)
              for f in original()]
        return [dataclasses.replace(f, position=n) for n, f in enumerate([*fs, *([extra] if with_extra else [])], 1)]

    monkeypatch.setattr(sources, "functions", lambda: shipped())
    assert install.install(db, ["acme"]) == [("function", "zz/gone_soon.sql")]
    assert db.execute("select acme._gone_soon()").fetchone()[0] == 1

    monkeypatch.setattr(sources, "functions", lambda: shipped(rename="shared/renamed_settings.sql"))
    assert install.install(db, ["acme"]) == [("function", "shared/renamed_settings.sql")]
    ledger_of = dict(db.execute("select file, functions from acme.function_ledger").fetchall())
    assert "shared/settings.sql" not in ledger_of
    assert "acme._settings()" in ledger_of["shared/renamed_settings.sql"]
    assert db.execute("select acme._settings() is not null").fetchone()[0]

    monkeypatch.setattr(sources, "functions", lambda: shipped(rename="shared/renamed_settings.sql", with_extra=False))
    assert install.install(db, ["acme"]) == []
    assert db.execute("select to_regprocedure('acme._gone_soon()')").fetchone()[0] is None
    assert "zz/gone_soon.sql" not in dict(db.execute("select file, functions from acme.function_ledger").fetchall())
    assert db.execute("select acme._settings() is not null").fetchone()[0]


def test_function_files_are_applied_in_the_listed_order_not_by_name(db):
    install.install(db, ["acme"])
    db.execute("update acme.function_ledger set sha256 = repeat('0', 64)")
    applied = [name for kind, name in db.execute("select * from pgrecall.upgrade_tenant('acme')").fetchall()
               if kind == "function"]
    assert applied == sources.function_order()
    assert applied != sorted(applied)
    assert applied[0] == "shared/fail.sql"
    assert applied.index("recall/lexical_arm.sql") < applied.index("recall/recall.sql")


def test_a_vector_of_zeros_stored_before_the_refusal_is_cleared_by_the_upgrade_and_queued_again(db, conninfo):
    """Vectors of zeros are refused now, but a tenant may hold some stored before: their cosine is NaN, which
    PostgreSQL orders above every number, so that memory passed the floor and came first in recall for every
    question. The upgrade's data step deletes them and queues their memories for the worker."""
    import numpy as np

    import pgrecall

    model = "all-MiniLM-L6-v2"
    db.execute("select pgrecall.create_tenant('zv')")
    mem = pgrecall.connect(conninfo.dsn(user="pgrecall_zv_app"), tenant="zv", principal="ana", scopes=["default"])
    mem.add_scope("default")
    mem.add_peer("ana", "human")
    with pgrecall.connect(conninfo.dsn(user="pgrecall_zv_admin"), tenant="zv", role="admin") as admin:
        admin.set_embedding_version(model, 1)
    [offset] = mem.append_many([{"body": "I play the cello and Ben sails", "source_role": "user", "actor": "ana"}])
    cello, sails = np.zeros(384), np.zeros(384)
    cello[0], sails[1] = 1.0, 1.0
    ids = {}
    for body, vector in (("Ana plays the cello", cello), ("Ben sails boats", sails)):
        ids[body] = mem.remember(body, evidence=[offset], purposes=["converse"], embedding=vector,
                                 embedding_model=model, embedding_input_version=1).memory_id
    db.execute("update zv.memory_embedding set embedding = array_fill(0::real, array[384])::halfvec(384)"
               " where memory_id = %s", (ids["Ana plays the cello"],))

    def first():
        return [i.body for i in mem.recall("boats", mode="dense", query_embedding=sails, query_model=model).items]

    assert first()[0] == "Ana plays the cello"  # the stored zeros, as before this step
    db.execute("update zv.data_step set done_at = null where name = '_clear_zero_vectors'")
    applied = db.execute("select * from pgrecall.upgrade_tenant('zv')").fetchall()
    assert applied == [("data_step", "_clear_zero_vectors")]
    assert first() == ["Ben sails boats"]
    assert db.execute("select memory_id from zv.embedding_job").fetchall() == [(ids["Ana plays the cello"],)]
    assert db.execute("select rows_written from zv.data_step where name = '_clear_zero_vectors'").fetchone() == (1,)
