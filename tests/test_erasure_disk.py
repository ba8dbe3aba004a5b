"""Forgetting down to the bytes (issue #28, finding 4).

After an erasure, VACUUM and a CHECKPOINT, the erased words were still on disk: in the dead space of
pages that VACUUM had freed but not overwritten (memory, work_task, session_peer, entity, observation, a
passage partition) and in pg_statistic's dead rows. These tests write a subject's words, erase them, and
read every file of the server's data folder for them: after the rewrite (`rewrite_erased()`, then the
operator's `pgrecall.flush_erasure()`; `pgrecall erase --rewrite` runs both), no relation file holds them,
and with wal_recycle off no WAL file does either.

Slow by nature: each reads the whole data folder of the test server (all the test databases in it) a few
times.
"""

from __future__ import annotations

import secrets
from collections import Counter
from pathlib import Path

import psycopg
import pytest

from pgrecall.deriver import Deriver

pytestmark = pytest.mark.slow


def on_disk(data: Path, word: bytes) -> Counter:
    """Occurrences of word per file of the data folder (a file that vanishes while read is skipped)."""
    found: Counter = Counter()
    for path in data.rglob("*"):
        try:
            if path.is_file():
                n = path.read_bytes().count(word)
                if n:
                    found[str(path.relative_to(data))] = n
        except (FileNotFoundError, PermissionError):
            continue
    return found


def relation_files(found: Counter) -> Counter:
    return Counter({f: n for f, n in found.items() if f.startswith(("base/", "global/", "pg_tblspc/"))})


def wal_files(found: Counter) -> Counter:
    return Counter({f: n for f, n in found.items() if f.startswith("pg_wal/")})


def relation_names(su: psycopg.Connection, files: Counter) -> dict[str, int]:
    """The relation each file of this database belongs to (by its filenode), for the figures."""
    named: dict[str, int] = {}
    for f, n in files.items():
        node = f.rsplit("/", 1)[-1].split(".")[0].split("_")[0]
        rel = su.execute("select coalesce(pg_filenode_relation(0, %s::oid)::text, 'file ' || %s)",
                         (int(node), node)).fetchone()[0] if node.isdigit() else f
        named[rel] = named.get(rel, 0) + n
    return named


@pytest.fixture
def su(superuser_dsn):
    with psycopg.connect(superuser_dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture
def data_dir(su) -> Path:
    data = Path(su.execute("show data_directory").fetchone()[0])
    if not data.is_dir() or not any(data.iterdir()):
        pytest.skip("the server's data folder is not readable from here")
    return data


@pytest.fixture
def no_wal_recycling(su):
    """wal_recycle = off: a segment the checkpoint no longer needs is deleted, not renamed for reuse with
    its old bytes in it (what pgrecall's embedded server sets)."""
    su.execute("alter system set wal_recycle = off")
    su.execute("select pg_reload_conf()")
    yield
    su.execute("alter system reset wal_recycle")
    su.execute("select pg_reload_conf()")


def write_the_subjects_words(acme, conninfo, db, word: str, subject: str) -> None:
    """The words in every place they went in the issue's probe: the log and its passages, a memory and
    its entity, sessions and their derivation tasks and working representations, the statistics."""
    acme.add_peer("zqsubject", "human", metadata={"note": word}, data_subject_id=subject)
    for i in range(3):
        off = acme.append(f"I was born in {word} and I live in {word} number {i}", role="user",
                          actor="zqsubject")
        acme.remember(f"zqsubject lives in {word} ({i})", evidence=[off], purposes=["converse"], about=[word])
    s = acme.create_session(f"{word} trip", principal="zqsubject")
    acme.add_session_peers(s, ["zqsubject", {"peer": "bot", "observe_others": True}])
    acme.add_messages(s, [{"actor": "zqsubject", "body": f"I live in {word}"},
                          {"actor": "zqsubject", "body": f"I work at {word} bakery"}])
    with Deriver("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker")) as deriver:
        deriver.drain()
    acme.append("someone else's words stay", role="user", actor="ben")
    for (table,) in db.execute("select c.relname from pg_class c where c.relnamespace = 'acme'::regnamespace "
                               "and c.relkind in ('r', 'p') and not c.relispartition").fetchall():
        db.execute(f'analyze acme."{table}"')


def test_after_the_rewrite_no_relation_file_and_no_wal_file_holds_the_erased_words(
        acme, acme_admin, db, conninfo, su, data_dir, no_wal_recycling, capsys):
    word = "zq" + secrets.token_hex(6)
    write_the_subjects_words(acme, conninfo, db, word, "u-disk")
    receipt = acme_admin.erase({"data_subject": "u-disk"}, reason="request #28", actor="dpo")
    assert set(receipt.residual.values()) == {0}
    acme_admin.refresh_erasure_statistics(receipt.id)
    acme_admin.vacuum_erased(acme_admin.erasure_requests(1)[0])
    su.execute("checkpoint")
    before = on_disk(data_dir, word.encode())
    with capsys.disabled():
        print(f"\nerased word {word}, after erase, VACUUM and CHECKPOINT: {len(relation_files(before))} relation "
              f"files ({sum(relation_files(before).values())} times) {relation_names(su, relation_files(before))}, "
              f"{len(wal_files(before))} WAL files ({sum(wal_files(before).values())} times)")
    assert relation_files(before), "the words should still be in the freed space of the pages"

    rewritten = acme_admin.rewrite_erased(receipt.id)
    assert rewritten.rewritten_at is not None and set(rewritten.tables_touched) <= set(rewritten.rewritten_tables)
    flushed = su.execute("select * from pgrecall.flush_erasure('acme', %s)", (receipt.id,)).fetchone()
    assert flushed is not None
    after = on_disk(data_dir, word.encode())
    with capsys.disabled():
        print(f"after the rewrite and the flush: {len(relation_files(after))} relation files "
              f"{relation_names(su, relation_files(after))}, {len(wal_files(after))} WAL files "
              f"({sum(wal_files(after).values())} times), elsewhere {dict(after - relation_files(after) - wal_files(after))}")
    assert relation_files(after) == Counter()
    assert wal_files(after) == Counter()
    receipt = acme_admin.erasure_requests(1)[0]
    assert receipt.flushed_at is not None and receipt.still_held_by
    assert {"wal_archive", "backups", "replicas"} <= set(receipt.still_held_by)
    # what the subject did not say is still there, in the rewritten files
    assert db.execute("select count(*) from acme.observation where body = 'someone else''s words stay'").fetchone()[0]


def test_pgrecall_erase_rewrite_leaves_no_relation_file_holding_the_words(
        acme, db, conninfo, su, data_dir, superuser_dsn):
    from test_install_paths import run_cli

    word = "zq" + secrets.token_hex(6)
    write_the_subjects_words(acme, conninfo, db, word, "u-cli")
    env = {"PGRECALL_DSN": superuser_dsn, "PGRECALL_ADMIN_DSN": conninfo.dsn(user="pgrecall_acme_admin")}
    done = run_cli("erase", "--tenant", "acme", "--subject", "u-cli", "--reason", "ticket 28", "--rewrite", env=env,
                   check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rewrote" in done.stdout and "WAL" in done.stdout, done.stdout
    assert relation_files(on_disk(data_dir, word.encode())) == Counter()
