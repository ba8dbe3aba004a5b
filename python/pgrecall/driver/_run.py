"""The two runners: each executes a :class:`~._calls.Call` on a connection (the handle's own, or one
borrowed from the caller's pool) and drives a Program, the sync one inline and the async one with ``await``
(CPU steps in a thread). This is the only code that differs between the two drivers.
"""

from __future__ import annotations

import asyncio
import select
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any, Generic, NoReturn, TypeVar, cast

import psycopg
from pgvector.psycopg.vector import register_vector_info
from psycopg import sql
from psycopg.types import TypeInfo
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from .. import boundary, errors, retry
from . import _types
from ._calls import AskConnection, Call, ConnectionState, Offload, Operation, Program, Snapshot, Statement, Step

T = TypeVar("T")

_VECTOR_SCHEMA = ("select n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace"
                  " where e.extname = 'vector'")


def _missing_vector() -> errors.MissingPrerequisite:
    return errors.MissingPrerequisite("pgvector's vector type is not installed in this database",
                                      hint="A pgrecall database has the vector extension: install the tenant "
                                           "there (pgrecall tenant create), or connect to the database that has it.")


def configure(conn: psycopg.Connection[Any]) -> None:
    """Register pgvector's ``vector`` type (pgvector-python's adapters) on a connection, wherever the extension
    lives: pass it as ``ConnectionPool(..., configure=pgrecall.configure)``. Leaves the connection in the
    transaction state it was found in."""
    info = TypeInfo.fetch(conn, "vector")
    if info is None:  # the extension's schema is not on this role's search_path
        with conn.transaction(), conn.cursor() as cur:
            row = cur.execute(_VECTOR_SCHEMA).fetchone()
        info = TypeInfo.fetch(conn, sql.Identifier(row[0], "vector")) if row else None
    if info is None:
        raise _missing_vector()
    register_vector_info(conn, info)


async def configure_async(conn: psycopg.AsyncConnection[Any]) -> None:
    """:func:`configure` for an AsyncConnection: ``AsyncConnectionPool(..., configure=pgrecall.configure_async)``."""
    info = await TypeInfo.fetch(conn, "vector")
    if info is None:
        async with conn.transaction(), conn.cursor() as cur:
            row = await (await cur.execute(_VECTOR_SCHEMA)).fetchone()
        info = await TypeInfo.fetch(conn, sql.Identifier(row[0], "vector")) if row else None
    if info is None:
        raise _missing_vector()
    register_vector_info(conn, info)


