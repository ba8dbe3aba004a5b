"""pgbouncer in transaction mode in front of a server, for one role: what the README recommends before many
clients, started for a bench (``python -m bench.load --pooler N``) or a test (tests/test_connection_storm.py).

Debian's ``pgbouncer`` package; the role logs in without a password over the server's local socket, as the
embedded server's pg_hba allows, so pgbouncer trusts its clients (it listens on 127.0.0.1 only).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg


class PoolerUnavailable(RuntimeError):
    """pgbouncer is not installed, or did not start (the message holds its output)."""


def binary() -> str | None:
    return shutil.which("pgbouncer") or ("/usr/sbin/pgbouncer" if os.path.exists("/usr/sbin/pgbouncer") else None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _socket_owner(host: str) -> str:
    import pwd

    return pwd.getpwuid(os.stat(host).st_uid).pw_name if host.startswith("/") else "nobody"


@contextmanager
def pgbouncer(host: str, port: int | str, dbname: str, user: str, pool_size: int = 3,
              max_clients: int = 100) -> Iterator[str]:
    """pgbouncer (transaction mode, ``pool_size`` server connections) in front of the server at host:port for
    ``user``; yields the DSN clients use; stopped afterwards."""
    program = binary()
    if program is None:
        raise PoolerUnavailable("pgbouncer is not installed (Debian's package pgbouncer)")
    folder = Path(tempfile.mkdtemp(prefix="pgrecall-pgbouncer-"))
    folder.chmod(0o755)
    listen = _free_port()
    (folder / "users.txt").write_text(f'"{user}" ""\n')
    (folder / "pgbouncer.ini").write_text(f"""[databases]
{dbname} = host={host} port={port} dbname={dbname}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {listen}
unix_socket_dir =
auth_type = trust
auth_file = {folder / "users.txt"}
pool_mode = transaction
default_pool_size = {pool_size}
max_client_conn = {max_clients}
""")
    for f in folder.iterdir():
        f.chmod(0o644)
    command = [program, str(folder / "pgbouncer.ini")]
    if os.geteuid() == 0:  # pgbouncer refuses to run as root: the server's own system user reaches its socket
        command[1:1] = ["-u", _socket_owner(host)]
    log = open(folder / "pgbouncer.out", "wb")  # noqa: SIM115  (closed with the process)
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    dsn = psycopg.conninfo.make_conninfo(host="127.0.0.1", port=listen, dbname=dbname, user=user)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                psycopg.connect(dsn, connect_timeout=2).close()
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise PoolerUnavailable(f"pgbouncer did not start: "
                                            f"{(folder / 'pgbouncer.out').read_text(errors='replace')}") from None
                time.sleep(0.1)
        yield dsn
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        shutil.rmtree(folder, ignore_errors=True)
