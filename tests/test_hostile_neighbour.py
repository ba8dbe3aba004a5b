"""No tenant can slow another (issue #28, findings 1 to 3).

The neighbour here is the login role of another tenant doing everything PostgreSQL lets any role do: it
reads pg_locks and takes every advisory key it sees there (and holds it, at session level), it LISTENs on
and NOTIFYs every channel name it can find or guess, and it reads the catalog. None of that may block a
write, delay a job, wake a worker or carry a tenant's notifications to it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

import psycopg
import pytest

from conftest import wait_until
from pgrecall import names
from test_recall import put

# What the attacker ran: every advisory key granted to another backend, as the arguments of the
# pg_try_advisory_lock() form that takes it (one bigint when objsubid = 1, two integers when it is 2).
ADVISORY_KEYS = """
    select distinct l.objsubid, ((l.classid::bigint << 32) | l.objid::bigint) as key,
           (l.classid::bigint - case when l.classid::bigint >= 2147483648 then 4294967296 else 0 end)::integer,
           (l.objid::bigint - case when l.objid::bigint >= 2147483648 then 4294967296 else 0 end)::integer
      from pg_locks l
     where l.locktype = 'advisory' and l.granted and l.pid <> pg_backend_pid()
"""


class AdvisoryThief:
    """Another tenant's login role that takes (and keeps, for its whole session) every advisory key another
    backend holds. A key held by a transaction is tried again until that transaction ends: then the thief
    has it, and whoever wants the key next waits for the thief."""

    def __init__(self, dsn: str):
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.seen: set[tuple[int, int, int, int]] = set()
        self.taken: set[tuple[int, int, int, int]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.seen.update(self.conn.execute(ADVISORY_KEYS).fetchall())
            for held in sorted(self.seen - self.taken):
                objsubid, key, k1, k2 = held
                if objsubid == 1:
                    got = self.conn.execute("select pg_try_advisory_lock(%s::bigint)", (key,)).fetchone()[0]
                else:
                    got = self.conn.execute("select pg_try_advisory_lock(%s::integer, %s::integer)",
                                            (k1, k2)).fetchone()[0]
                if got:
                    self.taken.add(held)
            time.sleep(0.002)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.conn.close()


@pytest.fixture
def thief(acme, make_tenant, conninfo):
    make_tenant("b")
    t = AdvisoryThief(conninfo.dsn(user="pgrecall_b_app"))
    yield t
    t.close()


def test_a_neighbour_holding_every_advisory_key_it_sees_blocks_no_write(acme, thief, conninfo, capsys):
    """Finding 1: tenant b's app role read a's keys from pg_locks and held them; a's log_turn, remember and
    refresh_term_stats then waited for b (55P03 after their lock_timeout)."""
    off = acme.append("Ana likes tea", role="user", actor="ana")
    # Each of the three holds its serialising locks until commit, long enough for the thief to see them.
    with conninfo.connect(user="pgrecall_acme_app", autocommit=False) as a:
        a.execute("select * from acme.log_turn('ana', array['default'], 'default', 'ana-log', 'ana', 'hi')")
        a.execute("select * from acme.remember('ana', array['default'], 'default', 'Ana likes tea', "
                  "array[%s]::bigint[], array['converse'])", (off,))
        time.sleep(0.3)
        a.commit()
    with conninfo.connect(user="pgrecall_acme_worker", autocommit=False) as w:
        w.execute("select * from acme.refresh_term_stats()")
        time.sleep(0.3)
        w.commit()
    time.sleep(0.2)  # the thief takes what it saw once the transactions are over
    with conninfo.connect(user="pgrecall_acme_app") as a, conninfo.connect(user="pgrecall_acme_worker") as w:
        for conn in (a, w):
            conn.execute("set lock_timeout = '2s'")
        started = time.monotonic()
        a.execute("select * from acme.log_turn('ana', array['default'], 'default', 'ana-log', 'ana', 'hi again')")
        a.execute("select * from acme.remember('ana', array['default'], 'default', 'Ana likes tea', "
                  "array[%s]::bigint[], array['converse'])", (off,))
        w.execute("select * from acme.refresh_term_stats()")
        took = time.monotonic() - started
    with capsys.disabled():
        print(f"\nneighbour saw {len(thief.seen)} advisory keys, holds {len(thief.taken)}; log_turn, remember and "
              f"refresh_term_stats after it took them: {took * 1000:.0f} ms")
    assert took < 1.0, took
    assert thief.taken == set(), f"the neighbour holds {len(thief.taken)} of acme's keys"


_DYING_WORKER = textwrap.dedent("""
    import sys, time, psycopg
    with psycopg.connect(sys.argv[1], autocommit=True) as conn:
        n = conn.execute("select count(*) from acme.claim_embedding_jobs('doomed', 1000)").fetchone()[0]
        print(n, flush=True)
        time.sleep(600)   # killed meanwhile
