"""The back office (the admin role): erasure and expiry with their receipts, settings, lexical statistics
(also the worker's).

Each function builds the call of one stored function; ``Memory`` and ``AsyncMemory`` run it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from ._calls import Call, Handle, json_value, one, rows
from ._calls import value as single_value


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

    @property
    def clean(self) -> bool:
        """Completed with nothing derived from the erased observations left behind."""
        return self.residual is not None and not any(self.residual.values())


@dataclass(frozen=True)
class Setting:
    key: str
    value: Any
    description: str | None


@dataclass(frozen=True)
class TermStats:
    documents: int
    terms: int


def erase(h: Handle, selector: Mapping[str, Any], *, reason: str, actor: str,
          requested_by: str | None = None) -> Call[ErasureReceipt]:
    """Erase an observation, a data subject, a peer or a scope, and everything derived from it (admin role).

    ``actor`` is who runs it (recorded in the receipt with the login role). Returns the receipt: rows
    erased and the residual per projection kind (zeros when it worked).
    """
    return one("erase", {"actor": actor, "selector": Jsonb(selector), "reason": reason,
                         "requested_by": requested_by}, ErasureReceipt)


def expire(h: Handle, *, actor: str = "expiry gate") -> Call[list[ErasureReceipt]]:
    """With the tenant's expiry gate on, erase what passed its retention date (admin role); the receipts."""
    return rows("expire", {"actor": actor}, ErasureReceipt)


def erasure_requests(h: Handle, limit: int = 20) -> Call[list[ErasureReceipt]]:
    """The newest erasure receipts (admin role)."""
    return rows("erasure_requests", {"limit": limit}, ErasureReceipt)


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


def refresh_term_stats(h: Handle) -> Call[TermStats]:
    """Recompute the lexical statistics (worker or admin role)."""
    return one("refresh_term_stats", {}, TermStats)


def term_stats_stale(h: Handle) -> Call[bool]:
    """Whether the lexical statistics lag the memories enough to recompute them (worker or admin role)."""
    return single_value("term_stats_stale", {}, bool)
