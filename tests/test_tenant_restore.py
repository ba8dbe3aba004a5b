"""Erasure that survives a restore: pgrecall tenant dump / restore and the server's erasure ledger.

A dump taken before an erasure, restored later (under another name, or the same after a drop), must not
bring the erased person back: the restore replays every later erasure of the dumped tenant before the
tenant answers a call, and its receipt says so. The ledger keeps a keyed hash of what was erased, never
the subject or the content."""

import json
import os
import subprocess
import sys

import psycopg
import pytest

from pgrecall import errors, tenant_dump
from test_erasure import rows_mentioning


def said(mem, text, subject, actor="ana"):
    return mem.append(text, role="user", actor=actor, data_subject_id=subject)


def keep(mem, text, subject):
    return mem.remember(text, evidence=[said(mem, f"I said: {text}", subject)], purposes=["converse"]).memory_id


def recall_as_app(conninfo, tenant, query):
    with conninfo.connect(user=f"pgrecall_{tenant}_app") as app:
        return [r[0] for r in app.execute(
            f"select body from {tenant}.recall('bot', '{{default}}', %s, p_mode => 'lexical') "
            "where memory_id is not null", (query,))]


@pytest.fixture
def dumped(acme, tmp_path, conninfo):
    """acme with two subjects' memories, dumped; then a third subject's memory written after the dump."""
    keep(acme, "zqalpha likes sailing", "subj-a")
    keep(acme, "zqbravo likes chess", "subj-b")
    path = tmp_path / "acme.dump"
    header = tenant_dump.dump_to_file(conninfo.dsn(), "acme", path)
    keep(acme, "zqcharlie likes tennis", "subj-c")
    return path, header


def test_a_restore_of_a_dump_taken_before_an_erasure_replays_it(acme, acme_admin, db, conninfo, dumped):
    path, header = dumped
    assert header["rows"]["memory"] == 2 and header["tables"][0] == "scope"
    receipt = acme_admin.erase({"data_subject": "subj-a"}, reason="request #7", actor="dpo")
    assert receipt.observations_erased == 1

    restored = tenant_dump.restore_from_file(conninfo.dsn(), path, "acme_r1")
    assert restored["tenant"] == "acme_r1" and restored["from"]["tenant"] == "acme"
    assert [(e["kind"], e["outcome"], e["observations_erased"]) for e in restored["erasures"]] == [
        ("data_subject", "replayed", 1)]
    # named by the receipt id its user was shown, not by the ledger's row
    assert restored["erasures"][0]["source_request_id"] == receipt.id
    # the subject is gone there too, the rest is back, and what came after the dump is not there
    assert rows_mentioning(db, "zqalpha", "acme_r1") == {}
    assert recall_as_app(conninfo, "acme_r1", "chess") == ["zqbravo likes chess"]
    assert recall_as_app(conninfo, "acme_r1", "tennis") == []
    # the replay left its own receipt in the restored tenant, which says what it replayed
    replays = db.execute("select reason, requested_by, residual from acme_r1.erasure_request "
                         "where requested_by = 'pgrecall.replay_erasures'").fetchall()
    assert len(replays) == 1 and "replayed erasure" in replays[0][0] and set(replays[0][2].values()) == {0}
    # the ledger never held the subject's id or its words
    ledger = json.dumps([list(map(str, r)) for r in db.execute("select * from pgrecall.erasure_ledger")])
    assert "subj-a" not in ledger and "zqalpha" not in ledger and "acme" in ledger


def test_the_restored_tenant_takes_new_writes_without_reusing_ids(acme, conninfo, dumped):
    path, _ = dumped
    tenant_dump.restore_from_file(conninfo.dsn(), path, "acme_r2")
    with conninfo.connect(user="pgrecall_acme_r2_app") as app:
        offset = app.execute("select acme_r2.append_observation('ana', '{default}', 'default', 'zqdelta here', "
                             "'user', p_actor => 'ana')").fetchone()[0]
        memory = app.execute("select memory_id from acme_r2.remember('ana', '{default}', 'default', "
                             "'zqdelta was here', %s, '{converse}')", ([offset],)).fetchone()[0]
    with conninfo.connect() as su:
        assert su.execute("select count(*) from acme_r2.memory").fetchone()[0] == 3
        assert memory > su.execute("select max(id) from acme_r2.memory where id <> %s", (memory,)).fetchone()[0]
        assert offset == su.execute("select max(log_offset) from acme_r2.observation").fetchone()[0]


