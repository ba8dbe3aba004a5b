"""How a driver method becomes SQL, without doing any I/O.

Every operation of the driver is a pure function of the handle's defaults and
the caller's arguments that returns either

- a :class:`Call`: one stored function of the tenant, its named arguments, and
  the row type its result is read into (by column NAME, through psycopg's
  ``class_row``/``kwargs_row``), or
- a :data:`Program`: a generator that yields Calls and :class:`Offload` steps
  (CPU work: embedding a query, a re-rank, an LLM) and returns the result.

The sync and the async runner (``_run.py``) execute the same Calls and drive
the same Programs, so no statement and no argument rule exists twice.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import MISSING, Field, dataclass, fields
from datetime import datetime
from typing import Any, ClassVar, Generic, ParamSpec, Protocol, TypeAlias, TypeVar, cast

import psycopg
from psycopg import postgres, sql
from psycopg.abc import Loader
from psycopg.adapt import PyFormat
from psycopg.pq import Format
from psycopg.rows import BaseRowFactory, class_row, kwargs_row, scalar_row
from psycopg.types.json import Jsonb
from psycopg.types.range import Range

from .. import embedder as embedding_model
from .. import errors
from ..embedder import TextEmbedder

T = TypeVar("T")
U = TypeVar("U")
P = ParamSpec("P")


class Row(Protocol):
    """A frozen dataclass that a row or a JSON object is read into."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]


R = TypeVar("R", bound=Row)


@functools.cache
def _strict_rows() -> bool:
    """Row types ignore JSON keys they do not know, so that a newer tenant schema which adds one does not break
    an older driver; the test suite sets PGRECALL_STRICT_ROWS=1, where an unknown key is an error, so a key the
    SQL adds and the driver forgets is caught there and not silently dropped."""
    return os.environ.get("PGRECALL_STRICT_ROWS") == "1"  # read once, at the first row: it is on a hot path


# -- reading rows and JSON into dataclasses ---------------------------------------------------------------


def parse(fn: Callable[[Any], Any], *, column: str | None = None, composite: bool = False) -> dict[str, Any]:
    """Field metadata: convert the column's (or JSON key's) value with ``fn`` (None stays None). ``composite``:
    the column is of a declared composite type (or an array of one), which arrives as a dict of its attributes
    by name (or a list of them): the call reads its row in binary, the tenant's types registered on the
    connection (``_types.py``), and ``fn`` reads the dict as it reads a JSON object."""
    meta: dict[str, Any] = {"parse": fn}
    if column:
        meta["column"] = column
    if composite:
        meta["composite"] = True
    return meta


def column(name: str) -> dict[str, Any]:
    """Field metadata: the attribute is read from the column ``name`` (the attribute keeps its public name)."""
    return {"column": name}


_PARSERS: dict[type[Any], dict[str, Callable[[Any], Any]]] = {}
_COLUMNS: dict[type[Any], tuple[tuple[str, str], ...]] = {}
_NAMES: dict[type[Any], frozenset[str]] = {}


def _parsers(cls: type[Any]) -> dict[str, Callable[[Any], Any]]:
    if cls not in _PARSERS:
        _PARSERS[cls] = {f.name: f.metadata["parse"] for f in fields(cls) if "parse" in f.metadata}
    return _PARSERS[cls]


def with_owned(parse: Callable[[T], U], owned: Callable[[T], U]) -> Callable[[T], U]:
    """A field parser of JSON and its twin for JSON the driver owns (just parsed from a row: nobody else holds
    it), which fills the dicts in place instead of copying them; a reader of owned values uses the twin."""
    parse.owned = owned  # type: ignore[attr-defined]
    return parse


def _owned_parsers(cls: type[Any], owned: bool) -> dict[str, Callable[[Any], Any]]:
    """The field parsers of ``cls``; ``owned``: the twins of those that have one (:func:`with_owned`)."""
    parsers = _parsers(cls)
    return {name: getattr(fn, "owned", fn) for name, fn in parsers.items()} if owned else parsers


def _columns(cls: type[Any]) -> tuple[tuple[str, str], ...]:
    """(column, attribute) of each field of a row type."""
    if cls not in _COLUMNS:
        _COLUMNS[cls] = tuple((f.metadata.get("column", f.name), f.name) for f in fields(cls))
    return _COLUMNS[cls]


@functools.cache
def _composites(cls: type[Any]) -> frozenset[str]:
    """The attributes whose columns are of a declared composite type (once per class: every call asks)."""
    return frozenset(f.name for f in fields(cls) if f.metadata.get("composite"))


