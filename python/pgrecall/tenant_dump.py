"""``pgrecall tenant dump`` and ``pgrecall tenant restore``: a tenant's rows in one file, and back.

A dump is one file of text lines. The first is a JSON header: the format (``pgrecall_dump``: 1), the tenant,
its schema version and the moment its snapshot was taken. Then, table by table (the scopes first, so that a
restore can make each scope's passage partition before the passages arrive), a JSON line naming the table
and its columns, the table's rows in PostgreSQL's COPY text format (one line per row), and ``\\.``.
Generated columns are not written; they are computed again on the way in. The roles, grants and
functions are not in the file: a restore makes them as ``create_tenant`` does, from the server's own
sources, at the same schema version (a dump from another release is refused, PR016).

A restore runs in one transaction: the tenant is created, its rows loaded with its triggers off (the rows
are already what the triggers made) and its foreign keys checked, its identity counters moved past the
loaded ids, and then every erasure the server's ledger holds for the dumped tenant that the dump does not
hold is run again (``pgrecall.replay_erasures``) before the transaction commits. No call sees the tenant
before that. The receipt lists the replayed erasures.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from . import errors

FORMAT = 1
# Made by create_tenant itself for each tenant, not copied: the ledgers of migrations and function files, and
# what only the migrations write (the projection registry, whose conditions name the tenant's schema; the
# notification channels, secret to each tenant; the lock stripes; the data steps done).
NOT_DUMPED = ("schema_migration", "function_ledger", "projection_kind", "notification_channel", "lock_stripe",
              "data_step")
END = "\\."


def _value(conn: psycopg.Connection[Any], query: Any, params: tuple[Any, ...] = ()) -> Any:
    """The first column of a statement's one row."""
    row = conn.execute(query, params).fetchone()
    assert row is not None, "a one-row statement returned no row"
    return row[0]


def _tables(conn: psycopg.Connection[Any], tenant: str) -> list[str]:
    """The tenant's tables (partitioned parents, not their partitions), each after the tables its foreign
    keys point at (a restore loads them in this order, with the keys checked), the scopes as early as that
    allows."""
    names = [r[0] for r in conn.execute(
        "select c.relname from pg_class c where c.relnamespace = %s::regnamespace and c.relkind in ('r', 'p') "
        "and not c.relispartition and c.relname <> all (%s)", (tenant, list(NOT_DUMPED))).fetchall()]
    needs: dict[str, set[str]] = {n: set() for n in names}
    for table, target in conn.execute(
            "select c.relname, t.relname from pg_constraint k join pg_class c on c.oid = k.conrelid "
            "join pg_class t on t.oid = coalesce("
            "(select i.inhparent from pg_inherits i where i.inhrelid = k.confrelid), k.confrelid) "
            "where k.contype = 'f' and c.relnamespace = %s::regnamespace", (tenant,)).fetchall():
        if table in needs and target in needs and target != table:
            needs[table].add(target)
    ordered: list[str] = []
    while needs:
        ready = sorted((n for n, deps in needs.items() if not deps), key=lambda n: (n != "scope", n))
        if not ready:
            raise RuntimeError(f"the foreign keys of tenant {tenant} form a cycle: {sorted(needs)}")
        ordered.append(ready[0])
        del needs[ready[0]]
        for deps in needs.values():
            deps.discard(ready[0])
    return ordered


def _columns(conn: psycopg.Connection[Any], tenant: str, table: str) -> list[str]:
    rows = conn.execute(
        "select a.attname from pg_attribute a where a.attrelid = format('%%I.%%I', %s::text, %s::text)::regclass "
        "and a.attnum > 0 and not a.attisdropped and a.attgenerated = '' order by a.attnum",
        (tenant, table)).fetchall()
    return [r[0] for r in rows]


def _schema_version(conn: psycopg.Connection[Any], tenant: str) -> int:
    found = conn.execute("select 1 from pgrecall.tenant where name = %s", (tenant,)).fetchone()
    if found is None:
        raise errors.TenantNotFound(f"tenant {tenant!r} does not exist", hint="pgrecall tenant list shows them.")
    return int(_value(conn, sql.SQL("select max(version) from {}.schema_migration").format(sql.Identifier(tenant))))