def _registered(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    return conn.adapters.types.get("vector") is not None


_FLOAT4 = psycopg.postgres.types["float4"].oid


def _typed_columns(call: Call[Any]) -> tuple[int, ...]:
    """The positions of a call's columns of a declared composite type."""
    assert call.columns is not None
    return tuple(i for i, (_, attr) in enumerate(call.columns) if attr in call.composites)


def _stale(cursor: psycopg.Cursor[Any] | psycopg.AsyncCursor[Any], columns: tuple[int, ...],
           oids: frozenset[int]) -> bool:
    """Whether a result's typed columns are of types not registered for the tenant (a type made again since:
    they would arrive as bytes)."""
    result = cursor.pgresult
    return result is not None and any(result.ftype(i) not in oids for i in columns)


def _typed_cursor(conn: Any, call: Call[Any]) -> Any:
    """A cursor that reads a call's row in binary, its composite values through the tenant's registered types
    and its reals as in text (:class:`~._types.ShortFloat4BinaryLoader`)."""
    cursor = conn.cursor(row_factory=call.row_factory, binary=True)
    cursor.adapters.register_loader(_FLOAT4, _types.ShortFloat4BinaryLoader)
    return cursor


def _state(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> ConnectionState:
    return ConnectionState(conn.autocommit, conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE,
                           conn.info.server_version)


def _raise(exc: psycopg.Error, where: str = "statement", args: Mapping[str, Any] | None = None) -> NoReturn:
    """The pgrecall exception of a failed statement (chaining it): the server's own, or the one a value's type
    or size caused (boundary.call_error); a failure that is not the caller's input, as it is."""
    translated = boundary.call_error(where, exc, args)
    if translated is exc:
        raise exc
    raise translated from exc


def _idle(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """Open and outside a transaction: where a connection's characteristics may be set."""
    return not conn.closed and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def _wraps_in_a_block(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """Whether a connection borrowed from a pool would run a call in a transaction block of its own: not in
    autocommit, idle, and with no transaction characteristic set (read only, isolation, deferrable), which
    only a block carries. Such a call runs in autocommit instead: the same one statement, committed the
    same, and Citus delegates a function call only outside a block (docs/scale-out.md)."""
    return (not conn.autocommit and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            and conn.read_only is None and conn.isolation_level is None and conn.deferrable is None)


def _closed_by_server(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """Whether the server closed this connection while it sat idle between calls (a restart, a failover, an
    administrator ending the session, an idle timeout): its last words, and the end of the stream, wait on the
    socket. A healthy idle connection of the driver's has nothing to read (it never LISTENs). Only called with
    the connection's lock held and outside a transaction: nothing of a call is on the wire."""
    if conn.closed or conn.broken:
        return True
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        return False
    wait = 0.0
    try:
        # libpq reads what is there: the farewell (an error while idle is taken as a notice), then, on the
        # next read, the end of the stream, which marks the connection bad. Once something was read, the end
        # is waited for a moment: the backend leaves pg_stat_activity before it closes the socket, and under
        # load the next call found the farewell consumed and the stream still open (AdminShutdown).
        for _ in range(4):
            readable, _, _ = select.select([conn.pgconn.socket], [], [], wait)
            if not readable or conn.pgconn.status == psycopg.pq.ConnStatus.BAD:
                break
            conn.pgconn.consume_input()
            wait = 0.1
    except (OSError, ValueError, psycopg.OperationalError):
        return True
    return conn.pgconn.status == psycopg.pq.ConnStatus.BAD


def _raise_unreachable(exc: psycopg.OperationalError) -> NoReturn:
    raise errors.ConnectionLost(
        f"the server closed this handle's connection and a new one could not be opened: {exc}",
        hint="Start the server again (pgrecall server start), or check PGRECALL_DSN; the next call tries "
             "again.") from exc


@dataclass(frozen=True)
class _Returned:
    value: Any


def _resume(program: Program[Any], sent: Any, failed: Exception | None) -> Step | _Returned:
    """The program's next step, given what its last step returned or raised (thrown into the program, which
    may catch it; if it does not, it propagates from here); _Returned with its result once it is done."""
    try:
        return program.throw(failed) if failed is not None else program.send(sent)
    except StopIteration as done:
        return _Returned(done.value)


def _start(program: Program[Any]) -> Step | _Returned:
    """The program's first step. What it does up to there is building its first call from the caller's
    arguments: a value it trips over is the caller's (InvalidArgument, naming the method); a fault in a later
    step, once calls are running (reading rows back, say), is raised as it is."""
    try:
        return _resume(program, None, None)
    except errors.PgrecallError:
        raise
    except boundary.PYTHON_INPUT_ERRORS as exc:
        raise boundary.bad_input(getattr(program, "__name__", "operation"), exc) from exc


def _offloaded(fn: Callable[[], Any], where: str) -> Any:
    """An Offload step: the embedding model, a re-rank hook or an LLM, run on the caller's values (a query, the
    texts to remember) or the caller's own callable. A value of theirs it trips over (a dict where a text goes) is
    the caller's: InvalidArgument, as when the call is built. Reading rows back is not an Offload step."""
    try:
        return fn()
    except errors.PgrecallError:
        raise
    except boundary.PYTHON_INPUT_ERRORS as exc:
        raise boundary.bad_input(where, exc) from exc


Conn = TypeVar("Conn")
Pool = TypeVar("Pool")

# A snapshot's transaction is begun as REPEATABLE READ, READ ONLY in its BEGIN (one round trip, where BEGIN and
# then SET TRANSACTION took two): psycopg writes the connection's characteristics into the BEGIN it sends, so they
# are set on the connection just before and given back as they were when the snapshot ends.
_SNAPSHOT_ISOLATION = psycopg.IsolationLevel.REPEATABLE_READ


class _Pin:
    """The one snapshot a running program reads (Snapshot steps): the connection it holds, the pool's borrowing
    to give back, and the transaction to end. One per run, so that threads sharing a handle never share it."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.borrowed: Any = None  # the pool's connection context, exited when the snapshot ends
        self.transaction: Any = None  # None: the caller's own transaction block is the snapshot
        self.characteristics: tuple[Any, Any] | None = None  # the connection's (isolation level, read only) before

    def begun(self, current: Snapshot) -> bool:
        if current.begin and self.conn is not None:
            raise RuntimeError("a program began a snapshot inside its snapshot")
        return current.begin


class _Runner(Generic[Conn, Pool]):
    """The tenant, and either the one connection every Call runs on or the pool each Call borrows one from.
    ``reopen`` (a handle's own connection only: never a caller's, whose session state is theirs) opens a new
    connection like the first, used when the server has closed the one held (_revive)."""

    def __init__(self, tenant: str, *, conn: Conn | None = None, pool: Pool | None = None,
                 reopen: Callable[[], Any] | None = None) -> None:
        if (conn is None) == (pool is None):
            raise ValueError("a runner needs a connection or a pool")
        self.tenant = tenant
        self.conn = conn
        self.pool = pool
        self.reopen = reopen
        self._reviving = threading.Lock()  # threads sharing a handle replace its connection once


class SyncRunner(_Runner[psycopg.Connection[Any], ConnectionPool[Any]]):
    """Runs Calls on one connection, or on a connection borrowed from a pool for each Call."""

    @contextmanager
    def _borrowed(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection of the pool's that the server has not closed while it waited in the pool: one that
        was (a server restart closes them all) is given back unused, and the pool, seeing it broken, drops
        it and opens another."""
        assert self.pool is not None
        for _ in range(self.pool.max_size):
            with self.pool.connection() as conn:
                with conn.lock:
                    closed = _closed_by_server(conn)
                if not closed:
                    yield conn
                    return
        with self.pool.connection() as conn:  # the last try: whatever the pool lends is used
            yield conn

    @contextmanager
    def _connection(self, pin: _Pin | None = None) -> Iterator[psycopg.Connection[Any]]:
        if pin is not None and pin.conn is not None:
            yield pin.conn
        elif self.pool is not None:
            with self._borrowed() as conn:
                yield conn
        else:
            assert self.conn is not None
            yield self.conn

    def _snapshot(self, current: Snapshot, pin: _Pin) -> None:
        if pin.begun(current):
            if self.pool is not None:
                pin.borrowed = self._borrowed()
                pin.conn = pin.borrowed.__enter__()
            else:
                pin.conn = self.conn
            if pin.conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                pin.characteristics = (pin.conn.isolation_level, pin.conn.read_only)
                pin.conn.isolation_level = _SNAPSHOT_ISOLATION
                pin.conn.read_only = True
                pin.transaction = pin.conn.transaction()
                pin.transaction.__enter__()  # BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY
        else:
            self._release(pin, None)

    @staticmethod
    def _release(pin: _Pin, failed: BaseException | None) -> None:
        """End the snapshot: its transaction (read only: committed, or rolled back on a failure) and the pool's
        connection. Idempotent."""
        conn, transaction, borrowed, characteristics = pin.conn, pin.transaction, pin.borrowed, pin.characteristics
        pin.conn = pin.transaction = pin.borrowed = pin.characteristics = None
        try:
            if transaction is not None:
                transaction.__exit__(type(failed) if failed else None, failed, None)
        finally:
            try:
                if characteristics is not None and _idle(conn):
                    conn.isolation_level, conn.read_only = characteristics
            finally:
                if borrowed is not None:
                    borrowed.__exit__(type(failed) if failed else None, failed, None)

    def execute(self, call: Call[T], pin: _Pin | None = None) -> T:
        query, params, vectors = call.bound(self.tenant)
        boundary.check_arguments(call.function, params)
        conn = pin.conn if pin is not None and pin.conn is not None else self.conn
        try:
            if conn is not None:  # the handle's connection, or the snapshot's: no context to enter
                found = self._fetch(conn, call, query, params, vectors)
            else:
                assert self.pool is not None
                with self._borrowed() as conn:
                    found = self._fetch(conn, call, query, params, vectors)
        except psycopg.Error as exc:
            _raise(exc, call.function, params)
        return call.collect(found)

    def _fetch(self, conn: psycopg.Connection[Any], call: Call[Any], query: str, params: dict[str, Any],
               vectors: bool) -> list[Any]:
        if vectors and not _registered(conn):
            configure(conn)  # the caller's connection or pool did not register pgvector's types
        own_block = self.pool is not None and _wraps_in_a_block(conn)
        if own_block:
            conn.autocommit = True
        try:
            for pause_s in (*retry.CALL_PAUSES_S, None):
                try:
                    if call.composites:
                        return self._fetch_typed(conn, call, query, params)
                    with conn.cursor(row_factory=call.row_factory) as cur:
                        cur.execute(query, params)
                        return cur.fetchall()
                except psycopg.Error as exc:  # a deadlock's loser, a statement of its own: run it again
                    if pause_s is None or not retry.may_run_again(exc, conn):
                        raise
                    time.sleep(retry.jittered(pause_s))
            raise AssertionError("unreachable: the last attempt returns or raises")
        finally:
            if own_block and not (conn.closed or conn.broken):
                conn.autocommit = False  # the pool's connection as it was lent

    def _fetch_typed(self, conn: psycopg.Connection[Any], call: Call[Any], query: str,
                     params: dict[str, Any]) -> list[Any]:
        """The rows of a call with columns of the tenant's declared types, registered on the connection first
        (once); a type altered or made again since it was registered: registered again and the statement run
        again (the driver reads such results only from functions that read)."""
        columns = _typed_columns(call)
        for last in (False, True):
            oids = _types.ensure(conn, self.tenant)
            with _typed_cursor(conn, call) as cur:
                cur.execute(query, params)
                try:
                    if _stale(cur, columns, oids):
                        raise _types.StaleTypes(f"a type of {call.function}()'s result was made again")
                    return cast(list[Any], cur.fetchall())
                except _types.StaleTypes:
                    if last:
                        raise
                    _types.forget(conn, self.tenant)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def execute_statement(self, statement: Statement[T], pin: _Pin | None = None) -> T:
        found: list[Any] = []
        try:
            with self._connection(pin) as conn:
                if statement.row_factory is None:
                    conn.execute(statement.query, statement.params)
                else:
                    with conn.cursor(row_factory=statement.row_factory) as cur:
                        found = cur.execute(statement.query, statement.params).fetchall()
        except psycopg.Error as exc:
            _raise(exc)
        return statement.collect(found)

    def _step(self, current: Step, where: str, pin: _Pin) -> Any:
        if isinstance(current, Offload):
            return _offloaded(current.fn, where)
        if isinstance(current, Snapshot):
            return self._snapshot(current, pin)
        if isinstance(current, Statement):
            return self.execute_statement(current, pin)
        if isinstance(current, AskConnection):
            with self._connection(pin) as conn:
                return _state(conn)
        return self.execute(current, pin)

    def _revive(self) -> None:
        """Before an operation: the handle's own connection, if the server closed it since the last one, is
        replaced by a new one. Nothing was sent on the closed one, so nothing runs twice; a connection that
        breaks during a call is not replaced here but reported (ConnectionLost), and replaced before the next."""
        conn = self.conn
        if self.reopen is None or conn is None:
            return
        with self._reviving:
            if conn is not self.conn:
                return  # another thread replaced it
            with conn.lock:
                closed = _closed_by_server(conn)
            if closed:
                try:
                    self.conn = self.reopen()
                except psycopg.OperationalError as exc:
                    _raise_unreachable(exc)
        if closed:
            conn.close()

    def run(self, op: Operation[T]) -> T:
        self._revive()
        if isinstance(op, Call):
            return self.execute(op)
        pin = _Pin()
        try:
            current = _start(op)
            where = getattr(op, "__name__", "operation")
            while not isinstance(current, _Returned):
                outcome: tuple[Any, Exception | None]
                try:
                    outcome = (self._step(current, where, pin), None)
                except Exception as exc:  # handed to the program, which may catch it (or it propagates from _resume)
                    outcome = (None, exc)
                current = _resume(op, *outcome)
            return current.value  # type: ignore[no-any-return]
        except BaseException as exc:
            self._release(pin, exc)  # a program that stopped inside its snapshot
            raise
        finally:
            self._release(pin, None)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


class AsyncRunner(_Runner[psycopg.AsyncConnection[Any], AsyncConnectionPool[Any]]):
    """The async runner: the same Calls on an AsyncConnection or an AsyncConnectionPool; Offload steps (the
    embedding model, re-rank hooks, LLMs) run in a thread so the event loop keeps serving."""

    @asynccontextmanager
    async def _borrowed(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """The sync runner's _borrowed: a pool's connection the server closed while it waited is given back
        unused (and dropped by the pool)."""
        assert self.pool is not None
        for _ in range(self.pool.max_size):
            async with self.pool.connection() as conn:
                async with conn.lock:
                    closed = _closed_by_server(conn)
                if not closed:
                    yield conn
                    return
        async with self.pool.connection() as conn:
            yield conn

    @asynccontextmanager
    async def _connection(self, pin: _Pin | None = None) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        if pin is not None and pin.conn is not None:
            yield pin.conn
        elif self.pool is not None:
            async with self._borrowed() as conn:
                yield conn
        else:
            assert self.conn is not None
            yield self.conn

    async def _snapshot(self, current: Snapshot, pin: _Pin) -> None:
        if pin.begun(current):
            if self.pool is not None:
                pin.borrowed = self._borrowed()
                pin.conn = await pin.borrowed.__aenter__()
            else:
                pin.conn = self.conn
            if pin.conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                pin.characteristics = (pin.conn.isolation_level, pin.conn.read_only)
                await pin.conn.set_isolation_level(_SNAPSHOT_ISOLATION)
                await pin.conn.set_read_only(True)
                pin.transaction = pin.conn.transaction()
                await pin.transaction.__aenter__()  # BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY
        else:
            await self._release(pin, None)

    @staticmethod
    async def _release(pin: _Pin, failed: BaseException | None) -> None:
        conn, transaction, borrowed, characteristics = pin.conn, pin.transaction, pin.borrowed, pin.characteristics
        pin.conn = pin.transaction = pin.borrowed = pin.characteristics = None
        try:
            if transaction is not None:
                await transaction.__aexit__(type(failed) if failed else None, failed, None)
        finally:
            try:
                if characteristics is not None and _idle(conn):
                    await conn.set_isolation_level(characteristics[0])
                    await conn.set_read_only(characteristics[1])
            finally:
                if borrowed is not None:
                    await borrowed.__aexit__(type(failed) if failed else None, failed, None)

    async def execute(self, call: Call[T], pin: _Pin | None = None) -> T:
        query, params, vectors = call.bound(self.tenant)
        boundary.check_arguments(call.function, params)
        conn = pin.conn if pin is not None and pin.conn is not None else self.conn
        try:
            if conn is not None:
                found = await self._fetch(conn, call, query, params, vectors)
            else:
                assert self.pool is not None
                async with self._borrowed() as conn:
                    found = await self._fetch(conn, call, query, params, vectors)
        except psycopg.Error as exc:
            _raise(exc, call.function, params)
        return call.collect(found)

    async def _fetch(self, conn: psycopg.AsyncConnection[Any], call: Call[Any], query: str, params: dict[str, Any],
                     vectors: bool) -> list[Any]:
        if vectors and not _registered(conn):
            await configure_async(conn)
        own_block = self.pool is not None and _wraps_in_a_block(conn)
        if own_block:
            await conn.set_autocommit(True)
        try:
            for pause_s in (*retry.CALL_PAUSES_S, None):
                try:
                    if call.composites:
                        return await self._fetch_typed(conn, call, query, params)
                    async with conn.cursor(row_factory=call.row_factory) as cur:
                        await cur.execute(query, params)
                        return await cur.fetchall()
                except psycopg.Error as exc:  # as the sync runner: a deadlock's loser runs again
                    if pause_s is None or not retry.may_run_again(exc, conn):
                        raise
                    await asyncio.sleep(retry.jittered(pause_s))
            raise AssertionError("unreachable: the last attempt returns or raises")
        finally:
            if own_block and not (conn.closed or conn.broken):
                await conn.set_autocommit(False)  # the pool's connection as it was lent

    async def _fetch_typed(self, conn: psycopg.AsyncConnection[Any], call: Call[Any], query: str,
                           params: dict[str, Any]) -> list[Any]:
        """The sync runner's _fetch_typed."""
        columns = _typed_columns(call)
        for last in (False, True):
            oids = await _types.ensure_async(conn, self.tenant)
            async with _typed_cursor(conn, call) as cur:
                await cur.execute(query, params)
                try:
                    if _stale(cur, columns, oids):
                        raise _types.StaleTypes(f"a type of {call.function}()'s result was made again")
                    return cast(list[Any], await cur.fetchall())
                except _types.StaleTypes:
                    if last:
                        raise
                    _types.forget(conn, self.tenant)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def execute_statement(self, statement: Statement[T], pin: _Pin | None = None) -> T:
        found: list[Any] = []
        try:
            async with self._connection(pin) as conn:
                if statement.row_factory is None:
                    await conn.execute(statement.query, statement.params)
                else:
                    async with conn.cursor(row_factory=statement.row_factory) as cur:
                        found = await (await cur.execute(statement.query, statement.params)).fetchall()
        except psycopg.Error as exc:
            _raise(exc)
        return statement.collect(found)

    async def _step(self, current: Step, where: str, pin: _Pin) -> Any:
        if isinstance(current, Offload):
            return await asyncio.to_thread(_offloaded, current.fn, where)
        if isinstance(current, Snapshot):
            return await self._snapshot(current, pin)
        if isinstance(current, Statement):
            return await self.execute_statement(current, pin)
        if isinstance(current, AskConnection):
            async with self._connection(pin) as conn:
                return _state(conn)
        return await self.execute(current, pin)

    async def _revive(self) -> None:
        """The sync runner's _revive: a handle's own connection the server closed is replaced before an
        operation (one task at a time, under the connection's lock)."""
        conn = self.conn
        if self.reopen is None or conn is None:
            return
        async with conn.lock:
            if conn is not self.conn or not _closed_by_server(conn):
                return
            try:
                self.conn = await self.reopen()
            except psycopg.OperationalError as exc:
                _raise_unreachable(exc)
        await conn.close()

    async def run(self, op: Operation[T]) -> T:
        await self._revive()
        if isinstance(op, Call):
            return await self.execute(op)
        pin = _Pin()
        try:
            current = _start(op)
            where = getattr(op, "__name__", "operation")
            while not isinstance(current, _Returned):
                outcome: tuple[Any, Exception | None]
                try:
                    outcome = (await self._step(current, where, pin), None)
                except Exception as exc:
                    outcome = (None, exc)
                current = _resume(op, *outcome)
            return current.value  # type: ignore[no-any-return]
        except BaseException as exc:
            await self._release(pin, exc)
            raise
        finally:
            await self._release(pin, None)

    async def close(self) -> None:
        if self.conn is not None:
            await self.conn.close()