def _field_names(cls: type[Any]) -> frozenset[str]:
    if cls not in _NAMES:
        _NAMES[cls] = frozenset(f.name for f in fields(cls))
    return _NAMES[cls]


def _maker(cls: type[R], owned: bool = True) -> Callable[[dict[str, Any]], R]:
    """A constructor of ``cls`` from a dict of its fields that the caller owns and whose keys are all fields (it
    is filled in place and becomes the instance's ``__dict__``); ``owned``: its nested JSON is the driver's too
    (a row's), parsed in place (:func:`with_owned`).

    A result is read into some thirty frozen dataclasses per recall, and a frozen dataclass's ``__init__`` pays
    an ``object.__setattr__`` per field plus two copies of the keyword arguments: the driver's largest cost
    after the statement. The row types have no ``__post_init__``, no slots and no default factories (checked
    here), so the dict is parsed in place, completed with the defaults it lacks and adopted as the instance's
    ``__dict__``, with no further copy. A dict missing a required field goes through ``cls(**values)``, which
    raises the dataclass's own TypeError."""
    specs = fields(cls)
    if hasattr(cls, "__post_init__") or hasattr(cls, "__slots__") or any(
            f.default_factory is not MISSING or not f.init for f in specs):
        return lambda values: cls(**values)
    count = len(specs)
    defaults = tuple((f.name, f.default) for f in specs if f.default is not MISSING)
    parsers = tuple(_owned_parsers(cls, owned).items())
    new = object.__new__
    adopt = object.__setattr__  # a frozen dataclass's own __setattr__ refuses even __dict__

    def make(values: dict[str, Any]) -> R:
        for name, fn in parsers:
            value = values.get(name)
            if value is not None:
                values[name] = fn(value)
        if len(values) != count:  # keys are fields: some are missing
            for name, default in defaults:
                values.setdefault(name, default)
            if len(values) != count:
                return cls(**values)
        obj = new(cls)
        adopt(obj, "__dict__", values)
        return obj
    return make


_MAKERS: dict[tuple[type[Any], bool], Callable[[dict[str, Any]], Any]] = {}


def _maker_of(cls: type[R], owned: bool = True) -> Callable[[dict[str, Any]], R]:
    make = _MAKERS.get((cls, owned))
    if make is None:
        make = _MAKERS[cls, owned] = _maker(cls, owned)
    return make


def _build(cls: type[R], **values: Any) -> R:
    """``cls`` from keyword arguments named after its fields (a row read by column name)."""
    return _maker_of(cls)(values)


@functools.cache
def row_factory(cls: type[R]) -> BaseRowFactory[R]:
    """psycopg's class_row, or kwargs_row through the field parsers when the row type has any: keyed by
    column name, so a column that moves cannot land in the wrong attribute (made once per class: every call
    asks)."""
    if not _parsers(cls):
        return class_row(cls)

    def build(**values: Any) -> R:
        return _build(cls, **values)  # _build looked up on every row: the factory outlives a replaced one
    return kwargs_row(build)


@functools.cache
def _reader(cls: type[R], owned: bool = False) -> Callable[[Mapping[str, Any]], R]:
    """The reader of JSON objects as ``cls``, made once per class (a recall reads some thirty objects): the
    object is copied once (the caller's dict stays as it was; ``owned``: not copied, the caller gives the dict
    away), parsed in place and adopted by :func:`_maker`'s rule. It is the driver's hottest loop, so its code is
    written out per class (as :mod:`dataclasses` writes ``__init__``): one line per parsed field, timestamps
    parsed inline, a JSON array's reader called directly; a third faster than one loop over the parsers."""
    known = _field_names(cls)
    specs = fields(cls)
    if hasattr(cls, "__post_init__") or hasattr(cls, "__slots__") or any(
            f.default_factory is not MISSING or not f.init for f in specs):
        make = _maker_of(cls, owned)
        return lambda obj: make(_known_values(cls, known, obj, owned))
    defaults = tuple((f.name, f.default) for f in specs if f.default is not MISSING)
    scope: dict[str, Any] = {"cls": cls, "known": known, "new": object.__new__, "adopt": object.__setattr__,
                             "datetime": datetime, "fromisoformat": datetime.fromisoformat,
                             "unknown": functools.partial(_known_values, cls, known, owned=owned),
                             "complete": functools.partial(_complete, cls, defaults, len(specs))}
    lines = ["def read(obj):",
             "    if obj.keys() <= known:",
             "        values = obj" if owned else "        values = dict(obj)",
             "    else:",
             "        values = unknown(obj)"]
    for i, (name, fn) in enumerate(_owned_parsers(cls, owned).items()):
        listed = _list_of(fn)
        lines += [f"    v = values.get({name!r})", "    if v:" if owned and listed else "    if v is not None:"]
        if fn is timestamp:
            lines.append(f"        values[{name!r}] = v if isinstance(v, datetime) else fromisoformat(v)")
        elif listed is not None:  # read each object here (an owned empty list is kept as it is)
            scope[f"read{i}"] = _reader(cast(Any, listed), owned)
            lines.append(f"        values[{name!r}] = [read{i}(x) for x in v]")
        else:
            scope[f"parse{i}"] = fn
            lines.append(f"        values[{name!r}] = parse{i}(v)")
    lines += [f"    if len(values) != {len(specs)}:",
              "        return complete(values)",
              "    made = new(cls)",
              "    adopt(made, '__dict__', values)",
              "    return made"]
    exec("\n".join(lines), scope)  # the driver's own text: the field names of its own dataclasses
    return cast(Callable[[Mapping[str, Any]], R], scope["read"])