def dump(dsn: str, tenant: str, out: IO[str]) -> dict[str, Any]:
    """Write tenant's rows to out, from one snapshot (REPEATABLE READ, read only); the header, with row counts."""
    try:
        return _dump(dsn, tenant, out)
    except psycopg.Error as exc:
        raise errors.translate(exc) from exc


def _dump(dsn: str, tenant: str, out: IO[str]) -> dict[str, Any]:
    with psycopg.connect(dsn) as conn:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        with conn.transaction():
            version = _schema_version(conn, tenant)
            taken_at = _value(conn, "select now()")
            tables = _tables(conn, tenant)
            header = {"pgrecall_dump": FORMAT, "tenant": tenant, "schema_version": version,
                      "taken_at": taken_at.isoformat(), "tables": tables}
            out.write(json.dumps(header) + "\n")
            rows: dict[str, int] = {}
            for table in tables:
                columns = _columns(conn, tenant, table)
                out.write(json.dumps({"table": table, "columns": columns}) + "\n")
                statement = sql.SQL("copy (select {} from {}.{}) to stdout").format(
                    sql.SQL(", ").join(map(sql.Identifier, columns)), sql.Identifier(tenant), sql.Identifier(table))
                count = 0
                with conn.cursor().copy(statement) as copy:
                    for chunk in copy:
                        text = bytes(chunk).decode("utf-8")
                        count += text.count("\n")
                        out.write(text)
                out.write(END + "\n")
                rows[table] = count
    return {**header, "rows": rows}


def _rows(lines: Iterator[str], table: str) -> Iterator[str]:
    """A table's COPY lines, up to its end marker."""
    for row in lines:
        if row.rstrip("\n") == END:
            return
        yield row
    raise errors.InvalidArgument(f"the dump ends inside table {table!r}: the file is cut short")


def _sections(lines: Iterator[str]) -> Iterator[tuple[dict[str, Any], Iterator[str]]]:
    """Each table's line and an iterator over its COPY lines (consume it before asking for the next)."""
    for line in lines:
        if line.strip():
            section = json.loads(line)
            yield section, _rows(lines, section["table"])


def _not_a_dump(header_text: str) -> errors.DumpVersionMismatch:
    return errors.DumpVersionMismatch(
        f"the file is not a pgrecall tenant dump of format {FORMAT} (its header: "
        f"{header_text[:200]}); nothing was restored")


def _read_header(lines: Iterator[str]) -> dict[str, Any]:
    """The dump's first line as a dict; any other file (empty, not JSON, not text, a cut header) is refused
    the same way."""
    first = ""
    try:
        first = next(lines, "")
        header = json.loads(first)
    except UnicodeDecodeError:
        raise _not_a_dump("not UTF-8 text") from None
    except ValueError:  # json.JSONDecodeError: not JSON, or a header cut short
        raise _not_a_dump(repr(first.rstrip("\n"))) from None
    if not isinstance(header, dict):
        raise _not_a_dump(json.dumps(header))
    return header


def _check_header(conn: psycopg.Connection[Any], header: dict[str, Any]) -> None:
    if header.get("pgrecall_dump") != FORMAT:
        raise _not_a_dump(json.dumps(header))
    latest = _value(conn, "select max(version) from pgrecall.source where kind = 'migration'")
    version = header.get("schema_version")
    if version != latest:
        newer = isinstance(version, int) and version > latest
        raise errors.DumpVersionMismatch(
            f"the dump of tenant {header.get('tenant')!r} is at schema version {version}, "
            f"{'newer than' if newer else 'not'} this server's pgrecall ({latest}); nothing was restored",
            hint="Restore it with the pgrecall release that wrote it" + (
                " (install that release first)." if newer else ", then upgrade the tenant (pgrecall tenant upgrade)."))


