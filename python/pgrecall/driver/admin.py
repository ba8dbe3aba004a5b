"""The back office (the admin role): erasure and expiry with their receipts, settings, lexical statistics
(also the worker's).

Each function builds the call of one stored function; ``Memory`` and ``AsyncMemory`` run it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from .. import errors
from ._calls import (
    Call,
    Handle,
    Program,
    Statement,
    connection_state,
    json_value,
    one,
    row_factory,
    rows,
    step,
)
from ._generated import Setting as Setting  # re-exported
from ._generated import TableStatistics as TableStatistics  # re-exported
from ._generated import TermStats as TermStats  # re-exported


@dataclass(frozen=True)
class ErasureReceipt:
    """An erasure request and what it did: rows erased and, per projection kind, what remains (the residual,
    zeros when it worked), who ran it and as which login role."""

    id: int
    selector: dict[str, Any]
    reason: str
    requested_by: str | None
    requested_at: datetime
    completed_at: datetime | None
    observations_erased: int | None
    rows_erased: dict[str, int] | None
    residual: dict[str, int] | None  # None only while a request is not complete
    actor: str | None
    actor_role: str | None
    tables_touched: list[str] | None  # the tables it deleted from or rewrote (None: a receipt from before 0019)
    # when refresh_erasure_statistics() took their planner statistics again; None: pg_stats may hold erased values
    statistics_refreshed_at: datetime | None
    statistics_stale: list[str] | None  # tables left without rows whose statistics this server cannot clear
    # rewrite_erased(): when every touched table was rewritten (no page keeps the erased rows), which were, and
    # the WAL position after the rewrite (WAL before it may hold the words)
    rewritten_at: datetime | None = None
    rewritten_tables: list[str] | None = None
    rewrite_lsn: str | None = None
    # pgrecall.flush_erasure(), the operator's: pg_statistic rewritten, the WAL switched and checkpointed
    flushed_at: datetime | None = None
    flushed_by: str | None = None
    flush_redo_lsn: str | None = None
    still_held_by: dict[str, str] | None = None  # what may still hold the words (WAL, archive, backups, ...) and when

    @property
    def clean(self) -> bool:
        """Completed with nothing derived from the erased observations left behind."""
        return self.residual is not None and not any(self.residual.values())


def erase(h: Handle, selector: Mapping[str, Any], *, reason: str, actor: str,
          requested_by: str | None = None) -> Call[ErasureReceipt]:
    """Erase an observation, a data subject, a peer or a scope, and everything derived from it (admin role).

    ``actor`` is who runs it (recorded in the receipt with the login role). Returns the receipt: rows
    erased and the residual per projection kind (zeros when it worked).
    """
    return one("erase", {"actor": actor, "selector": Jsonb(selector), "reason": reason,
                         "requested_by": requested_by}, ErasureReceipt)


@dataclass(frozen=True)
class ExportedRow:
    """One stored row of a data subject's export: its kind (``observation``, ``memory``, ``fact``, ...), its key
    in that kind, and the row as stored (vectors left out, peers named, observations placed)."""

    kind: str
    row_key: str
    record: dict[str, Any]


def export(h: Handle, selector: Mapping[str, Any]) -> Call[list[ExportedRow]]:
    """Everything an erasure of the same selector (``{"data_subject": ...}`` or ``{"peer": ...}``) would remove,
    one row per stored row (admin role). Empty for an unknown data subject. ``pgrecall export`` writes it as
    JSON lines; run it in a REPEATABLE READ transaction for one consistent picture."""
    return rows("export", {"selector": Jsonb(selector)}, ExportedRow)


@dataclass(frozen=True)
class Flushed:
    """What pgrecall.flush_erasure() did: when, the redo point of its checkpoint and its WAL segment, and what may
    still hold the erased words."""

    flushed_at: datetime
    flush_redo_lsn: str
    wal_segment: str
    still_held_by: dict[str, str]


def flush_erasure(conn: Any, tenant: str, request_id: int) -> Flushed:
    """The operator's step after rewrite_erased(), on the operator's own connection (a superuser, or a role with
    pg_maintain, pg_checkpoint and EXECUTE on pg_switch_wal() that installed the tenant): rewrite pg_statistic,
    switch the WAL segment, CHECKPOINT. Raises FlushNotPermitted (naming what the role lacks) or
    ErasureNotRewritten."""
    import psycopg

    try:
        with conn.cursor(row_factory=row_factory(Flushed)) as cur:
            row = cur.execute("select * from pgrecall.flush_erasure(%s, %s)", (tenant, request_id)).fetchone()
    except psycopg.Error as exc:
        raise errors.translate(exc) from exc
    assert isinstance(row, Flushed)
    return row


@dataclass(frozen=True)
class VacuumRight:
    name: str  # a table of the tenant
    allowed: bool  # this role owns it, or holds MAINTAIN on it (PostgreSQL 17+)


def vacuum_rights(h: Handle, tables: list[str], server_version: int) -> Statement[list[VacuumRight]]:
    """Which of the tenant's tables this role may VACUUM (tables that no longer exist are not listed)."""
    maintain = sql.SQL(" or has_table_privilege(c.oid, 'MAINTAIN')") if server_version >= 170000 else sql.SQL("")
    return Statement(sql.SQL("select t as name, pg_has_role(c.relowner, 'USAGE'){} as allowed "
                             "from unnest(%(tables)s::text[]) t join pg_class c on c.relname = t "
                             "and c.relnamespace = %(schema)s::regnamespace").format(maintain),
                     {"tables": tables, "schema": h.tenant}, row_factory(VacuumRight), list)