def test_a_restore_under_the_same_name_after_a_drop_replays_the_erasure_once(acme, acme_admin, db, conninfo,
                                                                              dumped):
    path, _ = dumped
    acme_admin.erase({"peer": "ana"}, reason="left the company", actor="dpo")
    acme_admin.close()
    acme.close()
    db.execute("select pgrecall.drop_tenant('acme')")
    restored = tenant_dump.restore_from_file(conninfo.dsn(), path)
    assert restored["tenant"] == "acme"
    assert [e["outcome"] for e in restored["erasures"]] == ["replayed"]
    assert recall_as_app(conninfo, "acme", "chess") == []  # every turn was ana's
    assert db.execute("select count(*) from acme.observation").fetchone()[0] == 0
    # the ledger keeps the one erasure there was, not a second entry for its replay
    ledger = "select kind, erased_at from pgrecall.erasure_ledger where tenant = 'acme' order by id"
    assert [kind for kind, _ in db.execute(ledger).fetchall()] == ["peer"]
    before = db.execute(ledger).fetchall()
    # and the same dump restored again replays it once more, the ledger unchanged
    db.execute("select pgrecall.drop_tenant('acme')")
    again = tenant_dump.restore_from_file(conninfo.dsn(), path)
    assert [e["outcome"] for e in again["erasures"]] == ["replayed"]
    assert db.execute(ledger).fetchall() == before
    assert db.execute("select count(*) from acme.observation").fetchone()[0] == 0


def test_a_dump_from_another_release_is_refused_and_nothing_is_restored(acme, conninfo, dumped, db, tmp_path):
    path, header = dumped
    lines = path.read_text().split("\n")
    newer = tmp_path / "newer.dump"
    newer.write_text("\n".join([json.dumps({**json.loads(lines[0]), "schema_version": header["schema_version"] + 1}),
                                *lines[1:]]))
    with pytest.raises(errors.DumpVersionMismatch, match=rf"schema version {header['schema_version'] + 1}, newer"):
        tenant_dump.restore_from_file(conninfo.dsn(), newer, "acme_r3")
    other = tmp_path / "other.txt"
    other.write_text('{"something": "else"}\n')
    with pytest.raises(errors.DumpVersionMismatch, match="not a pgrecall tenant dump"):
        tenant_dump.restore_from_file(conninfo.dsn(), other, "acme_r3")
    cut = tmp_path / "cut.dump"
    cut.write_text("\n".join(lines[:3]) + "\n")  # the header, the scope table's line, one of its rows
    with pytest.raises(errors.InvalidArgument, match="cut short"):
        tenant_dump.restore_from_file(conninfo.dsn(), cut, "acme_r3")
    assert db.execute("select count(*) from pgrecall.tenant where name = 'acme_r3'").fetchone()[0] == 0
    assert db.execute("select to_regnamespace('acme_r3')").fetchone()[0] is None
    with pytest.raises(errors.TenantExists):
        tenant_dump.restore_from_file(conninfo.dsn(), path)  # acme is still here


def test_a_tenant_role_cannot_write_the_ledger(acme, conninfo, db):
    with conninfo.connect(user="pgrecall_acme_admin") as admin, pytest.raises(psycopg.errors.InsufficientPrivilege):
        admin.execute("select pgrecall.record_erasure('acme', 1, '{\"peer\": \"x\"}', now())")
    with conninfo.connect(user="pgrecall_acme_admin") as admin, pytest.raises(psycopg.errors.InsufficientPrivilege):
        admin.execute("select * from pgrecall.erasure_ledger")


