"""LangGraph's ``BaseStore`` on pgrecall: ``PgrecallStore``, for LangGraph agents and LangMem's memory tools.

``pip install 'pgrecall[langgraph]'``. A store is bound to a driver handle's tenant and principal (the
``Memory`` it is given, or the one ``PgrecallStore.connect(...)`` opens), to one scope of the principal's
authorised set (the handle's first unless ``scope=`` names another) and to one purpose: every read answers
only what the principal may use for it, and every put gives the item the store's purposes (``[purpose]``
unless ``purposes=`` says more).

How LangGraph's words map onto pgrecall's (the SQL is ``store_*`` in plpgsql/integrations/store.sql, migration 0037):

- an **item** is a memory of the scope. Its **value** (a dict) is kept whole, as jsonb, beside the text that
  recall ranks and the worker embeds: the value's string leaves, one a line (its JSON text if it has none).
- the **namespace** and **key** are the memory's stable name. The database keeps one live item per
  (scope, audience, namespace, key): a ``put`` of an existing key is a revision of that memory (revision + 1,
  the old value kept in its history), never a second memory; an unchanged value writes nothing.
- the **audience** is the store's: the principal's own items (the default), or with ``shared=True`` the whole
  scope's, which every principal of the scope reads and writes under the same keys. Another principal's
  private items answer as nothing, exactly as missing ones: ``get`` returns None, ``search`` and
  ``list_namespaces`` leave them out, and a put of the same key makes the principal's own item.
- ``delete`` (or a put of None) **forgets** the memory: it stays as history, out of every read, and its key is
  free again.
- ``search`` without a query returns the items under the namespace prefix that meet the ``filter``, most
  recently changed first (as LangGraph's ``PostgresStore``); with a ``query`` it is pgrecall's **hybrid recall**
  over the principal's memories of the scope (BM25 and the dense arm fused, the permission walk applied), the
  store's items kept in recall's order, with recall's score. The query is embedded by the handle's embedder;
  items are found by their words at once and by their meaning once the embedding worker has embedded them.
- ``filter`` is LangGraph's: equality on fields (nested objects and arrays compared whole), or the operators
  ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``; the database evaluates it.
- every put is also written to the log, as a note of the principal's seen by the item's audience, and the item
  cites it: erasing any write of an item erases the item and its history.

Not supported: TTLs (``supports_ttl`` is False) and per-put ``index`` fields (every item is indexed by its
text). Bad input is refused by the database with pgrecall's error classes, nothing stored: a namespace that is
not a tuple of 1 to 16 non-empty strings without a dot (``pgrecall.errors.InvalidNamespace``, PR160, raised as
``LangGraphInvalidNamespace``, which is LangGraph's ``InvalidNamespaceError`` too), a value that is not a JSON
object (``ValueNotObject``, PR161), a key over 1024 bytes or a value whose text is over the tenant's
``max_memory_bytes`` (``TextTooLong``, PR151). ``abatch`` runs ``batch``
in a thread: the handle's connection is psycopg's, which serialises its users.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from langgraph.store.base import (
    NOT_PROVIDED,
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    NotProvided,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)
from psycopg.types.json import Jsonb

from .. import errors
from ..driver import Memory
from ..embedder import ModelUnavailable

__all__ = ["LangGraphInvalidNamespace", "PgrecallStore"]


class LangGraphInvalidNamespace(errors.InvalidNamespace, InvalidNamespaceError):
    """PR160 as the store raises it: pgrecall's ``InvalidNamespace`` and LangGraph's ``InvalidNamespaceError``."""


def _labels(namespace: object) -> list[str]:
    """A namespace as the SQL takes it. Only what cannot be sent is refused here (not a tuple of strings, a NUL
    byte, which no PostgreSQL text holds); the database checks the rest."""
    if not isinstance(namespace, tuple) or not all(isinstance(label, str) for label in namespace):
        raise LangGraphInvalidNamespace(f"a namespace is a tuple of strings, not {namespace!r}"[:500],
                               hint='e.g. ("memories", "ana")')
    if any("\x00" in label for label in namespace):
        raise LangGraphInvalidNamespace("a namespace label may not contain a NUL byte")
    return list(namespace)


class PgrecallStore(BaseStore):
    """LangGraph's ``BaseStore`` on one pgrecall principal, scope and purpose (the module says how it maps)."""

    supports_ttl = False

    def __init__(self, memory: Memory, *, scope: str | None = None, purpose: str = "converse",
                 purposes: Sequence[str] | None = None, shared: bool = False,
                 source_role: Literal["user", "assistant", "system", "tool", "document"] = "assistant") -> None:
        self.memory = memory
        # store_get, store_put, ... are methods generated from the catalog (driver/_generated.py), which a type
        # checker does not see on Memory
        self._sql: Any = memory
        principal, scopes = memory.who(None, None)
        self.principal, self.scopes = principal, scopes
        self.scope = scope if scope is not None else scopes[0]
        self.purpose = purpose
        self.purposes = list(purposes) if purposes is not None else [purpose]
        self.shared = shared
        self.source_role = source_role

    @classmethod
    def connect(cls, dsn: str | None = None, *, tenant: str, principal: str, scopes: Sequence[str],
                scope: str | None = None, purpose: str = "converse", purposes: Sequence[str] | None = None,
                shared: bool = False) -> PgrecallStore:
        """A store on a new handle (``pgrecall.connect``'s arguments); ``close()`` closes it."""
        from .. import connect

        return cls(connect(dsn, tenant=tenant, principal=principal, scopes=scopes), scope=scope, purpose=purpose,
                   purposes=purposes, shared=shared)

    def close(self) -> None:
        self.memory.close()

    # -- BaseStore ---------------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._run(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    def put(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any],
            index: Literal[False] | list[str] | None = None, *, ttl: float | NotProvided | None = NOT_PROVIDED) -> None:
        # BaseStore.put checks the namespace in Python first; here the database does, so a bad one is
        # refused with its PR code like every other bad input.
        self._no_ttl(ttl)
        self.batch([PutOp(namespace, str(key), value, index=index)])

    async def aput(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any],
                   index: Literal[False] | list[str] | None = None, *,
                   ttl: float | NotProvided | None = NOT_PROVIDED) -> None:
        self._no_ttl(ttl)
        await self.abatch([PutOp(namespace, str(key), value, index=index)])

    def _no_ttl(self, ttl: float | NotProvided | None) -> None:
        if ttl is not NOT_PROVIDED and ttl is not None:
            raise NotImplementedError("PgrecallStore keeps items until they are deleted: ttl must be None")

    # -- one operation, one stored function --------------------------------------------------------------

    def _run(self, op: Op) -> Result:
        try:
            if isinstance(op, GetOp):
                return self._get(op)
            if isinstance(op, PutOp):
                self._put(op)
                return None
            if isinstance(op, SearchOp):
                return self._search(op)
            if isinstance(op, ListNamespacesOp):
                return self._list_namespaces(op)
        except errors.InvalidNamespace as exc:
            if isinstance(exc, LangGraphInvalidNamespace):
                raise
            raise LangGraphInvalidNamespace(str(exc.args[0]), hint=exc.hint) from exc
        raise errors.InvalidArgument(f"PgrecallStore: unknown operation {type(op).__name__}")

    def _common(self) -> dict[str, Any]:
        return {"principal": self.principal, "scopes": self.scopes, "shared": self.shared}

    def _get(self, op: GetOp) -> Item | None:
        rows = self._sql.store_get(self.scope, _labels(op.namespace), op.key, purpose=self.purpose,
                                     **self._common())
        return next((Item(value=r.value, key=r.key, namespace=tuple(r.namespace), created_at=r.created_at,
                          updated_at=r.updated_at) for r in rows), None)

    def _put(self, op: PutOp) -> None:
        if op.value is None:
            self._sql.store_delete(self.scope, _labels(op.namespace), op.key, **self._common())
        else:
            self._sql.store_put(self.scope, _labels(op.namespace), op.key, Jsonb(op.value), self.purposes,
                                  source_role=self.source_role, **self._common())

    def _search(self, op: SearchOp) -> list[SearchItem]:
        vector, model = None, None
        if op.query:
            try:
                embedder = self.memory.embedder
                [embedded] = embedder.embed([op.query])
                vector, model = [float(x) for x in embedded], embedder.name
            except ModelUnavailable:
                pass  # recall answers lexically, as it does without a model
        condition = None if op.filter is None else Jsonb(op.filter)
        rows = self._sql.store_search(self.scope, namespace_prefix=_labels(op.namespace_prefix), filter=condition,
                                        limit=op.limit, offset=op.offset, query=op.query or None,
                                        purpose=self.purpose, query_embedding=vector, query_model=model,
                                        **self._common())
        return [SearchItem(namespace=tuple(r.namespace), key=r.key, value=r.value, created_at=r.created_at,
                           updated_at=r.updated_at, score=r.score) for r in rows]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        paths: dict[str, list[str]] = {}
        for condition in op.match_conditions or ():
            if condition.match_type in paths:
                raise errors.InvalidArgument(f"PgrecallStore lists with one {condition.match_type} condition at most")
            paths[condition.match_type] = _labels(tuple(condition.path))
        rows = self._sql.store_list_namespaces(self.scope, prefix=paths.get("prefix"), suffix=paths.get("suffix"),
                                                 max_depth=op.max_depth, limit=op.limit, offset=op.offset,
                                                 purpose=self.purpose, **self._common())
        return [tuple(r.namespace) for r in rows]
