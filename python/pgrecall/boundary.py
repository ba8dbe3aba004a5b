"""The driver's boundary: a caller's mistake ends as a pgrecall error, never as whatever Python, psycopg or
the server happened to raise on the way.

Three nets, from the cheapest:

- ``check_arguments``: before a statement is sent, every argument is a value PostgreSQL can take: an integer
  within 64 bits (2**63 would reach the server as ``numeric`` and match no function: 42883), a text without
  NUL (PostgreSQL text cannot hold U+0000), JSON that is JSON (no sets, bytes, NaN or infinity).
- ``call_error``: what still fails in psycopg or the server because of a value's type or size: psycopg cannot
  adapt it (a set, a dict where a text is expected), the server finds no function for the argument types
  (42883: a float where an id is expected, a number too large for an ``integer`` parameter), or a cast
  refuses it (class 22). The server's own pgrecall errors (class PR) are translated as always.
- ``bad_input``: a method that trips over an argument while preparing its call (``None`` or a ``str`` where
  a list of rows is expected, a ``nan`` timeout) raises ``InvalidArgument`` naming the method and the problem,
  with Python's exception chained for the traceback.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, TypeVar

import psycopg
from psycopg.types.json import Json, Jsonb

from . import errors, retry

BIGINT_MAX = 2**63 - 1
INTEGER_MAX = 2**31 - 1
E = TypeVar("E", bound=errors.PgrecallError)

# What Python raises when a value has the wrong type or shape for what a method does with it.
PYTHON_INPUT_ERRORS = (TypeError, AttributeError, ValueError, OverflowError, KeyError, IndexError, UnicodeError)


# Values PostgreSQL takes as they are: not looked at (every call's arguments are checked, a recall's eleven).
_TAKEN_AS_THEY_ARE = frozenset({type(None), bool, float})


def check_arguments(where: str, args: Mapping[str, Any]) -> None:
    """OutOfRange or InvalidArgument for the first argument PostgreSQL could not take as it is."""
    for name, value in args.items():
        kind = type(value)
        if kind is str:  # the commonest, checked here
            if "\x00" in value:
                _check_value(where, name, value)
        elif kind not in _TAKEN_AS_THEY_ARE:
            _check_value(where, name, value)


def _check_value(where: str, name: str, value: Any) -> None:
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, int):
        if not -BIGINT_MAX - 1 <= value <= BIGINT_MAX:
            raise errors.OutOfRange(f"{where}: {name} {value} does not fit in 64 bits",
                                    hint="Ids, offsets and counts are integers from -2**63 to 2**63 - 1.")
    elif isinstance(value, str):
        if "\x00" in value:
            raise errors.InvalidArgument(f"{where}: {name} contains a NUL character (U+0000)",
                                         hint="PostgreSQL text cannot hold U+0000: remove or replace it.")
    elif isinstance(value, (Jsonb, Json)):
        _check_json(where, name, value.obj)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _check_value(where, name, item)


def _check_json(where: str, name: str, value: Any) -> None:
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise errors.InvalidArgument(f"{where}: {name} is not JSON: {exc}",
                                     hint="Pass dicts, lists, strings, finite numbers, booleans and None; "
                                          "a set or bytes has no JSON form, and JSON has no NaN or infinity.") from exc
    if "\\u0000" in text:
        raise errors.InvalidArgument(f"{where}: {name} holds a text with a NUL character (U+0000)",
                                     hint="PostgreSQL's jsonb cannot hold U+0000: remove or replace it.")


def call_error(where: str, exc: psycopg.Error, args: Mapping[str, Any] | None = None) -> Exception:
    """The pgrecall error for a failed call: the server's own (class PR, 42501), the one a value's type or size
    caused, a lost race, an unreachable Citus node or a lost connection; anything else comes back unchanged."""
    translated = errors.translate(exc)
    if translated is not exc:
        return translated
    state = exc.sqlstate
    if state in retry.LOST_A_RACE:
        return _chained(errors.LostRace(f"{where}: {exc.diag.message_primary or exc}",
                                        hint="The transaction was rolled back whole: run it again."), exc)
    node = _unreachable_node(exc)
    if node is not None:
        return _chained(errors.NodeUnavailable(
            f"{where}: the Citus node {node} that holds this tenant cannot be reached", node=node,
            hint="Its tenants answer again once it is back, or once its standby is promoted and named to the "
                 "coordinator (citus_update_node); tenants on other nodes are not affected."), exc)
    if state == "57014":  # query_canceled: by the session's statement_timeout, or a cancel request
        said = exc.diag.message_primary or str(exc)
        applied = "Nothing of a call of its own was applied (inside your transaction, roll it back). "
        if "statement timeout" in said:
            return _chained(errors.StatementTimeout(
                f"{where}: the call ran past the session's statement_timeout and was stopped ({said})",
                hint=applied + "Raise statement_timeout for the role or the session, or ask for less (a smaller "
                               "limit or batch)."), exc)
        return _chained(errors.CallCancelled(f"{where}: the call was cancelled before it finished ({said})",
                                             hint=applied + "Run it again if it was not meant to be stopped."), exc)
    if state == "55P03":  # lock_not_available: waited past the session's lock_timeout
        return _chained(errors.LockTimeout(
            f"{where}: waited past the session's lock_timeout for a lock another transaction holds",
            hint="Nothing of a call of its own was applied (inside your transaction, roll it back). Run it again "
                 "once the other transaction is done, or raise lock_timeout."), exc)
    if isinstance(exc, psycopg.OperationalError) and (state is None or state.startswith(_CONNECTION_GONE)):
        return _chained(errors.ConnectionLost(
            f"{where}: the connection to the server was lost: {exc.diag.message_primary or exc}",
            hint="The server restarted, failed over or ended the session. A handle with its own connection "
                 "reconnects for its next call. A read can be run again; a write may or may not have been "
                 "applied: read before repeating it."), exc)
    if state is None and isinstance(exc, (psycopg.ProgrammingError, psycopg.DataError)):
        # psycopg refused to send a value (cannot adapt it, or a NUL in a text)
        return _chained(errors.InvalidArgument(f"{where}: an argument cannot be sent to PostgreSQL: {exc}",
                                               hint="Pass values of the types the method documents."), exc)
    if state == "42883":
        too_big = [n for n, v in (args or {}).items()
                   if isinstance(v, int) and not isinstance(v, bool) and not -INTEGER_MAX - 1 <= v <= INTEGER_MAX]
        if too_big:
            return _chained(errors.OutOfRange(f"{where}: {', '.join(too_big)} is too large for its parameter",
                                              hint="Limits, timeouts and versions are 32-bit integers."), exc)
        return _chained(errors.InvalidArgument(
            f"{where}: an argument has the wrong type (no function takes these argument types)",
            hint="Pass values of the types the method documents: ids as int, texts as str, lists as list."), exc)
    if state and state.startswith("22"):
        cls = {"22003": errors.OutOfRange, "22007": errors.InvalidTime, "22008": errors.InvalidTime}.get(
            state, errors.InvalidArgument)
        return _chained(cls(f"{where}: {exc.diag.message_primary or exc}", hint=exc.diag.message_hint), exc)
    return exc


# The SQLSTATEs of a connection the server closed: class 08 (connection exception) and 57P01-57P05 (the
# server shutting down, crashed, not accepting connections, the session ended for being idle or by an
# administrator); none at all when psycopg found the connection already broken.
_CONNECTION_GONE = ("08", "57P")


# How Citus names a worker it could not reach from the coordinator: "connection to the remote node
# postgres@127.0.0.1:9701 failed with the following error: ...", "connection error: 127.0.0.1:9701"; and a
# worker that went away during a call: "server closed the connection unexpectedly", the node in the context
# ("while executing command on 127.0.0.1:9701").
_REMOTE_NODE = re.compile(r"(?:connection to the remote node (?:[^@\s]+@)?|connection error: )([\w.\-\[\]:]+:\d+)")
_LOST_DURING = ("server closed the connection unexpectedly", "connection not open", "could not receive data",
                "could not send data", "connection to server was lost")
_EXECUTING_ON = re.compile(r"while executing command on ([\w.\-\[\]:]+:\d+)")


def _unreachable_node(exc: psycopg.Error) -> str | None:
    """host:port of the Citus worker a failed statement could not reach, if that is why it failed."""
    if not (exc.sqlstate or "").startswith(("08", "XX")):
        return None
    primary = exc.diag.message_primary or str(exc)
    found = _REMOTE_NODE.search(primary)
    if found is None and any(said in primary for said in _LOST_DURING):
        found = _EXECUTING_ON.search(exc.diag.context or "")
    return found.group(1) if found else None


def bad_input(where: str, exc: BaseException) -> errors.InvalidArgument:
    """InvalidArgument for a Python error raised while a method prepared its call from the caller's arguments."""
    return _chained(errors.InvalidArgument(f"{where}: invalid argument: {type(exc).__name__}: {exc}",
                                           hint="See the method's documentation for the types it takes."), exc)


def finite_seconds(where: str, name: str, seconds: Any, *, most: float) -> float:
    """A duration in seconds from 0 to ``most``; OutOfRange for NaN, infinity, a negative or a larger one."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise errors.InvalidArgument(f"{where}: {name} must be a number of seconds, not {seconds!r}")
    if not (math.isfinite(seconds) and 0 <= seconds <= most):
        raise errors.OutOfRange(f"{where}: {name} must be 0 to {most:g} seconds, not {seconds!r}",
                                hint="Wait in a loop of shorter calls for longer.")
    return float(seconds)


def _chained(err: E, cause: BaseException) -> E:
    err.__cause__ = cause
    return err
