"""``Memory`` and ``AsyncMemory``: one method per operation of the area modules, the same name and arguments
in both. A method is declared once per class as ``name = _sync(area.name)`` / ``_async(area.name)``: the area
function builds the call (or program), the handle's runner executes it. Nothing else lives here, so the two
drivers cannot drift apart (tests/test_driver_async.py checks both expose the same methods).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, overload

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from .. import boundary, db, errors
from ..dialectic import chat as _chat
from ..embedder import TextEmbedder
from ..names import check_tenant_name
from . import admin as _admin
from . import duplicates as _duplicates
from . import embeddings as _embeddings
from . import graph as _graph
from . import memories as _memories
from . import recall as _recall
from . import sessions as _sessions
from ._calls import Handle, Operation
from ._run import AsyncRunner, SyncRunner, configure, configure_async

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


class _sync(Generic[P, T]):
    """A ``Memory`` method: builds the operation with the handle's defaults and runs it."""

    def __init__(self, build: Build[P, T]) -> None:
        self.build = build
        self.__doc__ = build.__doc__
        self.signature = _signature_without_handle(build)

    def __call__(self, obj: Memory, *args: P.args, **kwargs: P.kwargs) -> T:
        """``Memory.name(mem, ...)``, as with any method."""
        try:
            return obj._runner.run(self.build(obj, *args, **kwargs))
        except errors.PgrecallError:
            raise
        except boundary.PYTHON_INPUT_ERRORS as exc:
            raise _input_error(self.build.__name__, exc) from exc

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> Self: ...
    @overload
    def __get__(self, obj: Memory, owner: type[Any]) -> Callable[P, T]: ...
    def __get__(self, obj: Memory | None, owner: type[Any]) -> Self | Callable[P, T]:
        if obj is None:
            return self
        build, run = self.build, obj._runner.run

        @functools.wraps(build)
        def method(*args: P.args, **kwargs: P.kwargs) -> T:
            try:
                return run(build(obj, *args, **kwargs))
            except errors.PgrecallError:
                raise
            except boundary.PYTHON_INPUT_ERRORS as exc:
                raise _input_error(build.__name__, exc) from exc

        method.__signature__ = self.signature  # type: ignore[attr-defined]
        return method


