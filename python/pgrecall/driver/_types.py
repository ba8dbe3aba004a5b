"""The tenant's declared composite types, registered on the connection a call runs on.

A result row holding a declared type (recall's items and meta, a memory's provenance, a fact's quotes) is read
in binary, each composite value loaded by psycopg through a :class:`~psycopg.types.composite.CompositeInfo`
registered with :func:`~psycopg.types.composite.register_composite` on the connection, as a dict keyed by
attribute NAME: the dataclass readers of ``_calls.py`` take it from there, as they took the JSON object
``to_jsonb(column)`` gave before (no JSON is written by the server nor parsed here). A tenant's types live in
its schema, so the registration is per tenant and per connection; the runner makes it on the first call of a
tenant on a connection (the handle's own, a caller's, or one of a pool's: a pool's ``configure=`` needs nothing
more than :func:`pgrecall.configure`), with one catalog query for all of the tenant's types.

Read by name, a tenant upgraded to a newer schema whose types have more attributes than this driver's
dataclasses still reads: the attributes it does not know are ignored (an error under PGRECALL_STRICT_ROWS=1, as
for the unknown keys of a JSON object). A type altered while a connection holds its registration (an upgrade
under a running application) is noticed, its registration made again and the statement run again.
"""

from __future__ import annotations

import functools
import struct
import weakref
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import abc, pq
from psycopg.adapt import AdaptersMap, Loader, Transformer
from psycopg.types.composite import CompositeInfo, register_composite

# Every declared composite type of the tenant's schema (CREATE TYPE ... AS: relkind 'c', not a table's row type)
# with its attributes in order, in one round trip.
_TENANT_TYPES = """
select t.typname, t.oid, t.typarray, t.oid::regtype::text,
       array_agg(a.attname order by a.attnum)::text[], array_agg(a.atttypid order by a.attnum)::oid[]
  from pg_type t
  join pg_class c on c.oid = t.typrelid and c.relkind = 'c'
  join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
 where t.typnamespace = (select n.oid from pg_namespace n where n.nspname = %s)
 group by t.oid"""


class StaleTypes(Exception):
    """A composite value whose attributes are not those registered: the type was altered since (the runner
    registers the tenant's types again and runs the statement again)."""


# The tenants whose types each connection has registered, and their oids (types and arrays): keyed by the
# connection's adapters, which live exactly as long as it does.
_REGISTERED: weakref.WeakKeyDictionary[AdaptersMap, dict[str, frozenset[int]]] = weakref.WeakKeyDictionary()


def registered(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any], tenant: str) -> frozenset[int] | None:
    """The oids of the tenant's types registered on ``conn`` (None: not registered)."""
    return _REGISTERED.get(conn.adapters, {}).get(tenant)


def forget(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any], tenant: str) -> None:
    _REGISTERED.get(conn.adapters, {}).pop(tenant, None)


def register(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any], tenant: str,
             found: Sequence[tuple[Any, ...]]) -> None:
    """Register the tenant's types (the rows of :data:`_TENANT_TYPES`) on ``conn``."""
    oids: set[int] = set()
    loaders: list[type[_CompositeBinaryLoader]] = []
    for name, oid, array_oid, regtype, names, types in found:
        info = _info(name, oid, array_oid, regtype, tuple(names), tuple(types))
        # a plain function as the factory: register_composite makes dumpers for a factory that is a class
        register_composite(info, conn, _no_factory, make_object=_as_dict)
        loader = type(f"{name}_binary_loader", (_CompositeBinaryLoader,), {"info": info})
        conn.adapters.register_loader(oid, loader)
        loaders.append(loader)
        oids.update((oid, array_oid))
    context = _DriverContext(conn)  # once every type is registered: the attributes' loaders are found there
    for loader in loaders:
        loader.context = context
    _REGISTERED.setdefault(conn.adapters, {})[tenant] = frozenset(oids)


