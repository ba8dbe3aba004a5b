"""The SQL that pgrecall ships, read from the package, and the install script built from it.

Layout on disk (a checkout) or inside the wheel (``pgrecall/sqlsrc/``):
``sql/control.sql`` is the control plane, ``migrations/NNNN_name.sql`` are the
forward-only tenant migrations, ``plpgsql/<subsystem>/*.sql`` the tenant's functions, installed in the
order ``plpgsql/install_order`` lists them.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from . import names

MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9]+(?:_[a-z0-9]+)*\.sql$")
FUNCTION_FILE_NAME = re.compile(r"^[a-z0-9]+(?:_[a-z0-9]+)*/_?[a-z0-9]+(?:_[a-z0-9]+)*\.sql$")
INSTALL_ORDER = "install_order"


@dataclass(frozen=True)
class Source:
    kind: str  # 'migration' or 'function'
    name: str
    version: int | None
    body: str
    position: int | None = None  # a function file's place in the install order

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.body.encode("utf-8")).hexdigest()


@cache
def sql_root() -> Path:
    """Where the SQL directories are: inside the wheel, or the repository root."""
    here = Path(__file__).resolve().parent
    packaged = here / "sqlsrc"
    if (packaged / "migrations").is_dir():
        return packaged
    checkout = here.parent.parent
    if (checkout / "migrations").is_dir():
        return checkout
    raise FileNotFoundError(f"pgrecall's SQL files are missing: looked in {packaged} and {checkout}")


def control_sql() -> str:
    return (sql_root() / "sql" / "control.sql").read_text(encoding="utf-8")


def duties_sql() -> str:
    """The duty matrix (which login role may call which tenant function), loaded by every install."""
    return (sql_root() / "sql" / "duties.sql").read_text(encoding="utf-8")


def errors_sql() -> str:
    """The one list of error codes (pgrecall.error_code), loaded by every install."""
    return (sql_root() / "sql" / "errors.sql").read_text(encoding="utf-8")


def migrations() -> list[Source]:
    found = []
    for path in sorted((sql_root() / "migrations").glob("*.sql")):
        match = MIGRATION_NAME.match(path.name)
        if not match:
            raise ValueError(f"migration file name {path.name!r} does not match NNNN_lower_snake.sql")
        found.append(Source("migration", path.name, int(match.group(1)), path.read_text(encoding="utf-8")))
    return found


def function_order() -> list[str]:
    """The function files, as paths under plpgsql/, in the order ``plpgsql/install_order`` installs them.

    A file on disk that the list leaves out, or a listed file that is not there, is an error: the order is
    written down, never guessed from names.
    """
    folder = sql_root() / "plpgsql"
    listed = [line.strip() for line in (folder / INSTALL_ORDER).read_text(encoding="utf-8").splitlines()
              if line.strip() and not line.lstrip().startswith("#")]
    on_disk = {p.relative_to(folder).as_posix() for p in folder.rglob("*.sql")}
    twice = sorted({name for name in listed if listed.count(name) > 1})
    unlisted, missing = sorted(on_disk - set(listed)), sorted(set(listed) - on_disk)
    if twice or unlisted or missing:
        raise ValueError(f"plpgsql/{INSTALL_ORDER} must list every function file once: listed twice {twice}, "
                         f"not listed {unlisted}, listed but missing {missing}")
    bad = [name for name in listed if not FUNCTION_FILE_NAME.match(name)]
    if bad:
        raise ValueError(f"function files must be plpgsql/<folder>/<lower_snake>.sql: {bad}")
    return listed


def functions() -> list[Source]:
    """The tenant's function files, in install order (``Source.position``)."""
    folder = sql_root() / "plpgsql"
    return [
        Source("function", name, None, (folder / name).read_text(encoding="utf-8"), position)
        for position, name in enumerate(function_order(), start=1)
    ]


def latest_version() -> int:
    return max((m.version for m in migrations() if m.version is not None), default=0)


def _dollar_quote(body: str, salt: str) -> str:
    tag = f"$pgrecall_{salt[:12]}$"
    if tag in body:  # practically impossible: the tag contains the body's own hash
        raise ValueError("cannot dollar-quote a source that contains its own tag")
    return f"{tag}{body}{tag}"


def sql_literal(text: str) -> str:
    """``text`` as a dollar-quoted SQL constant: nothing inside it is special (no quote, no backslash),
    whatever standard_conforming_strings is, for psql and the server alike."""
    if "\x00" in text:
        raise ValueError("PostgreSQL text cannot hold NUL")
    return _dollar_quote(text, hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest())