def test_the_cli_dumps_and_restores(acme, conninfo, tmp_path, db):
    keep(acme, "zqecho likes jazz", "subj-e")
    env = {**os.environ, "PGRECALL_DSN": conninfo.dsn()}
    path = tmp_path / "cli.dump"
    run = [sys.executable, "-m", "pgrecall.cli"]
    done = subprocess.run([*run, "tenant", "dump", "acme", str(path), "--json"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["rows"]["memory"] == 1
    done = subprocess.run([*run, "tenant", "restore", str(path), "--as", "acme_r4"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "restored tenant acme_r4 from the dump of acme" in done.stdout
    # an erasure after the dump is named, in the restore's receipt, by the id `pgrecall erase` printed
    with conninfo.connect(user="pgrecall_acme_admin") as admin:
        erased = admin.execute("select id from acme.erase('dpo', '{\"data_subject\": \"subj-e\"}', 'asked')"
                               ).fetchone()[0]
    done = subprocess.run([*run, "tenant", "restore", str(path), "--as", "acme_r5"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"erasure {erased} of tenant acme (data_subject, completed" in done.stdout, done.stdout
    assert "): replayed as erasure " in done.stdout and "1 observation(s) erased" in done.stdout, done.stdout
    assert recall_as_app(conninfo, "acme_r4", "jazz") == ["zqecho likes jazz"]


def test_a_dump_file_is_its_owners_alone_and_a_failed_dump_leaves_nothing(acme, tmp_path, conninfo, dumped):
    """A dump holds every person's data, erased ones included once they are erased after it: not readable by
    other users of the machine, and never half written."""
    path, _header = dumped
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)
    with pytest.raises(errors.PgrecallError):
        tenant_dump.dump_to_file(conninfo.dsn(), "nosuchtenant", tmp_path / "other.dump")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["acme.dump"]


def test_the_cli_refuses_a_file_that_is_not_a_dump_or_whose_header_is_cut(acme, conninfo, dumped, tmp_path, db):
    """Not JSON at all, a header line cut short, an empty file, a JSON line that is not an object: the same
    refusal as any other non-dump file (exit 1), never an internal error."""
    path, _ = dumped
    files = {"readme.md": "# pgrecall\n\nAgent memory.\n", "cut.dump": path.read_text()[:300], "empty.dump": "",
             "list.dump": "[1, 2]\n"}
    env = {**os.environ, "PGRECALL_DSN": conninfo.dsn()}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        done = subprocess.run([sys.executable, "-m", "pgrecall.cli", "tenant", "restore", str(tmp_path / name),
                               "--as", "junk2"], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 1, (name, done.stderr)
        assert "not a pgrecall tenant dump of format 1" in done.stderr and "nothing was restored" in done.stderr
        assert "internal error" not in done.stderr
    (tmp_path / "binary.dump").write_bytes(b"\xff\xfe\x00garbage\n")
    with pytest.raises(errors.DumpVersionMismatch, match="not a pgrecall tenant dump"):
        tenant_dump.restore_from_file(conninfo.dsn(), tmp_path / "binary.dump", "junk2")
    assert db.execute("select to_regnamespace('junk2')").fetchone()[0] is None


def test_the_cli_restoring_over_an_existing_tenant_says_to_choose_another_name(acme, conninfo, dumped):
    path, _ = dumped
    done = subprocess.run([sys.executable, "-m", "pgrecall.cli", "tenant", "restore", str(path), "--as", "acme"],
                          env={**os.environ, "PGRECALL_DSN": conninfo.dsn()}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1, done.stderr
    assert "tenant 'acme' already exists" in done.stderr
    assert "another name (--as OTHER), or drop tenant acme first" in done.stderr, done.stderr
    assert "upgrade" not in done.stderr, done.stderr
    done = subprocess.run([sys.executable, "-m", "pgrecall.cli", "tenant", "restore", str(path)],
                          env={**os.environ, "PGRECALL_DSN": conninfo.dsn()}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1 and "or drop tenant acme first (pgrecall tenant drop acme)" in done.stderr, done.stderr