def _known_values(cls: type[Any], known: frozenset[str], obj: Mapping[str, Any], owned: bool) -> dict[str, Any]:
    """A JSON object's fields: the dict itself (``owned``) or a copy when every key is one; otherwise a copy of
    those that are, or TypeError under PGRECALL_STRICT_ROWS."""
    if obj.keys() <= known:
        return cast(dict[str, Any], obj) if owned else dict(obj)
    if _strict_rows():
        raise TypeError(f"{cls.__name__} has no field for the JSON key(s) {sorted(obj.keys() - known)}")
    return {k: v for k, v in obj.items() if k in known}


def _complete(cls: type[R], defaults: tuple[tuple[str, Any], ...], count: int, values: dict[str, Any]) -> R:
    """An object whose JSON lacked some fields: the defaults, or the dataclass's own TypeError."""
    for name, default in defaults:
        values.setdefault(name, default)
    if len(values) != count:
        return cls(**values)
    made = object.__new__(cls)
    object.__setattr__(made, "__dict__", values)
    return made


def from_json(cls: type[R], obj: Mapping[str, Any]) -> R:
    """A JSON object (a dict) as the row type ``cls``; nested values go through the field parsers."""
    return _reader(cls)(obj)  # type: ignore[no-any-return]


def _own_reader(cls: type[R]) -> Callable[[dict[str, Any]], R]:
    """The reader of dicts given away as ``cls`` (:func:`from_own_json`'s)."""
    return _reader(cls, True)


def from_own_json(cls: type[R], obj: dict[str, Any]) -> R:
    """:func:`from_json` of a dict the caller made for it and gives away (filled in place, no copy)."""
    return _reader(cls, True)(obj)  # type: ignore[no-any-return]


def _list_parser(cls: type[R], owned: bool) -> Callable[[Sequence[Mapping[str, Any]]], list[R]]:
    read: Callable[[Mapping[str, Any]], R] | None = None

    def parse(items: Sequence[Mapping[str, Any]]) -> list[R]:
        nonlocal read
        if not items:
            return []  # most provenance lists are empty
        if read is None:
            read = _reader(cls, owned)
        return [read(item) for item in items]
    return parse


def json_list(cls: type[R]) -> Callable[[Sequence[Mapping[str, Any]]], list[R]]:
    """A field parser: a JSON array of objects as a list of ``cls`` (its reader found at the first call, when
    every class exists, and kept; a reader of a class with such a field reads the list itself)."""
    parse = with_owned(_list_parser(cls, False), _list_parser(cls, True))
    parse.list_of = cls  # type: ignore[attr-defined]
    return parse


def _list_of(fn: Callable[[Any], Any]) -> type[Any] | None:
    """The class of a :func:`json_list` parser's objects (None: another parser)."""
    return getattr(fn, "list_of", None)


def _object_parser(cls: type[R], owned: bool) -> Callable[[Mapping[str, Any]], R]:
    read: Callable[[Mapping[str, Any]], R] | None = None

    def parse(obj: Mapping[str, Any]) -> R:
        nonlocal read
        if read is None:
            read = _reader(cls, owned)
        return read(obj)
    return parse


def json_object(cls: type[R]) -> Callable[[Mapping[str, Any]], R]:
    """A field parser: a JSON object as ``cls``."""
    return with_owned(_object_parser(cls, False), _object_parser(cls, True))