def load_sources_sql() -> str:
    """SQL that makes pgrecall.source hold exactly the shipped files."""
    shipped = migrations() + functions()
    names = ", ".join(f"({sql_literal(s.kind)}, {sql_literal(s.name)})" for s in shipped) or "(null, null)"
    # Files no longer shipped go first, so a renumbered migration can take its version.
    rows = [f"delete from pgrecall.source where (kind, name) not in ({names});"]
    for src in shipped:
        version = "null" if src.version is None else str(src.version)
        position = "null" if src.position is None else str(src.position)
        rows.append(
            f"insert into pgrecall.source (kind, name, version, apply_order, sha256, body)\n"
            f"values ({sql_literal(src.kind)}, {sql_literal(src.name)}, {version}, {position}, "
            f"{sql_literal(src.sha256)}, {_dollar_quote(src.body, src.sha256)})\n"
            f"on conflict (kind, name) do update\n"
            f"   set version = excluded.version, apply_order = excluded.apply_order, sha256 = excluded.sha256, "
            f"body = excluded.body;"
        )
    return "\n\n".join(rows)


# Concurrent installers (Python or psql) on one database take turns. Once the
# control plane exists this is a lock on its tenant table, which a tenant's
# login roles cannot take (they have no rights on it); only the very first
# install, before that table exists, needs an advisory key.
_INSTALL_LOCK = """-- Serialise concurrent installers (Python or psql) on this database.
do $install_lock$
begin
    if to_regclass('pgrecall.tenant') is not null then
        lock table pgrecall.tenant in share row exclusive mode;
    else
        perform pg_advisory_xact_lock(hashtext('pgrecall.install'));
    end if;
end
$install_lock$;"""


def install_sql(tenants: list[str] | tuple[str, ...] = ()) -> str:
    """One transaction's worth of SQL: control plane, sources, then each tenant.

    Tenant names are checked here (pgrecall.install_tenant() checks them again) and
    then written as string constants that read the same in any quoting mode.
    """
    tenants = [names.check_tenant_name(name) for name in tenants]
    parts = [
        "-- The shipped files are written for standard strings; a session (or a role or",
        "-- database default) with standard_conforming_strings off must not reinterpret them.",
        "set local standard_conforming_strings = on;",
        _INSTALL_LOCK,
        control_sql(),
        "-- Which login role may call which tenant function.",
        duties_sql(),
        "-- Every SQLSTATE pgrecall raises, and its Python class.",
        errors_sql(),
        "-- The shipped SQL sources.",
        load_sources_sql(),
    ]
    for name in tenants:
        parts.append(f"select * from pgrecall.install_tenant({sql_literal(name)});")
    return "\n\n".join(parts) + "\n"


def psql_script(tenant: str) -> str:
    """The self-contained script printed by ``pgrecall sql --tenant NAME``."""
    from . import __version__

    names.check_tenant_name(tenant)  # before the name is written into a comment line
    return (
        f"-- pgrecall {__version__}: install or upgrade tenant {tenant!r}.\n"
        "-- Apply with: psql -v ON_ERROR_STOP=1 -f this_file.sql \"$DATABASE_URL\"\n"
        "-- Needs pgvector >= 0.8 and btree_gist on the server, and a role with\n"
        "-- CREATEROLE and CREATE on the database. Re-running it is safe.\n"
        "\\set ON_ERROR_STOP on\n"
        "begin;\n\n" + install_sql([tenant]) + "\ncommit;\n"
    )


INSTALL_SCRIPT = "sql/install.sql"


def install_script() -> str:
    """The committed ``sql/install.sql``: the whole install for psql alone, no Python needed.

    ``psql -v ON_ERROR_STOP=1 -v tenant=acme -f sql/install.sql`` installs or upgrades the control
    plane and tenant acme; without ``-v tenant=...`` only the control plane. psql quotes the name
    (``:'tenant'``) and pgrecall.install_tenant() checks it, as it checks the Python path's.
    """
    return (
        "-- pgrecall: install or upgrade the control plane and, with -v tenant=NAME, one tenant.\n"
        "-- Generated by `make install-script` from sql/, migrations/ and plpgsql/: do not edit by hand.\n"
        "-- Apply with: psql -v ON_ERROR_STOP=1 -v tenant=acme -f sql/install.sql \"$DATABASE_URL\"\n"
        "-- Needs pgvector >= 0.8 and btree_gist on the server, and a role with\n"
        "-- CREATEROLE and CREATE on the database. Re-running it is safe.\n"
        "\\set ON_ERROR_STOP on\n"
        "begin;\n\n" + install_sql([]) + "\n"
        "\\if :{?tenant}\n"
        "select * from pgrecall.install_tenant(:'tenant');\n"
        "\\endif\n\n"
        "commit;\n"
    )


def write_install_script() -> Path:
    """Regenerate ``sql/install.sql`` in the checkout (``make install-script``)."""
    path = sql_root() / INSTALL_SCRIPT
    path.write_text(install_script(), encoding="utf-8")
    return path