class _DriverContext:
    """Where the attributes of a connection's composite values find their loaders: the connection's adapters
    as they are once the tenant's types are registered, a real read as in text (:class:`ShortFloat4BinaryLoader`)."""

    def __init__(self, conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> None:
        self.adapters = AdaptersMap(conn.adapters)
        self.adapters.register_loader("float4", ShortFloat4BinaryLoader)
        self.connection = conn


def ensure(conn: psycopg.Connection[Any], tenant: str) -> frozenset[int]:
    """The tenant's types registered on ``conn`` (a catalog query the first time on this connection)."""
    oids = registered(conn, tenant)
    if oids is None:
        with conn.cursor() as cur:
            register(conn, tenant, cur.execute(_TENANT_TYPES, (tenant,)).fetchall())
        oids = registered(conn, tenant) or frozenset()
    return oids


async def ensure_async(conn: psycopg.AsyncConnection[Any], tenant: str) -> frozenset[int]:
    """:func:`ensure` on an AsyncConnection."""
    oids = registered(conn, tenant)
    if oids is None:
        async with conn.cursor() as cur:
            await cur.execute(_TENANT_TYPES, (tenant,))
            register(conn, tenant, await cur.fetchall())
        oids = registered(conn, tenant) or frozenset()
    return oids


@functools.lru_cache(maxsize=4096)
def _info(name: str, oid: int, array_oid: int, regtype: str, names: tuple[str, ...],
          types: tuple[int, ...]) -> CompositeInfo:
    """One CompositeInfo per type as it stands, shared by the connections that register it: psycopg keeps the
    loader classes it makes per CompositeInfo object, so a new one per connection would grow that cache with
    every connection a pool opens."""
    return CompositeInfo(name, oid, array_oid, regtype=regtype, field_names=names, field_types=types)


def _no_factory(*values: Any) -> Any:
    raise AssertionError("unreachable: make_object builds the value")


def _as_dict(values: Sequence[Any], info: CompositeInfo) -> dict[str, Any]:
    """A composite value read in text (a caller's own query on the connection): its attributes by name, which
    the catalog gave for the type in the order of its values."""
    return {name: value for name, value in zip(info.field_names, values, strict=True)}


_COUNT = struct.Struct("!i")
_OID_LENGTH = struct.Struct("!Ii")


class _CompositeBinaryLoader(Loader):
    """A composite value in binary as a dict of its attributes by name; StaleTypes when its attributes' types
    (which the binary form carries) are not the registered ones. psycopg's own binary loader takes them on trust
    and would read a value of an altered type into the wrong attributes, or fail.

    psycopg makes a loader per cursor, and its own composite loader makes a Transformer for its attributes each
    time (with those of every nested type: a third of a recall's reading): here the attributes' Transformer is
    made once per connection and type, at the first value, and shared by the cursors (it holds no state of a
    result)."""

    format = pq.Format.BINARY
    info: CompositeInfo
    context: _DriverContext
    attributes: abc.Transformer | None = None

    def __init__(self, oid: int, context: abc.AdaptContext | None = None):
        super().__init__(oid, context)
        cls = type(self)
        if cls.attributes is None:
            cls.attributes = Transformer(cls.context)
            cls.attributes.set_loader_types(self.info.field_types, self.format)
        self._tx = cls.attributes
        self._names = self.info.field_names
        self._types = self.info.field_types

    def load(self, data: abc.Buffer) -> dict[str, Any]:
        if _COUNT.unpack_from(data, 0)[0] != len(self._types):
            raise StaleTypes(f"the type {self.info.regtype} has other attributes than when it was registered")
        offset = 4
        values: list[abc.Buffer | None] = []
        append = values.append
        unpack = _OID_LENGTH.unpack_from
        for registered_type in self._types:
            oid, length = unpack(data, offset)
            if oid != registered_type:  # an attribute dropped and another added, of another type
                raise StaleTypes(f"the type {self.info.regtype} was altered since it was registered")
            offset += 8
            if length < 0:
                append(None)
            else:
                end = offset + length
                append(data[offset:end])
                offset = end
        return {name: value for name, value in zip(self._names, self._tx.load_sequence(values), strict=True)}


_FLOAT4 = struct.Struct("!f")


class ShortFloat4BinaryLoader(Loader):
    """A ``real`` in binary as the float of the shortest decimal that is the same real, which is what it is in
    text (PostgreSQL prints the shortest; a fact's confidence 0.8 reads 0.8, not 0.800000011920929): the driver
    reads rows with declared types in binary, and its results must not change with the format. Registered on the
    driver's own cursors only."""

    format = pq.Format.BINARY

    def load(self, data: abc.Buffer) -> float:
        exact: float = _FLOAT4.unpack(data)[0]
        for digits in (6, 7, 8, 9):  # %g drops trailing zeros: 0.800000 is 0.8
            shortest = float(f"{exact:.{digits}g}")
            if _FLOAT4.pack(shortest) == data:
                return shortest
        return exact  # NaN, or an infinity