class _async(Generic[P, T]):
    """An ``AsyncMemory`` method: the same operation, awaited."""

    def __init__(self, build: Build[P, T]) -> None:
        self.build = build
        self.__doc__ = build.__doc__
        self.signature = _signature_without_handle(build)

    async def __call__(self, obj: AsyncMemory, *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await obj._runner.run(self.build(obj, *args, **kwargs))
        except errors.PgrecallError:
            raise
        except boundary.PYTHON_INPUT_ERRORS as exc:
            raise _input_error(self.build.__name__, exc) from exc

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> Self: ...
    @overload
    def __get__(self, obj: AsyncMemory, owner: type[Any]) -> Callable[P, Awaitable[T]]: ...
    def __get__(self, obj: AsyncMemory | None, owner: type[Any]) -> Self | Callable[P, Awaitable[T]]:
        if obj is None:
            return self
        build, run = self.build, obj._runner.run

        @functools.wraps(build)
        async def method(*args: P.args, **kwargs: P.kwargs) -> T:
            try:
                return await run(build(obj, *args, **kwargs))
            except errors.PgrecallError:
                raise
            except boundary.PYTHON_INPUT_ERRORS as exc:
                raise _input_error(build.__name__, exc) from exc

        method.__signature__ = self.signature  # type: ignore[attr-defined]
        return method


def _open(conninfo: str, tenant: str, role: str) -> psycopg.Connection[Any]:
    try:
        conn = psycopg.connect(conninfo, autocommit=True)
    except psycopg.OperationalError as exc:
        raise _no_role(exc, tenant, role) from exc
    try:
        configure(conn)
    except BaseException:
        conn.close()
        raise
    return conn


async def _open_async(conninfo: str, tenant: str, role: str) -> psycopg.AsyncConnection[Any]:
    try:
        conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
    except psycopg.OperationalError as exc:
        raise _no_role(exc, tenant, role) from exc
    try:
        await configure_async(conn)
    except BaseException:
        await conn.close()
        raise
    return conn


def _no_role(exc: psycopg.OperationalError, tenant: str, role: str) -> Exception:
    if f'role "{db.role_name(tenant, role)}" does not exist' in str(exc):
        return errors.TenantNotFound(f"tenant {tenant!r} does not exist on the embedded server",
                                     hint=f"Create it: pgrecall tenant create {tenant}")
    return exc


def _one_source(conn: object, pool: object, conninfo: object) -> None:
    if sum(x is not None for x in (conn, pool, conninfo)) > 1:
        raise ValueError("pass at most one of conn, pool and conninfo")


class Memory(Handle):
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
        if self._owns_conn:
            conn = _open(conninfo or db.tenant_conninfo(tenant, role), tenant, role)
        self._runner = SyncRunner(tenant, conn=conn, pool=pool)
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

    # setup and the log
    schema_info = _sync(_memories.schema_info)
    add_scope = _sync(_memories.add_scope)
    list_scopes = _sync(_memories.list_scopes)
    add_peer = _sync(_memories.add_peer)
    append = _sync(_memories.append)
    append_many = _sync(_memories.append_many)
    watermark = _sync(_memories.watermark)
    # memories
    remember = _sync(_memories.remember)
    remember_many = _sync(_memories.remember_many)
    read = _sync(_memories.read)
    derive = _sync(_memories.derive)
    correct = _sync(_memories.correct)
    supersede = _sync(_memories.supersede)
    forget = _sync(_memories.forget)
    # duplicates: proposed by the database, decided by a person
    duplicate_proposals = _sync(_duplicates.duplicate_proposals)
    decide_duplicate = _sync(_duplicates.decide_duplicate)
    pin = _sync(_memories.pin)
    freshness = _sync(_memories.freshness)
    wait_for = _sync(_memories.wait_for)
    # recall and message search
    recall = _sync(_recall.recall)
    search_messages = _sync(_recall.search_messages)
    # the graph
    assert_fact = _sync(_graph.assert_fact)
    assert_facts = _sync(_graph.assert_facts)
    retract_fact = _sync(_graph.retract_fact)
    facts_as_of = _sync(_graph.facts_as_of)
    neighbourhood = _sync(_graph.neighbourhood)
    resolve_citation = _sync(_graph.resolve_citation)
    entities = _sync(_graph.entities)
    add_entity_alias = _sync(_graph.add_entity_alias)
    predicates = _sync(_graph.predicates)
    merge_entities = _sync(_graph.merge_entities)
    # peers, sessions, representations, the work queue
    peer_config = _sync(_sessions.peer_config)
    set_peer_config = _sync(_sessions.set_peer_config)
    create_session = _sync(_sessions.create_session)
    add_session_peers = _sync(_sessions.add_session_peers)
    remove_session_peers = _sync(_sessions.remove_session_peers)
    session_peers = _sync(_sessions.session_peers)
    session_peer_config = _sync(_sessions.session_peer_config)
    set_session_peer_config = _sync(_sessions.set_session_peer_config)
    add_messages = _sync(_sessions.add_messages)
    log_turn = _sync(_sessions.log_turn)
    representation = _sync(_sessions.representation)
    get_representation = _sync(_sessions.get_representation)
    session_bundle = _sync(_sessions.session_bundle)
    chat = _sync(_chat)
    claim_tasks = _sync(_sessions.claim_tasks)
    task_remember = _sync(_sessions.task_remember)
    task_assert_fact = _sync(_sessions.task_assert_fact)
    complete_task = _sync(_sessions.complete_task)
    fail_task = _sync(_sessions.fail_task)
    queue_status = _sync(_sessions.queue_status)
    work_queue_status = _sync(_sessions.work_queue_status)
    # embeddings
    embedding_status = _sync(_embeddings.embedding_status)
    rebuild_embeddings = _sync(_embeddings.rebuild_embeddings)
    set_embedding_version = _sync(_embeddings.set_embedding_version)
    set_scope_passage_embedding = _sync(_embeddings.set_scope_passage_embedding)
    # the back office
    erase = _sync(_admin.erase)
    expire = _sync(_admin.expire)
    refresh_erasure_statistics = _sync(_admin.refresh_erasure_statistics)
    vacuum_erased = _sync(_admin.vacuum_erased)
    erasure_requests = _sync(_admin.erasure_requests)
    settings = _sync(_admin.settings)
    setting_descriptions = _sync(_admin.setting_descriptions)
    set_setting = _sync(_admin.set_setting)
    refresh_term_stats = _sync(_admin.refresh_term_stats)
    term_stats_stale = _sync(_admin.term_stats_stale)


class AsyncMemory(Handle):
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
        if owns:
            if conninfo is None:  # may start the embedded server: not on the event loop
                conninfo = await asyncio.to_thread(db.tenant_conninfo, tenant, role)
            conn = await _open_async(conninfo, tenant, role)
        handle = cls(tenant, AsyncRunner(tenant, conn=conn, pool=pool), owns_conn=owns, principal=principal,
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

    # setup and the log
    schema_info = _async(_memories.schema_info)
    add_scope = _async(_memories.add_scope)
    list_scopes = _async(_memories.list_scopes)
    add_peer = _async(_memories.add_peer)
    append = _async(_memories.append)
    append_many = _async(_memories.append_many)
    watermark = _async(_memories.watermark)
    # memories
    remember = _async(_memories.remember)
    remember_many = _async(_memories.remember_many)
    read = _async(_memories.read)
    derive = _async(_memories.derive)
    correct = _async(_memories.correct)
    supersede = _async(_memories.supersede)
    forget = _async(_memories.forget)
    # duplicates: proposed by the database, decided by a person
    duplicate_proposals = _async(_duplicates.duplicate_proposals)
    decide_duplicate = _async(_duplicates.decide_duplicate)
    pin = _async(_memories.pin)
    freshness = _async(_memories.freshness)
    wait_for = _async(_memories.wait_for)
    # recall and message search
    recall = _async(_recall.recall)
    search_messages = _async(_recall.search_messages)
    # the graph
    assert_fact = _async(_graph.assert_fact)
    assert_facts = _async(_graph.assert_facts)
    retract_fact = _async(_graph.retract_fact)
    facts_as_of = _async(_graph.facts_as_of)
    neighbourhood = _async(_graph.neighbourhood)
    resolve_citation = _async(_graph.resolve_citation)
    entities = _async(_graph.entities)
    add_entity_alias = _async(_graph.add_entity_alias)
    predicates = _async(_graph.predicates)
    merge_entities = _async(_graph.merge_entities)
    # peers, sessions, representations, the work queue
    peer_config = _async(_sessions.peer_config)
    set_peer_config = _async(_sessions.set_peer_config)
    create_session = _async(_sessions.create_session)
    add_session_peers = _async(_sessions.add_session_peers)
    remove_session_peers = _async(_sessions.remove_session_peers)
    session_peers = _async(_sessions.session_peers)
    session_peer_config = _async(_sessions.session_peer_config)
    set_session_peer_config = _async(_sessions.set_session_peer_config)
    add_messages = _async(_sessions.add_messages)
    log_turn = _async(_sessions.log_turn)
    representation = _async(_sessions.representation)
    get_representation = _async(_sessions.get_representation)
    session_bundle = _async(_sessions.session_bundle)
    chat = _async(_chat)
    claim_tasks = _async(_sessions.claim_tasks)
    task_remember = _async(_sessions.task_remember)
    task_assert_fact = _async(_sessions.task_assert_fact)
    complete_task = _async(_sessions.complete_task)
    fail_task = _async(_sessions.fail_task)
    queue_status = _async(_sessions.queue_status)
    work_queue_status = _async(_sessions.work_queue_status)
    # embeddings
    embedding_status = _async(_embeddings.embedding_status)
    rebuild_embeddings = _async(_embeddings.rebuild_embeddings)
    set_embedding_version = _async(_embeddings.set_embedding_version)
    set_scope_passage_embedding = _async(_embeddings.set_scope_passage_embedding)
    # the back office
    erase = _async(_admin.erase)
    expire = _async(_admin.expire)
    refresh_erasure_statistics = _async(_admin.refresh_erasure_statistics)
    vacuum_erased = _async(_admin.vacuum_erased)
    erasure_requests = _async(_admin.erasure_requests)
    settings = _async(_admin.settings)
    setting_descriptions = _async(_admin.setting_descriptions)
    set_setting = _async(_admin.set_setting)
    refresh_term_stats = _async(_admin.refresh_term_stats)
    term_stats_stale = _async(_admin.term_stats_stale)


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
