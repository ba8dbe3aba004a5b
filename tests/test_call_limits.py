"""A call the server stops before it finishes reaches the caller as a pgrecall error, never a bare psycopg one
(docs/python.md): past the session's statement_timeout ``StatementTimeout`` (a ``TimeoutError``), past its
lock_timeout ``LockTimeout`` (a ``ConcurrencyError`` and a ``TimeoutError``), a cancel request ``CallCancelled``;
each says nothing of the call was applied, nothing is, and the handle's next call works."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

import pgrecall
from pgrecall import errors


def _handle(conninfo, **settings: str):
    options = " ".join(f"-c {k}={v}" for k, v in settings.items())
    dsn = psycopg.conninfo.make_conninfo(conninfo.dsn(user="pgrecall_acme_app"), options=options)
    return pgrecall.connect(dsn, tenant="acme", principal="bot", scopes=["default"])


def _log(superuser_dsn: str) -> tuple[int, int]:
    with psycopg.connect(superuser_dsn, autocommit=True) as conn:
        return conn.execute("select (select count(*) from acme.observation),"
                            " (select log_watermark from acme.scope where name = 'default')").fetchone()


@pytest.mark.parametrize("setting, error", [("statement_timeout", errors.StatementTimeout),
                                            ("lock_timeout", errors.LockTimeout)])
def test_an_append_stopped_by_a_timeout_says_so_and_writes_nothing(acme, conninfo, superuser_dsn, setting, error):
    first = acme.append("Ana grows tomatoes", role="user", actor="ana")
    before = _log(superuser_dsn)
    with _handle(conninfo, **{setting: "200"}) as mem:
        holder = psycopg.connect(superuser_dsn)
        holder.execute("lock table acme.observation in share mode")
        try:
            with pytest.raises(error) as stopped:
                mem.append("and basil", role="user", actor="ana")
        finally:
            holder.rollback()
            holder.close()
        assert isinstance(stopped.value, TimeoutError) and isinstance(stopped.value.__cause__, psycopg.Error)
        assert setting in str(stopped.value) and "Nothing of a call of its own was applied" in stopped.value.hint
        assert _log(superuser_dsn) == before  # no turn, no offset taken
        assert mem.append("and basil", role="user", actor="ana") == first + 1  # the handle goes on
    if error is errors.LockTimeout:
        assert isinstance(stopped.value, errors.ConcurrencyError)


def test_a_cancelled_call_is_call_cancelled_not_a_timeout(acme, conninfo):
    said = acme.append("Ben bakes bread on Sundays", role="user", actor="ben")
    with _handle(conninfo) as mem:
        outcome: dict[str, BaseException | bool] = {}

        def wait() -> None:
            try:
                outcome["value"] = mem.wait_for(said + 1000, projection="log", timeout=30)
            except BaseException as exc:
                outcome["error"] = exc

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.5)  # the call is waiting in the server
        mem._runner.conn.cancel_safe()  # what a client's Ctrl-C (or pg_cancel_backend) does
        waiter.join(timeout=30)
        error = outcome.get("error")
        assert isinstance(error, errors.CallCancelled) and not isinstance(error, errors.StatementTimeout), outcome
        assert "cancelled" in str(error)
        assert mem.append("rye this week", role="user", actor="ben") == said + 1
