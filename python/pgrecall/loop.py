"""The loop of the background processes (``pgrecall worker``, ``pgrecall deriver``).

Both do the same thing around their own work: connect as the tenant's worker role, LISTEN on the
tenant's channel, work until nothing is claimable, then sleep until a NOTIFY or the poll interval (a
lease that ended, or a retry that came due, needs the poll). :func:`run` is that loop, once, for both.

A notification is a hint, never a command: whoever can NOTIFY the channel (since its name is the
tenant's secret, only the tenant's own roles) could otherwise make the worker claim on demand. A
notification whose round finds nothing to do makes the loop deaf to notifications, and it stays deaf
while they keep coming and the polls keep finding nothing; so a flood costs at most one empty round of
claims per poll interval (the poll itself), and work queued during it waits at most one interval. A
round that finds work, or a poll interval without a notification, makes it heed them again at once.

Work may come without a notification: a write that queues embedding work while work waits unleased
sends none (plpgsql/shared/notifications.sql: the commits of notifying transactions are serialised). So a round
that did something is followed by another at once, once the transactions in flight when it ended have
ended too (at most ``SETTLE_SECONDS``): one of them may have queued work, seen the work this round took
waiting, and notified nobody. A job is left for the poll only behind a transaction that stays open longer.

A lost connection (a server restart, a terminated backend, a network cut) is not the end: the loop
reconnects, waiting 0.5 s, 1 s, 2 s ... up to ``max_delay`` between attempts, and goes on; whatever
the process held was leased to the session that died, and comes back to the queue with it
(plpgsql/queues/leases.sql). Any other error is permanent (the role may not claim, the worker runs another
model, a bug) and stops the loop: it propagates, so the CLI prints it as one line with its hint.
"""

from __future__ import annotations

import logging
import select
import time
from collections.abc import Callable
from dataclasses import dataclass

import psycopg

from . import names

log = logging.getLogger("pgrecall.loop")

# Refusals at connect time that waiting will not change: a wrong password or role, no such database.
_PERMANENT_AT_CONNECT = ("28", "3D")


@dataclass
class Backoff:
    """Exponential backoff: first, then doubled each time, never more than most."""

    first: float = 0.5
    most: float = 30.0
    _next: float | None = None

    def next(self) -> float:
        delay = self.first if self._next is None else self._next
        self._next = min(delay * 2, self.most)
        return delay

    def reset(self) -> None:
        self._next = None


def connection_lost(exc: BaseException, conn: psycopg.Connection | None) -> bool:
    """Whether exc means the connection is gone (try again later) rather than a refusal or a bug.

    A pgrecall error raised from a database error carries it as its cause; the connection tells best:
    psycopg marks it broken when the server went away mid-call."""
    if conn is not None and conn.broken:
        return True
    cause: BaseException | None = exc
    for _ in range(8):  # a pgrecall error's cause is the database error; a chain is short
        if cause is None or isinstance(cause, psycopg.Error):
            break
        cause = cause.__cause__
    if not isinstance(cause, psycopg.OperationalError):
        return False
    sqlstate = getattr(cause, "sqlstate", None) or ""
    return not sqlstate.startswith(_PERMANENT_AT_CONNECT)


def _sleep(seconds: float, stop: Callable[[], bool]) -> None:
    """Sleep, but notice stop() within a tenth of a second."""
    until = time.monotonic() + seconds
    while not stop() and time.monotonic() < until:
        time.sleep(min(0.1, max(0.0, until - time.monotonic())))


# How long the loop waits, after a round that did something, for the transactions then in flight to end.
SETTLE_SECONDS = 2.0


def _settle(conn: psycopg.Connection, listener: psycopg.Connection, most: float, stop: Callable[[], bool]) -> None:
    """Wait until every transaction in flight now has ended (its work, if it queued any, is then visible to a
    claim), a notification comes, ``most`` seconds pass or stop(): whichever is first."""
    row = conn.execute("select pg_current_snapshot()::text").fetchone()
    until = time.monotonic() + most
    while row is not None and not stop():
        ended = conn.execute("select pg_snapshot_xmin(pg_current_snapshot()) >= pg_snapshot_xmax(%s::pg_snapshot)",
                             (row[0],)).fetchone()
        left = until - time.monotonic()
        if (ended and ended[0]) or left <= 0:
            return
        ready, _, _ = select.select([listener.fileno()], [], [], min(0.02, left))
        if ready:
            return


def _drain(listener: psycopg.Connection) -> None:
    for _ in listener.notifies(timeout=0):
        pass


def _wait(listener: psycopg.Connection, poll_seconds: float, heed_notifications: bool,
          stop: Callable[[], bool]) -> tuple[bool, bool]:
    """Wait for the next round: until the poll interval has passed or, when ``heed_notifications``, a
    notification came; notice stop() within a tenth of a second. Returns whether a notification ended the
    wait, and whether any came while they were not heeded (they are discarded)."""
    until = time.monotonic() + poll_seconds
    ignored = False
    while not stop():
        left = until - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select([listener.fileno()], [], [], min(0.1, left))
        if not ready:
            continue
        came = any(True for _ in listener.notifies(timeout=0))
        if came and heed_notifications:
            _drain(listener)
            return True, False
        ignored = ignored or came
        if came:
            time.sleep(min(0.1, max(0.0, until - time.monotonic())))  # a flood is read ten times a second
    _drain(listener)
    return False, ignored


def run(conninfo: str, tenant: str, channel: str, work: Callable[[psycopg.Connection], object], *,
        poll_seconds: float = 5.0, stop: Callable[[], bool] = lambda: False,
        between: Callable[[psycopg.Connection], object] | None = None,
        on_disconnect: Callable[[], object] | None = None, backoff: Backoff | None = None) -> None:
    """Run ``work(conn)`` until it has nothing left, ``between(conn)`` after it, then (after a round that did
    nothing: see the module's docstring) wait for a NOTIFY on the tenant's ``channel`` or ``poll_seconds``;
    again, until ``stop()``. ``work`` returns how much it did
    (falsy: nothing): a round woken by a notification that did nothing makes the waits ignore
    notifications while they keep coming for nothing (see the module's docstring). A lost connection is
    retried with ``backoff`` (``on_disconnect()`` first, to drop what was bound to it); any other error
    propagates."""
    backoff = backoff or Backoff()
    while not stop():
        conn: psycopg.Connection | None = None
        try:
            with psycopg.connect(conninfo, autocommit=True) as conn, \
                    psycopg.connect(conninfo, autocommit=True) as listener:
                names.listen(listener, channel, tenant)
                woken = deaf = ignored = False
                while not stop():
                    did = work(conn)
                    backoff.reset()  # a round went through: the next loss starts from the first delay
                    if stop():
                        return
                    if between is not None:
                        between(conn)
                    if did:  # look again at once: work may have been queued without a notification
                        _settle(conn, listener, min(poll_seconds, SETTLE_SECONDS), stop)
                        woken = deaf = ignored = False
                        continue
                    # deaf after a notification that found nothing, and while they keep coming for nothing
                    deaf = not did and (woken or (deaf and ignored))
                    woken, ignored = _wait(listener, poll_seconds, heed_notifications=not deaf, stop=stop)
        except Exception as exc:
            if not connection_lost(exc, conn):
                raise
            if on_disconnect is not None:
                on_disconnect()
            delay = backoff.next()
            log.warning("pgrecall %s loop of tenant %s: connection lost (%s); reconnecting in %.1f s",
                        channel, tenant, str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
                        delay)
            _sleep(delay, stop)
