"""``Memory`` and ``AsyncMemory``: one method per operation of the area modules, the same name and arguments
in both, because both inherit the one list in ``_Operations``: ``name = _operation(area.name)``. The area
function builds the call (or program); ``Memory``'s method runs it, ``AsyncMemory``'s awaits it. Nothing
else lives here, so the two drivers cannot drift apart.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable, Sequence
from types import MethodType
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, overload

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from .. import boundary, db, errors
from ..embedder import TextEmbedder
from ..names import check_tenant_name
from . import _generated
from . import admin as _admin
from . import duplicates as _duplicates
from . import graph as _graph
from . import memories as _memories
from . import recall as _recall
from . import sessions as _sessions
from ._calls import Handle, Operation
from ._run import AsyncRunner, SyncRunner
from .connections import _open_async, open_connection
from .dialectic import chat as _chat

P = ParamSpec("P")
T = TypeVar("T")

Build = Callable[Concatenate[Handle, P], Operation[T]]


def _signature_without_handle(build: Callable[..., Any]) -> inspect.Signature:
    signature = inspect.signature(build)
    return signature.replace(parameters=list(signature.parameters.values())[1:])


def _input_error(method: str, exc: BaseException) -> errors.InvalidArgument:
    """A method that trips over a caller's argument while preparing its call (``None`` or a ``str`` where a list
    of rows is expected) raises InvalidArgument naming it (pgrecall's own errors, which are ValueErrors and
    LookupErrors too, are re-raised before this)."""
    return boundary.bad_input(method, exc)


class _operation(Generic[P, T]):
    """A method of both handles: builds the operation with the handle's defaults; ``Memory`` runs it,
    ``AsyncMemory`` returns the coroutine that runs it."""

    def __init__(self, build: Build[P, T]) -> None:
        self.build = build
        self.__doc__ = build.__doc__
        self.signature = _signature_without_handle(build)
        # One function each for both handles, bound to the handle on every access (a bound method costs little
        # beside a new closure with functools.wraps per call); its signature, less the handle, is the method's.
        self._sync = _sync_function(build)
        self._async = _async_function(build)

    @overload
    def __call__(self, obj: Memory, *args: P.args, **kwargs: P.kwargs) -> T: ...
    @overload
    def __call__(self, obj: AsyncMemory, *args: P.args, **kwargs: P.kwargs) -> Awaitable[T]: ...
    def __call__(self, obj: Memory | AsyncMemory, *args: P.args, **kwargs: P.kwargs) -> T | Awaitable[T]:
        """``Memory.name(mem, ...)``, as with any method."""
        return self.__get__(obj, type(obj))(*args, **kwargs)

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> Self: ...
    @overload
    def __get__(self, obj: Memory, owner: type[Any]) -> Callable[P, T]: ...
    @overload
    def __get__(self, obj: AsyncMemory, owner: type[Any]) -> Callable[P, Awaitable[T]]: ...
    def __get__(self, obj: Memory | AsyncMemory | None,
                owner: type[Any]) -> Self | Callable[P, T] | Callable[P, Awaitable[T]]:
        if obj is None:
            return self
        return MethodType(self._async if isinstance(obj, AsyncMemory) else self._sync, obj)


def _built(build: Build[P, T], mem: Any, *args: Any, **kwargs: Any) -> Operation[T]:
    """The operation a method's arguments build; a caller's argument it trips over is InvalidArgument. Only the
    building is caught: what goes wrong while the operation runs (reading rows back, say) is raised as it is,
    so that a fault of the driver's is not reported as the caller's."""
    try:
        return build(mem, *args, **kwargs)
    except errors.PgrecallError:
        raise
    except boundary.PYTHON_INPUT_ERRORS as exc:
        raise _input_error(build.__name__, exc) from exc


def _sync_function(build: Build[P, T]) -> Callable[..., T]:
    @functools.wraps(build)
    def method(mem: Memory, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return mem._runner.run(_built(build, mem, *args, **kwargs))

    method.__signature__ = inspect.signature(build)  # type: ignore[attr-defined]
    return method


def _async_function(build: Build[P, T]) -> Callable[..., Awaitable[T]]:
    @functools.wraps(build)
    async def method(mem: AsyncMemory, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await mem._runner.run(_built(build, mem, *args, **kwargs))

    method.__signature__ = inspect.signature(build)  # type: ignore[attr-defined]
    return method


def _one_source(conn: object, pool: object, conninfo: object) -> None:
    if sum(x is not None for x in (conn, pool, conninfo)) > 1:
        raise ValueError("pass at most one of conn, pool and conninfo")


class _Operations(Handle):
    """The operations, declared once for both handles: ``Memory`` runs each, ``AsyncMemory`` awaits it."""

    # setup and the log
    schema_info = _operation(_generated.schema_info)
    add_scope = _operation(_generated.add_scope)
    list_scopes = _operation(_memories.list_scopes)
    add_peer = _operation(_generated.add_peer)
    append = _operation(_memories.append)
    append_many = _operation(_memories.append_many)
    watermark = _operation(_memories.watermark)
    # memories
    remember = _operation(_memories.remember)
    remember_many = _operation(_memories.remember_many)
    read = _operation(_memories.read)
    derive = _operation(_memories.derive)
    correct = _operation(_memories.correct)
    supersede = _operation(_memories.supersede)
    forget = _operation(_memories.forget)
    # duplicates: proposed by the database, decided by a person
    duplicate_proposals = _operation(_duplicates.duplicate_proposals)
    decide_duplicate = _operation(_generated.decide_duplicate)
    pin = _operation(_generated.pin)
    freshness = _operation(_generated.freshness)
    wait_for = _operation(_memories.wait_for)
    # recall and message search
    recall = _operation(_recall.recall)
    search_messages = _operation(_recall.search_messages)
    # the graph
    assert_fact = _operation(_graph.assert_fact)
    assert_facts = _operation(_graph.assert_facts)
    retract_fact = _operation(_generated.retract_fact)
    facts_as_of = _operation(_generated.facts_as_of)
    neighbourhood = _operation(_graph.neighbourhood)
    resolve_citation = _operation(_generated.resolve_citation)
    entities = _operation(_generated.entities)
    add_entity_alias = _operation(_generated.add_entity_alias)
    predicates = _operation(_generated.predicates)
    merge_entities = _operation(_generated.merge_entities)
    # peers, sessions, representations, the work queue
    peer_config = _operation(_generated.peer_config)
    set_peer_config = _operation(_sessions.set_peer_config)
    create_session = _operation(_generated.create_session)
    add_session_peers = _operation(_sessions.add_session_peers)
    remove_session_peers = _operation(_generated.remove_session_peers)
    session_peers = _operation(_generated.session_peers)
    session_peer_config = _operation(_generated.session_peer_config)
    set_session_peer_config = _operation(_generated.set_session_peer_config)
    add_messages = _operation(_sessions.add_messages)
    log_turn = _operation(_sessions.log_turn)
    representation = _operation(_generated.representation)
    get_representation = _operation(_generated.get_representation)
    session_bundle = _operation(_generated.session_bundle)
    chat = _operation(_chat)
    claim_tasks = _operation(_sessions.claim_tasks)
    task_remember = _operation(_sessions.task_remember)
    task_assert_fact = _operation(_sessions.task_assert_fact)
    complete_task = _operation(_sessions.complete_task)
    fail_task = _operation(_sessions.fail_task)
    queue_status = _operation(_generated.queue_status)
    work_queue_status = _operation(_sessions.work_queue_status)
    # embeddings
    embedding_status = _operation(_generated.embedding_status)
    rebuild_embeddings = _operation(_generated.rebuild_embeddings)
    set_embedding_version = _operation(_generated.set_embedding_version)
    set_scope_passage_embedding = _operation(_generated.set_scope_passage_embedding)
    # the back office
    erase = _operation(_admin.erase)
    expire = _operation(_generated.expire)
    export = _operation(_admin.export)
    refresh_erasure_statistics = _operation(_generated.refresh_erasure_statistics)
    vacuum_erased = _operation(_admin.vacuum_erased)
    rewrite_erased = _operation(_generated.rewrite_erased)
    table_statistics = _operation(_generated.table_statistics)
    erasure_requests = _operation(_generated.erasure_requests)
    settings = _operation(_admin.settings)
    setting_descriptions = _operation(_admin.setting_descriptions)
    set_setting = _operation(_admin.set_setting)
    refresh_term_stats = _operation(_generated.refresh_term_stats)
    term_stats_stale = _operation(_generated.term_stats_stale)



class Memory(_Operations):
    """A handle on one tenant, acting for a principal over a set of authorised scopes.

    ``principal`` and ``scopes`` given here are defaults; every method accepts them as keyword arguments
    too. ``conn`` or ``pool`` uses the caller's connections (and their transactions); otherwise the handle
    opens its own connection to ``conninfo`` (default: the tenant's login role of ``role`` on the embedded
    server, or the PGRECALL_*DSN settings). ``embedder`` embeds queries (default: the local model, loaded
    on first use).
    """

    def __init__(self, tenant: str, *, conn: psycopg.Connection[Any] | None = None,
                 pool: ConnectionPool[Any] | None = None, conninfo: str | None = None,
                 principal: str | None = None, scopes: Sequence[str] | None = None, role: str = "app",
                 embedder: TextEmbedder | None = None) -> None:
        check_tenant_name(tenant)
        _one_source(conn, pool, conninfo)
        super().__init__(tenant, principal, scopes, embedder)
        self._owns_conn = conn is None and pool is None
        reopen = None
        if self._owns_conn:
            conninfo = conninfo or db.tenant_conninfo(tenant, role)
            conn = open_connection(conninfo, tenant, role)
            reopen = functools.partial(open_connection, conninfo, tenant, role)
        self._runner = SyncRunner(tenant, conn=conn, pool=pool, reopen=reopen)
        try:
            self._runner.run(_memories.check_schema(self))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close the connection the handle opened (a caller's connection or pool is the caller's to close)."""
        if self._owns_conn:
            self._runner.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncMemory(_Operations):
    """:class:`Memory` over psycopg's AsyncConnection or AsyncConnectionPool: the same methods, awaited.

    Open one with ``await pgrecall.connect_async(...)`` (or ``await AsyncMemory.open(...)``); the embedding
    model (and a re-rank hook or an LLM) runs in a thread, so the event loop is not blocked.
    """

    def __init__(self, tenant: str, runner: AsyncRunner, *, owns_conn: bool, principal: str | None,
                 scopes: Sequence[str] | None, embedder: TextEmbedder | None) -> None:
        super().__init__(tenant, principal, scopes, embedder)
        self._runner = runner
        self._owns_conn = owns_conn

    @classmethod
    async def open(cls, tenant: str, *, conn: psycopg.AsyncConnection[Any] | None = None,
                   pool: AsyncConnectionPool[Any] | None = None, conninfo: str | None = None,
                   principal: str | None = None, scopes: Sequence[str] | None = None, role: str = "app",
                   embedder: TextEmbedder | None = None) -> AsyncMemory:
        check_tenant_name(tenant)
        _one_source(conn, pool, conninfo)
        owns = conn is None and pool is None
        reopen = None
        if owns:
            if conninfo is None:  # may start the embedded server: not on the event loop
                conninfo = await asyncio.to_thread(db.tenant_conninfo, tenant, role)
            conn = await _open_async(conninfo, tenant, role)
            reopen = functools.partial(_open_async, conninfo, tenant, role)
        handle = cls(tenant, AsyncRunner(tenant, conn=conn, pool=pool, reopen=reopen), owns_conn=owns,
                     principal=principal,
                     scopes=scopes, embedder=embedder)
        try:
            await handle._runner.run(_memories.check_schema(handle))
        except BaseException:
            await handle.close()
            raise
        return handle

    async def close(self) -> None:
        """Close the connection the handle opened (a caller's connection or pool is the caller's to close)."""
        if self._owns_conn:
            await self._runner.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def connect(dsn: str | None = None, *, tenant: str, principal: str | None = None,
            scopes: Sequence[str] | None = None, conn: psycopg.Connection[Any] | None = None,
            pool: ConnectionPool[Any] | None = None, role: str = "app",
            embedder: TextEmbedder | None = None) -> Memory:
    """A :class:`Memory` handle on ``tenant``.

    With ``conn`` or ``pool`` the caller's connections are used (and their
    transactions respected). Otherwise ``dsn``, else ``PGRECALL_DSN``, else the
    embedded server, where the handle logs in as the tenant's login role of
    ``role``: ``app`` (the agent's operations, the default), ``worker``
    (claiming queued work) or ``admin`` (erasure, rebuilds, settings, merges).
    ``embedder`` (any object with ``name`` and ``embed(texts)``) embeds queries;
    by default the local all-MiniLM-L6-v2.
    """
    return Memory(tenant, conn=conn, pool=pool, conninfo=dsn, principal=principal, scopes=scopes, role=role,
                  embedder=embedder)


async def connect_async(dsn: str | None = None, *, tenant: str, principal: str | None = None,
                        scopes: Sequence[str] | None = None, conn: psycopg.AsyncConnection[Any] | None = None,
                        pool: AsyncConnectionPool[Any] | None = None, role: str = "app",
                        embedder: TextEmbedder | None = None) -> AsyncMemory:
    """An :class:`AsyncMemory` handle on ``tenant``: :func:`connect`'s arguments, with psycopg's
    AsyncConnection or AsyncConnectionPool (``configure=pgrecall.configure_async`` registers pgvector's types)."""
    return await AsyncMemory.open(tenant, conn=conn, pool=pool, conninfo=dsn, principal=principal, scopes=scopes,
                                  role=role, embedder=embedder)