""")


def test_a_killed_workers_jobs_return_within_a_second_with_a_hostile_neighbour(acme, thief, db, conninfo, capsys):
    """Finding 2: the neighbour took the killed worker's liveness key (class 'pgrl') as soon as it was free,
    and the worker's 50 jobs stayed leased for the whole lease (60.4 s of 60) instead of 0.1 s."""
    db.execute("select pgrecall.set_tenant_setting('acme', 'embedding_lease_seconds', '60')")
    for i in range(50):
        put(acme, f"job {i} of the worker that is killed")
    proc = subprocess.Popen([sys.executable, "-c", _DYING_WORKER, conninfo.dsn(user="pgrecall_acme_worker")],
                            env=dict(os.environ), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "50", proc.stderr.read()
        time.sleep(0.3)  # the neighbour has seen whatever the worker holds
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    killed = time.monotonic()
    with conninfo.connect(user="pgrecall_acme_worker") as next_worker:
        claimed = wait_until(lambda: next_worker.execute(
            "select count(*) from acme.claim_embedding_jobs('next', 1000)").fetchone()[0], timeout=5,
            interval=0.01, what="the killed worker's jobs")
        recovered = time.monotonic() - killed
    with capsys.disabled():
        print(f"\nneighbour saw {len(thief.seen)} advisory keys, holds {len(thief.taken)}; the killed worker's "
              f"{claimed} jobs claimed again {recovered * 1000:.0f} ms after the kill")
    assert claimed == 50
    assert recovered < 1.0, recovered
    assert thief.taken == set()


def channels_in_sight(db) -> set[str]:
    """Every channel name another tenant could try: the ones pgrecall used to use, and any name that a
    function body of any tenant (pg_proc.prosrc is readable by every role) spells out."""
    guessed = {f"pgrecall_{kind}_{tenant}" for kind in ("embed", "derive") for tenant in ("acme", "b")}
    for (src,) in db.execute("select p.prosrc from pg_proc p where p.prosrc ilike '%%notify%%'").fetchall():
        guessed.update(re.findall(r"pg_notify\s*\(\s*'([^']+)'", src))
        guessed.update(re.findall(r"\blisten\s+\"?(\w+)", src, re.IGNORECASE))
    return guessed


def test_a_neighbour_can_neither_listen_to_nor_wake_this_tenants_queues(acme, make_tenant, db, conninfo):
    """Finding 3: any role could LISTEN to another tenant's worker channels (learning when it works) and
    NOTIFY them (wake-ups on demand)."""
    make_tenant("b")
    guessed = channels_in_sight(db)
    with conninfo.connect(user="pgrecall_b_app") as b, conninfo.connect(user="pgrecall_acme_worker") as worker:
        for channel in sorted(guessed):
            b.execute(f'listen "{channel}"')
        names.listen(worker, "embed", "acme")
        names.listen(worker, "derive", "acme")
        # acme works: a memory to embed, a message to derive
        put(acme, "Ana keeps bees")
        s = acme.create_session("bees")
        acme.add_session_peers(s, ["ana"])
        acme.add_messages(s, [{"actor": "ana", "body": "I keep bees"}])
        woken = {n.channel for n in worker.notifies(timeout=0.5)}
        assert len(woken) == 2                          # the worker is woken on both of its channels
        assert list(b.notifies(timeout=0.5)) == []      # the neighbour hears nothing
        # and the neighbour's notifications reach no acme worker
        for channel in sorted(guessed):
            b.execute(f'notify "{channel}"')
        assert list(worker.notifies(timeout=0.5)) == []


def test_what_another_tenant_can_still_learn_from_the_catalog(acme, make_tenant, db, conninfo, acme_admin):
    """Finding 3, and docs/security.md: what tenant b's roles learn about acme from what
    PostgreSQL shows every role, pinned, so that the documented list stays exact. Each key is one question;
    True means b learns the answer."""
    make_tenant("b")
    for i in range(5):
        put(acme, f"Ana keeps {i} hives")
    db.execute("analyze acme.memory")
    secrets = [r[0] for r in db.execute("select channel from acme.notification_channel").fetchall()]
    assert len(secrets) == 2
    with conninfo.connect(user="pgrecall_b_app") as b, \
            conninfo.connect(user="pgrecall_acme_app", autocommit=False) as busy:
        busy.execute("select * from acme.recall('ana', array['default'], 'hives')")  # holds its locks a while
        catalog_text = " ".join(str(r) for r in b.execute(
            "select p.prosrc, p.proname from pg_proc p union all select setting, name from pg_settings "
            "union all select coalesce(query, ''), coalesce(application_name, '') from pg_stat_activity").fetchall())
        learnt = {
            "that the tenant exists (schema name)":
                b.execute("select count(*) from pg_namespace where nspname = 'acme'").fetchone()[0] == 1,
            "its role names": b.execute("select count(*) from pg_roles where rolname like 'pgrecall_acme_%'")
                .fetchone()[0] == 4,
            "its function sources (pgrecall's shipped SQL)": b.execute(
                "select count(*) from pg_proc where pronamespace = 'acme'::regnamespace and prosrc <> ''")
                .fetchone()[0] > 100,
            "its tables' row estimates": b.execute(
                "select c.reltuples from pg_class c join pg_namespace n on n.oid = c.relnamespace "
                "where n.nspname = 'acme' and c.relname = 'memory'").fetchone()[0] == 5,
            "its tables' activity counters": wait_until(lambda: b.execute(
                "select n_tup_ins from pg_stat_user_tables where schemaname = 'acme' and relname = 'memory'")
                .fetchone()[0] == 5, timeout=10, what="the counters of another backend's inserts"),
            "its sessions (pid, role, application name)": b.execute(
                "select count(*) from pg_stat_activity where usename = 'pgrecall_acme_app'").fetchone()[0] >= 1,
            "which of its tables a session has locked": b.execute(
                "select count(*) from pg_locks l join pg_class c on c.oid = l.relation "
                "where c.relnamespace = 'acme'::regnamespace").fetchone()[0] > 0,
            "its sessions' statements": b.execute(
                "select count(*) from pg_stat_activity where usename like 'pgrecall_acme_%' "
                "and query <> '<insufficient privilege>'").fetchone()[0] > 0,
            "its planner statistics (values)": b.execute(
                "select count(*) from pg_stats where schemaname = 'acme'").fetchone()[0] > 0,
            "its queues' channel names": any(s in catalog_text for s in secrets),
            "any advisory lock it holds": b.execute(ADVISORY_KEYS).fetchall() != [],
            "the list of tenants (control plane)": can(b, "select * from pgrecall.tenant"),
            "its rows, through any table or function": can(b, "select * from acme.memory")
                or can(b, "select * from acme.settings()"),
            "its statistics through the tenant's own view": can(b, "select * from acme.table_statistics()"),
        }
        busy.rollback()
    assert learnt == {
        "that the tenant exists (schema name)": True,
        "its role names": True,
        "its function sources (pgrecall's shipped SQL)": True,
        "its tables' row estimates": True,
        "its tables' activity counters": True,
        "its sessions (pid, role, application name)": True,
        "which of its tables a session has locked": True,
        "its sessions' statements": False,
        "its planner statistics (values)": False,
        "its queues' channel names": False,
        "any advisory lock it holds": False,
        "the list of tenants (control plane)": False,
        "its rows, through any table or function": False,
        "its statistics through the tenant's own view": False,
    }
    # the tenant's own admin reads its tables' counters through that view
    counts = {s.table_name: s.inserted for s in acme_admin.table_statistics()}
    assert counts["memory"] == 5 and counts["observation"] == 5 and "lease_holder" in counts, counts


def can(conn, query) -> bool:
    try:
        conn.execute(query)
        return True
    except psycopg.errors.InsufficientPrivilege:
        return False