def vacuum_erased(h: Handle, receipt: ErasureReceipt) -> Program[list[str]]:
    """VACUUM the tables an erasure touched, so that their dead rows (which still hold the erased values) are
    removed from the table and its indexes; returns the tables vacuumed.

    VACUUM needs the MAINTAIN privilege (PostgreSQL 17+; the control plane grants it on a tenant's tables to
    its admin role) or the tables' owner, and an autocommit connection outside a transaction (InvalidArgument
    otherwise). Raises :class:`errors.NotPermitted` (naming what is missing) before vacuuming anything when
    this role may not.
    """
    tables = list(receipt.tables_touched or [])
    session = yield from connection_state()
    if not session.autocommit or not session.idle:
        raise errors.InvalidArgument("VACUUM cannot run inside a transaction",
                                     hint="Use an autocommit connection, as pgrecall.connect() opens.")
    if not tables:
        return []
    version = session.server_version
    rights = {r.name: r.allowed for r in (yield from step(vacuum_rights(h, tables, version)))}
    missing = [t for t in tables if not rights.get(t, True)]
    if missing:
        raise errors.NotPermitted(
            f"cannot VACUUM {', '.join(missing)}: this role is not their owner"
            + ("" if version >= 170000 else f" and PostgreSQL {version // 10000} has no MAINTAIN privilege"),
            hint="Run VACUUM on them as the tenant's owner or a superuser"
                 + (", or upgrade the tenant (pgrecall tenant upgrade) to grant MAINTAIN to its admin role."
                    if version >= 170000 else "; PostgreSQL 17+ lets the admin role do it (MAINTAIN)."))
    present = [t for t in tables if t in rights]
    yield from step(Statement(sql.SQL("vacuum {}").format(
        sql.SQL(", ").join(sql.Identifier(h.tenant, t) for t in present)), {}, None, list))
    return present


def _as_dict(settings: list[Setting]) -> dict[str, Any]:
    return {s.key: s.value for s in settings}


def settings(h: Handle) -> Call[dict[str, Any]]:
    """The tenant's settings as {key: value}."""
    return rows("settings", {}, Setting).then(_as_dict)


def setting_descriptions(h: Handle) -> Call[list[Setting]]:
    """The tenant's settings with what each one does."""
    return rows("settings", {}, Setting)


def set_setting(h: Handle, key: str, value: Any) -> Call[Any]:
    """Change one setting (admin role); the value must have the current one's JSON type and pass its range.
    Returns the value stored."""
    return json_value("set_setting", {"key": key, "value": Jsonb(value)})

