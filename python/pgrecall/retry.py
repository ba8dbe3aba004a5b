"""Statements that lost to a concurrent one, run again.

PostgreSQL (or Citus's distributed deadlock detector) ends one transaction of a deadlock with 40P01, and a
serializable or repeatable-read transaction that met a concurrent update with 40001. The transaction that
got the error was rolled back whole: when it was one statement of its own (autocommit), running that
statement again is exactly what the caller asked for, and nothing of it was stored twice. Inside a
transaction of the caller's, the error is the caller's: their earlier statements are gone too.
"""

from __future__ import annotations

import random
from typing import Any

import psycopg

LOST_A_RACE = frozenset({"40P01", "40001"})  # deadlock_detected, serialization_failure

# Waits before the second, third and fourth attempt of a call: a deadlock's other side usually needs a few
# milliseconds to finish, and the jitter keeps two losers from meeting again in step.
CALL_PAUSES_S = (0.01, 0.05, 0.25)


def lost_a_race(exc: BaseException) -> bool:
    """Whether a failed statement was ended by a concurrent one (40P01, 40001), not refused for itself."""
    return isinstance(exc, psycopg.Error) and exc.sqlstate in LOST_A_RACE


def may_run_again(exc: BaseException, conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """Whether the statement that raised ``exc`` on ``conn`` can simply run again: it lost a race and was a
    transaction of its own (the connection is idle after it, with nothing of the caller's rolled back)."""
    return (lost_a_race(exc) and not conn.closed and conn.autocommit
            and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE)


def jittered(pause_s: float) -> float:
    """A pause between one and two times ``pause_s``."""
    return pause_s * (1.0 + random.random())