def given(args: Mapping[str, Any], defaulted: Sequence[str]) -> dict[str, Any]:
    """A call's named arguments without those left None that the function has a default for (so the SQL
    default applies): what a generated builder sends."""
    return {k: v for k, v in args.items() if v is not None or k not in defaulted}


def as_list(values: Sequence[Any] | None) -> list[Any] | None:
    """A sequence sent as an array (psycopg adapts a list, not a tuple)."""
    return None if values is None else list(values)


def as_json(value: Any) -> Jsonb | None:
    """A value sent as jsonb (None stays None: SQL NULL, or the function's default; a Jsonb as it is)."""
    return value if value is None or isinstance(value, Jsonb) else Jsonb(value)


def json_items(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A batch for a jsonb argument: each item a dict, datetimes as ISO text. An item that is not a mapping is
    passed as it is, for the tenant to refuse by name (every one of the rows must be a JSON object)."""
    return [{k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in item.items()}
            if isinstance(item, Mapping) else item for item in items]


def timestamp(value: str | datetime) -> datetime:
    """A timestamptz inside JSON arrives as ISO text."""
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)


@functools.cache
def _tstzrange_loader() -> Loader:
    oid = postgres.types["tstzrange"].oid
    return psycopg.adapters.get_loader(oid, Format.TEXT)(oid)  # type: ignore[misc]


def tstzrange(value: str | Range[datetime]) -> Range[datetime]:
    """A tstzrange inside JSON arrives as the text PostgreSQL prints ('["2026-05-01 00:00:00+00",)'): read by
    psycopg's own loader, so that it is the Range a tstzrange column gives (a fact's valid range in recall is the
    one facts_as_of gives, and --json shows both as {"from", "to"})."""
    return value if isinstance(value, Range) else _tstzrange_loader().load(value.encode())


# -- calls --------------------------------------------------------------------------------------------------

# The casts the driver writes after a placeholder: SQL text of its own, never a caller's.
REAL_ARRAY = "real[]"
TEXT_ARRAY = "text[]"
TEXT = "text"
# No cast: pgvector's vector (or an array of them) where the tenant function takes halfvec, which PostgreSQL
# casts to on the way in (an implicit cast of pgvector's); the driver need not name the extension's schema.
AS_HALFVEC = ""


@dataclass(frozen=True)
class Cast:
    """An argument sent in binary through its registered type and cast in the statement: a pgvector vector
    (or an array of them) where the tenant function takes real numbers or text. ``to`` is written by the
    driver, never taken from a caller."""

    value: Any
    to: str  # REAL_ARRAY, TEXT_ARRAY, TEXT or AS_HALFVEC


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """``select <columns> from <tenant>.<function>(p_name => %(name)s, ...)`` and how its rows become ``T``."""

    function: str
    args: Mapping[str, Any]
    columns: tuple[tuple[str, str], ...] | None  # (column, attribute); None: the function's single value
    row_factory: BaseRowFactory[Any]
    collect: Callable[[list[Any]], T]
    ordered_by: str | None = None  # a result column: batches come back in the order of their items
    composites: frozenset[str] = frozenset()  # attributes of a declared composite type (read in binary)

    def then(self, fn: Callable[[T], U]) -> Call[U]:
        collect = self.collect
        return Call(self.function, self.args, self.columns, self.row_factory, lambda rows: fn(collect(rows)),
                    self.ordered_by, self.composites)

    @property
    def sends_vectors(self) -> bool:
        return any(isinstance(v, Cast) and v.value is not None for v in self.args.values())

    @property
    def params(self) -> dict[str, Any]:
        return {name: v.value if isinstance(v, Cast) else v for name, v in self.args.items()}

    def statement(self, tenant: str) -> sql.Composed:
        return _compose(tenant, self.function, self._arguments, self.columns, self.ordered_by)

    def query(self, tenant: str) -> str:
        """The statement as text, composed once per shape (function, arguments, casts, columns): composing
        it anew on every call cost a recall a third of a millisecond (bench/driver_overhead.py)."""
        return _query(tenant, self.function, self._arguments, self.columns, self.ordered_by)

    def bound(self, tenant: str) -> tuple[str, dict[str, Any], bool]:
        """The statement's text, its parameters and whether any is a vector, in one pass over the arguments
        (what the runner needs of every call; the properties above each walk them again)."""
        params: dict[str, Any] = {}
        casts: list[tuple[str, str]] = []
        vectors = False
        for name, v in self.args.items():
            if isinstance(v, Cast):
                casts.append((name, v.to))
                v = v.value
                vectors = vectors or v is not None
            params[name] = v
        return (_query_of_shape(tenant, self.function, tuple(params), tuple(casts), self.columns, self.ordered_by),
                params, vectors)

    @property
    def _arguments(self) -> tuple[tuple[str, str | None], ...]:
        """(name, the cast written after its placeholder or None) of each argument."""
        return tuple((name, v.to if isinstance(v, Cast) else None) for name, v in self.args.items())


def _compose(tenant: str, function: str, arguments: tuple[tuple[str, str | None], ...],
             columns: tuple[tuple[str, str], ...] | None, ordered_by: str | None) -> sql.Composed:
    """``select <columns> from <tenant>.<function>(p_name => %(name)s, ...)``."""
    passed = sql.SQL(", ").join(
        sql.SQL("{} => {}").format(
            sql.Identifier("p_" + name),
            sql.Placeholder(name) if cast is None
            else sql.Placeholder(name, PyFormat.BINARY) if cast == AS_HALFVEC
            else sql.SQL("{}::{}").format(sql.Placeholder(name, PyFormat.BINARY), sql.SQL(cast)))
        for name, cast in arguments)
    target = sql.SQL("{}.{}({})").format(sql.Identifier(tenant), sql.Identifier(function), passed)
    if columns is None:
        return sql.SQL("select {}").format(target)
    selected = sql.SQL(", ").join(
        sql.Identifier(col) if col == attr else sql.SQL("{} as {}").format(sql.Identifier(col), sql.Identifier(attr))
        for col, attr in columns)
    statement = sql.SQL("select {} from {}").format(selected, target)
    if ordered_by is not None:
        statement += sql.SQL(" order by {}").format(sql.Identifier(ordered_by))
    return statement


@functools.lru_cache(maxsize=4096)
def _query(tenant: str, function: str, arguments: tuple[tuple[str, str | None], ...],
           columns: tuple[tuple[str, str], ...] | None, ordered_by: str | None) -> str:
    return _compose(tenant, function, arguments, columns, ordered_by).as_string(None)


@functools.lru_cache(maxsize=4096)
def _query_of_shape(tenant: str, function: str, names: tuple[str, ...], casts: tuple[tuple[str, str], ...],
                    columns: tuple[tuple[str, str], ...] | None, ordered_by: str | None) -> str:
    """:func:`_query` keyed by the argument names and the casts alone (cheaper to build and hash per call)."""
    cast_of = dict(casts)
    return _query(tenant, function, tuple((name, cast_of.get(name)) for name in names), columns, ordered_by)


def _selected(cls: type[Any], renamed: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    columns = _columns(cls)
    if not renamed:
        return columns
    return tuple((renamed.get(attr, col), attr) for col, attr in columns)


def rows(function: str, args: Mapping[str, Any], row: type[R], *, renamed: Mapping[str, str] | None = None,
         ordered_by: str | None = None) -> Call[list[R]]:
    """Every row of a set-returning function, as ``row``; ``renamed`` maps an attribute to another column."""
    return Call(function, args, _selected(row, renamed), row_factory(row), list, ordered_by, _composites(row))


def one(function: str, args: Mapping[str, Any], row: type[R]) -> Call[R]:
    """A function that returns exactly one row (or raises)."""
    return Call(function, args, _columns(row), row_factory(row), _only_row(function), None, _composites(row))


@functools.cache
def _only_row(function: str) -> Callable[[list[Any]], Any]:
    def only(found: list[Any]) -> Any:
        if len(found) != 1:
            raise RuntimeError(f"{function}() returned {len(found)} rows where the driver expects one")
        return found[0]
    return only


def value(function: str, args: Mapping[str, Any], kind: type[T]) -> Call[T]:
    """A function that returns one value of ``kind`` (a scalar function)."""

    def only(found: list[Any]) -> T:
        return cast(T, found[0])

    return Call(function, args, None, scalar_row, only)


def json_value(function: str, args: Mapping[str, Any]) -> Call[Any]:
    """A function that returns a jsonb value of no fixed shape (a setting's value)."""
    return value(function, args, object)


@dataclass(frozen=True)
class Statement(Generic[T]):
    """A statement that is not the call of one tenant function (VACUUM, a catalog query): SQL the driver
    composes (identifiers through psycopg.sql, values bound), and how its rows become ``T``."""

    query: sql.Composed
    params: Mapping[str, Any]
    row_factory: BaseRowFactory[Any] | None  # None: the statement returns no rows
    collect: Callable[[list[Any]], T]


@dataclass(frozen=True)
class ConnectionState:
    autocommit: bool
    idle: bool  # not inside a transaction
    server_version: int  # e.g. 180001


@dataclass(frozen=True)
class AskConnection:
    """A step that reads the state of the connection the runner uses (a pool's: one of its connections)."""


# -- programs: several steps, or CPU work between them -------------------------------------------------------


@dataclass(frozen=True)
class Offload:
    """CPU work (an embedding model, a re-rank hook, an LLM): run inline by the sync driver, in a thread by the
    async one, so an event loop is never blocked by a model."""

    fn: Callable[[], Any]


@dataclass(frozen=True)
class Snapshot:
    """A step that begins (``begin``) or ends the one snapshot the steps between read: one connection (a pool's
    is held until the end) in a REPEATABLE READ READ ONLY transaction. Inside a caller's own transaction
    block, that transaction is the snapshot. Only reads go between."""

    begin: bool


Step: TypeAlias = Call[Any] | Statement[Any] | AskConnection | Offload | Snapshot
Program: TypeAlias = Generator[Step, Any, T]
Operation: TypeAlias = Call[T] | Program[T]


def step(call: Call[T] | Statement[T]) -> Program[T]:
    """Inside a Program: ``result = yield from step(call)``."""
    return cast(T, (yield call))


def steps(op: Operation[T]) -> Program[T]:
    """Inside a Program: ``result = yield from steps(operation)``, a Call or a Program alike."""
    if isinstance(op, Call):
        return (yield from step(op))
    return (yield from op)


def connection_state() -> Program[ConnectionState]:
    """Inside a Program: ``state = yield from connection_state()``."""
    return cast(ConnectionState, (yield AskConnection()))


def one_snapshot(program: Program[T]) -> Program[T]:
    """Inside a Program: ``result = yield from one_snapshot(reads(...))``: the reads of ``program`` see one
    snapshot of the tenant, as if they were one statement, whatever commits between them (with a pool, each
    step would otherwise borrow a connection of its own, each call in autocommit its own snapshot)."""
    yield Snapshot(begin=True)
    try:
        result = yield from program
    except Exception:
        yield Snapshot(begin=False)  # the runner rolls the read-only transaction back and lets the connection go
        raise
    yield Snapshot(begin=False)
    return result


def offload(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> Program[T]:
    """Inside a Program: ``result = yield from offload(fn, ...)``."""
    return cast(T, (yield Offload(functools.partial(fn, *args, **kwargs))))


# -- the handle every operation reads its defaults from -----------------------------------------------------


class Handle:
    """The tenant, the default principal and scopes, and the embedder of a driver handle (sync or async)."""

    def __init__(self, tenant: str, principal: str | None, scopes: Sequence[str] | None,
                 embedder: TextEmbedder | None) -> None:
        self.tenant = tenant
        self.principal = principal
        self.scopes = list(scopes) if scopes is not None else None
        self._embedder = embedder
        # The tenant's embedding model and input version, as last read (write_embedder); None: not read yet.
        self.embedding_stamp: tuple[str, int] | None = None

    def who(self, principal: str | None, scopes: Sequence[str] | None) -> tuple[str, list[str]]:
        """The principal and authorised scopes of a call: its own, else the handle's."""
        principal = principal if principal is not None else self.principal
        chosen = list(scopes) if scopes is not None else self.scopes
        if principal is None:
            raise errors.UnknownPeer("no principal: pass principal= to connect() or to the call")
        if not chosen:
            raise errors.ScopeNotAuthorised("no authorised scopes: pass scopes= to connect() or to the call")
        return principal, chosen

    @property
    def write_embedder(self) -> TextEmbedder | None:
        """The embedder whose vectors remember() sends with the memories: the one the handle was given
        (connect(embedder=...)), whose model the caller has at hand; None otherwise (the worker embeds what is
        queued). Not the default model even when this process has loaded it: whether a remember() is queued
        would then depend on what ran before it in the process."""
        return self._embedder

    @property
    def embedder(self) -> TextEmbedder:
        """The handle's embedder; by default the local model, loaded on first use (ModelUnavailable if it cannot be),
        in this process or, from the ``pgrecall`` command, in the resident embedder (pgrecall.resident)."""
        return self._embedder if self._embedder is not None else embedding_model.default_embedder()
