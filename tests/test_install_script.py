"""sql/install.sql: the install a DBA applies with psql alone (#32 item 5). It is generated
(``make install-script``), so it must be current, and it must install what the Python path installs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from catalog import snapshot
from pgrecall import install, server, sources
from test_install_paths import spare_database, standard_strings  # noqa: F401  (fixtures)

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / sources.INSTALL_SCRIPT


def _psql(conninfo, dbname: str, *variables: str) -> subprocess.CompletedProcess:
    args = [str(server.psql_binary()), "-X", "-q"]
    for variable in variables:
        args += ["-v", variable]
    return subprocess.run([*args, "-f", str(SCRIPT), conninfo.dsn(dbname=dbname)],
                          capture_output=True, text=True, timeout=300)


def test_the_committed_install_script_is_what_the_sources_generate():
    assert SCRIPT.read_text(encoding="utf-8") == sources.install_script(), (
        "sql/install.sql is stale: run make install-script and commit it")


def test_psql_alone_installs_the_catalog_that_python_installs(db, conninfo, spare_database):
    for _ in range(2):  # re-running it upgrades in place
        proc = _psql(conninfo, spare_database, "tenant=acme")
        assert proc.returncode == 0, proc.stderr
    with conninfo.connect() as conn:
        install.install(conn, ["acme"])
    with conninfo.connect(dbname=spare_database) as other:
        other.execute("set standard_conforming_strings = on")  # as db's session: the catalog prints alike
        assert snapshot(other, "acme") == snapshot(db, "acme")
        assert other.execute("select array_agg(name) from pgrecall.tenant").fetchone()[0] == ["acme"]


@pytest.mark.parametrize("standard_strings", ["on"], indirect=True)
def test_without_a_tenant_it_installs_the_control_plane_and_a_bad_name_installs_nothing(
        db, conninfo, spare_database):
    proc = _psql(conninfo, spare_database, "tenant=x'; drop schema public cascade; --")
    assert proc.returncode != 0 and "invalid tenant name" in proc.stderr
    with conninfo.connect(dbname=spare_database) as other:
        assert other.execute("select to_regnamespace('pgrecall'), to_regnamespace('public') is not null"
                             ).fetchone() == (None, True)
    proc = _psql(conninfo, spare_database)
    assert proc.returncode == 0, proc.stderr
    with conninfo.connect(dbname=spare_database) as other:
        assert other.execute("select count(*) from pgrecall.tenant").fetchone()[0] == 0
        assert other.execute("select count(*) from pgrecall.source where kind = 'migration'").fetchone()[0] == len(
            sources.migrations())