def restore(dsn: str, source: IO[str], as_name: str | None = None) -> dict[str, Any]:
    """Restore a dump as tenant as_name (default: the dumped tenant's name), replaying later erasures;
    the receipt: tenant, the dump's header fields, rows per table, and each erasure considered. Nothing is
    restored when anything fails."""
    try:
        return _restore(dsn, source, as_name)
    except psycopg.Error as exc:
        raise errors.translate(exc) from exc


def _restore(dsn: str, source: IO[str], as_name: str | None) -> dict[str, Any]:
    lines = iter(source)
    header = _read_header(lines)
    with psycopg.connect(dsn) as conn:
        _check_header(conn, header)
        name = as_name or header["tenant"]
        tenant = sql.Identifier(name)
        rows: dict[str, int] = {}
        with conn.transaction():
            conn.execute("select pgrecall.create_tenant(%s)", (name,))
            # Loaded as the tenant's owner (the installer may act as it), with the tenant's own triggers off:
            # the rows are what those triggers made when they were written. Foreign keys stay checked.
            conn.execute(sql.SQL("set local role {}").format(sql.Identifier(f"pgrecall_{name}_owner")))
            tables = [sql.SQL("{}.{}").format(tenant, sql.Identifier(t)) for t in header["tables"]]
            for table_name in tables:
                conn.execute(sql.SQL("alter table {} disable trigger user").format(table_name))
            conn.execute(sql.SQL("truncate {}").format(sql.SQL(", ").join(tables)))
            for section, copy_lines in _sections(lines):
                table, columns = section["table"], section["columns"]
                statement = sql.SQL("copy {}.{} ({}) from stdin").format(
                    tenant, sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, columns)))
                count = 0
                with conn.cursor().copy(statement) as copy:
                    for row in copy_lines:
                        copy.write(row.encode("utf-8"))
                        count += 1
                rows[table] = count
                if table == "scope":
                    conn.execute(sql.SQL("select {}._ensure_passage_partition(s.name) from {}.scope s").format(
                        tenant, tenant))
            _move_identities(conn, name)
            for table_name in tables:
                conn.execute(sql.SQL("alter table {} enable trigger user").format(table_name))
            conn.execute("reset role")
            replayed = conn.cursor(row_factory=dict_row).execute(
                "select * from pgrecall.replay_erasures(%s, %s)", (name, header["tenant"])).fetchall()
    return {"tenant": name, "from": {k: header[k] for k in ("tenant", "schema_version", "taken_at")},
            "rows": rows, "erasures": replayed}


def _move_identities(conn: psycopg.Connection[Any], tenant: str) -> None:
    """Each counter (identity or serial column) past the largest id loaded, so new rows get new ids."""
    for table, column in conn.execute(
            "select c.relname, a.attname from pg_attribute a join pg_class c on c.oid = a.attrelid "
            "where c.relnamespace = %s::regnamespace and c.relkind in ('r', 'p') and not c.relispartition "
            "and a.attnum > 0 and not a.attisdropped "
            "and pg_get_serial_sequence(format('%%I.%%I', %s::text, c.relname), a.attname) is not null",
            (tenant, tenant)).fetchall():
        conn.execute(sql.SQL("select setval(pg_get_serial_sequence(%s, %s), coalesce(max({}), 0) + 1, false) "
                             "from {}.{}").format(sql.Identifier(column), sql.Identifier(tenant),
                                                  sql.Identifier(table)),
                     (f"{tenant}.{table}", column))


def dump_to_file(dsn: str, tenant: str, path: Path) -> dict[str, Any]:
    """Written beside the target, readable by its owner only (a dump holds every person's data), and renamed
    over the target when complete: a reader never sees half a dump, a failed dump leaves nothing."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
            header = dump(dsn, tenant, out)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return header


def restore_from_file(dsn: str, path: Path, as_name: str | None = None) -> dict[str, Any]:
    with open(path, encoding="utf-8", newline="\n") as source:
        return restore(dsn, source, as_name)

