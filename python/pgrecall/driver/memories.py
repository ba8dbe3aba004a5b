"""Setup, the log, and the memory operations: scopes and peers, observations, remember/read/derive/
correct/supersede/forget/pin, the session-start bundle and freshness.

Each function builds the call of one stored function; ``Memory`` and ``AsyncMemory`` run it.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt
import psycopg
from pgvector import Vector
from psycopg.types.json import Jsonb
from psycopg.types.range import Range

from .. import boundary, errors, sources
from ..embedder import DIMENSIONS, ModelUnavailable
from . import _generated
from ._calls import (
    AS_HALFVEC,
    Call,
    Cast,
    Handle,
    Program,
    connection_state,
    json_items,
    json_list,
    json_object,
    offload,
    one,
    parse,
    rows,
    step,
    value,
)
from ._generated import AboutEntity as AboutEntity  # re-exported
from ._generated import Freshness as Freshness  # re-exported
from ._generated import MemoryItem as MemoryItem  # re-exported
from ._generated import MemoryProvenance as MemoryProvenance  # re-exported
from ._generated import MemoryTextRevision as MemoryTextRevision  # re-exported
from ._generated import ObservationRef as ObservationRef  # re-exported
from ._generated import ObservationRow as ObservationRow  # re-exported
from ._generated import SchemaInfo as SchemaInfo  # re-exported
from ._generated import Scope as Scope  # re-exported
from ._generated import Setting
from ._generated import SourceMemory as SourceMemory  # re-exported

T = TypeVar("T")

# -- row types ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Remembered:
    memory_id: int | None
    status: str  # 'created' or 'noop'
    reason: str | None  # why a no-op

    @property
    def created(self) -> bool:
        return self.status == "created"


@dataclass(frozen=True)
class RememberedSaid(Remembered):
    """remember() with ``said``: also the log offset of the words appended, None when nothing was kept (the
    memory was a no-op, so its turn went with it)."""

    log_offset: int | None


@dataclass(frozen=True)
class Appended:
    log_offset: int


# Where a memory came from (the declared type memory_provenance), under the name it had before it was declared.
Provenance = MemoryProvenance


# An earlier text of a corrected memory (the declared type memory_text_revision), under the name it had before.
Revision = MemoryTextRevision


@dataclass(frozen=True)
class MemoryRecord:
    id: int
    scope: str
    kind: str
    title: str | None
    body: str
    origin: str
    revision: int
    confidence: float
    audience: str | None
    purposes: list[str]
    superseded_by: int | None
    created_by: str
    created_at: datetime
    updated_at: datetime
    valid: Range[datetime]
    provenance: Provenance = field(metadata=parse(json_object(Provenance), composite=True))
    revisions: list[Revision] = field(metadata=parse(json_list(Revision), composite=True))


def _list(items: Sequence[Any] | None) -> list[Any] | None:
    return list(items) if items is not None else None


def peer_names(what: str, names: Sequence[str] | None) -> list[str] | None:
    """An audience of peer names as a list (None stays None); a bare str is a mistake, not a list of letters."""
    if isinstance(names, str):
        raise errors.InvalidArgument(f"{what} is a list of peer names, not the text {names!r}",
                                     hint=f"Pass a list, e.g. {what}=[{names!r}].")
    return _list(names)


# -- setup --------------------------------------------------------------------------------------------------


def check_schema(h: Handle) -> Program[SchemaInfo]:
    """Fail fast, at connect, when the tenant is missing, this role may not use it, or its schema is older
    than this driver."""
    try:
        info = yield from step(_generated.schema_info(h))
    except psycopg.errors.InvalidSchemaName as exc:
        raise errors.TenantNotFound(f"tenant {h.tenant!r} is not installed in this database",
                                    hint=f"Create it: pgrecall tenant create {h.tenant}") from exc
    except errors.NotPermitted as exc:
        raise errors.TenantNotFound(f"this role may not use tenant {h.tenant!r}",
                                    hint=f"Connect as one of pgrecall_{h.tenant}_app, _worker or _admin.") from exc
    if info.schema_version is None or info.schema_version < sources.latest_version():
        raise errors.SchemaOutOfDate(
            f"tenant {h.tenant!r} is at migration {info.schema_version}, this driver needs {sources.latest_version()}",
            hint=f"Upgrade it: pgrecall tenant upgrade {h.tenant}")
    return info


def list_scopes(h: Handle) -> Call[list[Scope]]:
    """The tenant's scopes with their descriptions, by name (what a client may authorise)."""
    return rows("scopes", {}, Scope)


# -- the log ------------------------------------------------------------------------------------------------


def append(h: Handle, text: str, *, role: str, scope: str | None = None, kind: str = "message",
           actor: str | None = None, session_id: int | None = None, occurred_at: datetime | None = None,
           payload: Mapping[str, Any] | None = None, data_subject_id: str | None = None,
           lawful_basis: str | None = None, classification: str = "internal", retention_until: datetime | None = None,
           audience: Sequence[str] | None = None, principal: str | None = None,
           scopes: Sequence[str] | None = None) -> Call[int]:
    """Append an observation; returns its log offset in the scope. It is seen by the peers of its session (and
    its sender), or by the whole scope outside a session; ``audience`` (peer names) narrows that."""
    principal, scopes = h.who(principal, scopes)
    return value("append_observation", {
        "principal": principal, "scopes": scopes, "scope": scope or scopes[0], "body": text,
        "source_role": role, "kind": kind, "actor": actor, "session_id": session_id,
        "occurred_at": occurred_at, "payload": Jsonb(payload if payload is not None else {}),
        "data_subject_id": data_subject_id,
        "lawful_basis": lawful_basis, "classification": classification, "retention_until": retention_until,
        "audience": peer_names("audience", audience),
    }, int)


def append_many(h: Handle, rows_: Sequence[ObservationRow | Mapping[str, Any]], *, scope: str | None = None,
                principal: str | None = None, scopes: Sequence[str] | None = None) -> Call[list[int]]:
    """Append a batch in one call; each row is a dict with body and source_role (and optionally kind,
    actor, session_id, occurred_at, payload, data_subject_id, lawful_basis, classification,
    retention_until, audience): an ``ObservationRow``, the tenant's declared type observation_row. All are
    validated before any is written. Returns the offsets in order."""
    principal, scopes = h.who(principal, scopes)
    call = rows("append_observations", {"principal": principal, "scopes": scopes, "scope": scope or scopes[0],
                                         "rows": Jsonb(json_items(rows_))}, Appended, ordered_by="ordinal")
    return call.then(lambda appended: [a.log_offset for a in appended])


def watermark(h: Handle, scope: str | None = None, *, principal: str | None = None,
              scopes: Sequence[str] | None = None) -> Call[int]:
    """The largest log offset of the scope below which the log has no hole."""
    principal, scopes = h.who(principal, scopes)
    return value("log_watermark", {"principal": principal, "scopes": scopes, "scope": scope or scopes[0]}, int)


# -- memories -----------------------------------------------------------------------------------------------


def remember(h: Handle, text: str, *, evidence: Sequence[int] = (), purposes: Sequence[str],
             scope: str | None = None, audience: str | None = None, kind: str = "note", title: str | None = None,
             confidence: float = 1.0, about: Sequence[str] = (), observer: str | None = None,
             widening_reason: str | None = None, said: str | None = None, said_role: str = "user",
             said_payload: Mapping[str, Any] | None = None, embedding: VectorLike | None = None,
             embedding_model: str | None = None, embedding_input_version: int | None = None, embed: bool = True,
             principal: str | None = None, scopes: Sequence[str] | None = None) -> Program[Remembered]:
    """Write a memory. ``observer`` makes it that peer's local view (None: the global view). Empty or
    ambiguous input is a no-op with a reason (``status == 'noop'``), not an error.

    A memory may not reach peers that a turn it cites does not (WiderThanEvidence) unless
    ``widening_reason`` says why. ``said`` (the words, verbatim) is appended as the principal's note and
    cited, in the same call (``remember_said``; ``said_role`` and ``said_payload`` are the turn's), seen by the
    memory's audience and the principal: a memory that is refused or a no-op leaves no turn. The result is then
    a ``RememberedSaid`` with the turn's ``log_offset`` (None when nothing was kept).

    ``embedding`` (384 numbers) is the memory's vector, made by ``embedding_model`` from the text of
    ``embedding_input_version`` (WrongEmbeddingStamp unless those are the tenant's): written with the memory, not
    queued for the worker. Without one, the handle's own embedder (``connect(embedder=...)``) embeds the
    memory here when the tenant's input version is 1, whose text is the memory's own; ``embed=False`` leaves
    it to the worker.
    """
    principal, scopes = h.who(principal, scopes)
    if said is not None:
        if observer is not None:
            raise errors.InvalidArgument("remember(said=...) writes the global view: observer is not taken with it")
        if embedding is not None:
            raise errors.InvalidArgument("remember(said=...) queues its memory for the worker: embedding is not "
                                         "taken with it")
        return (yield from step(one("remember_said", {
            "principal": principal, "scopes": scopes, "scope": scope or scopes[0], "said": said, "body": text,
            "evidence": _list(evidence), "purposes": _list(purposes), "audience": audience, "kind": kind,
            "title": title, "confidence": confidence, "about": list(about), "source_role": said_role,
            "payload": Jsonb(said_payload if said_payload is not None else {}), "widening_reason": widening_reason,
        }, RememberedSaid)))
    args = {
        "principal": principal, "scopes": scopes, "scope": scope or scopes[0], "body": text,
        "evidence": _list(evidence), "purposes": _list(purposes), "audience": audience, "kind": kind,
        "title": title, "confidence": confidence, "about": list(about), "observer": observer,
        "widening_reason": widening_reason,
    }

    def call(vectors: list[Vector | None] | None, model: str | None, version: int | None) -> Call[Remembered]:
        given = {} if vectors is None else {"embedding": Cast(vectors[0], AS_HALFVEC), "embedding_model": model,
                                            "embedding_input_version": version}
        return one("remember", {**args, **given}, Remembered)

    return (yield from _with_vectors(h, [{"body": text, "title": title}], call,
                                     None if embedding is None else [embedding], embedding_model,
                                     embedding_input_version, embed))


def remember_many(h: Handle, items: Sequence[MemoryItem | Mapping[str, Any]], *, scope: str | None = None,
                  embeddings: Sequence[VectorLike | None] | None = None, embedding_model: str | None = None,
                  embedding_input_version: int | None = None, embed: bool = True, principal: str | None = None,
                  scopes: Sequence[str] | None = None) -> Program[list[Remembered]]:
    """remember() for a batch: each item a dict with body, evidence, purposes (and optionally audience,
    kind, title, confidence, about, observer, widening_reason): a ``MemoryItem``, the tenant's declared type
    memory_item. Validated whole before anything is written;
    one result per item. ``embeddings``: each item's vector (None for an item without one), stamped as for
    remember(); without them, the handle's embedder embeds the batch here as remember() does (not with
    ``embed=False``)."""
    principal, scopes = h.who(principal, scopes)
    args = {"principal": principal, "scopes": scopes, "scope": scope or scopes[0], "items": Jsonb(list(items))}

    def call(vectors: list[Vector | None] | None, model: str | None, version: int | None) -> Call[list[Remembered]]:
        given = {} if vectors is None else {"embeddings": Cast(vectors, AS_HALFVEC), "embedding_model": model,
                                            "embedding_input_version": version}
        return rows("remember_many", {**args, **given}, Remembered, ordered_by="ordinal")

    return (yield from _with_vectors(h, items, call, embeddings, embedding_model, embedding_input_version, embed))


# -- the vectors a caller has (issue #46) -------------------------------------------------------------------

VectorLike = Sequence[float] | npt.NDArray[Any]

# What _trim() strips in the tenant (plpgsql/shared/value_checks.sql): the body is stored without it.
_WHITESPACE = " \t\n\r\f\v\u00a0\u2028\u2029\ufeff"


def _own_text(item: Mapping[str, Any]) -> str:
    """The text input version 1 embeds for a memory: its title and body, as the tenant stores them."""
    body = str(item.get("body") or "").strip(_WHITESPACE)
    title = item.get("title")
    return body if title is None else f"{title}\n{body}"


# The largest magnitude a halfvec holds: the tenant stores vectors at half precision.
_HALFVEC_MAX = 65504.0


def _as_vector(value: VectorLike | None) -> Vector | None:
    if value is None:
        return None
    try:
        array = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise errors.InvalidArgument(f"an embedding must be {DIMENSIONS} numbers, not {type(value).__name__}",
                                     hint="Pass a sequence of floats or a 1-D numpy array.") from exc
    if array.ndim != 1:
        # a batch's matrix given as one item's vector: say its shape, not only that it is an ndarray
        raise errors.InvalidArgument(f"an embedding must be {DIMENSIONS} numbers in one dimension, not an array of "
                                     f"shape {array.shape}",
                                     hint="One vector per item: embeddings=list(matrix), or the matrix itself.")
    if array.shape[0] != DIMENSIONS:
        # the tenant's message, said here: pgvector refuses an empty one first, in words of its own
        raise errors.WrongDimensions(f"an embedding has {array.shape[0]} dimensions, not {DIMENSIONS}")
    vector = Vector(array)
    # refused here, by name, rather than by pgvector as the argument is read
    if not np.all(np.isfinite(array)) or np.any(np.abs(array) > _HALFVEC_MAX):
        raise errors.InvalidArgument(f"an embedding must be {DIMENSIONS} finite numbers within +-{_HALFVEC_MAX:g}",
                                     hint="The tenant stores vectors at half precision (pgvector's halfvec).")
    return vector


def _tenant_stamp(h: Handle) -> Program[tuple[str, int]]:
    """The tenant's embedding model and input version, read once per handle (again after a PR155)."""
    if h.embedding_stamp is None:
        found = yield from step(rows("settings", {}, Setting))
        values = {s.key: s.value for s in found}
        h.embedding_stamp = (str(values["embedding_model"]), int(values["embedding_input_version"]))
    return h.embedding_stamp


def _with_vectors(h: Handle, items: Sequence[Mapping[str, Any]], call: Callable[..., Call[T]],
                  given: Sequence[VectorLike | None] | None, model: str | None, version: int | None,
                  embed: bool) -> Program[T]:
    """Run ``call`` with the caller's vectors, or with the handle's embedder's when it is here and the tenant's
    input version is 1 (the memory's own text, which this process can build), or without any (queued).

    Vectors the handle made itself follow the tenant: if it switched model or input version since the handle
    last read them (PR155), the call is made again without them, when the failed one was a transaction of its
    own (autocommit, or none open); inside the caller's transaction the error is the caller's to handle."""
    if given is not None:
        if isinstance(cast(object, given), (str, bytes)):  # a Sequence too, typed or not
            raise errors.InvalidArgument(f"embeddings must be a list with one vector per item, not "
                                         f"{type(given).__name__}")
        if 0 < len(given) != len(items) and isinstance(given[0], (numbers.Real, np.number)):
            # counted as that many embeddings, it said "384 embeddings for 1 items"
            raise errors.InvalidArgument(f"embeddings is one vector of {len(given)} numbers, not one vector per item",
                                         hint="For one item: embeddings=[vector].")
        if len(given) != len(items):
            raise errors.InvalidArgument(f"{len(given)} embeddings for {len(items)} items: one per item, None for "
                                         "an item without one")
        return (yield from step(call([_as_vector(v) for v in given], model, version)))
    embedder = h.write_embedder if embed else None
    if embedder is None:
        return (yield from step(call(None, None, None)))
    stamp = yield from _tenant_stamp(h)
    if stamp != (embedder.name, 1):
        return (yield from step(call(None, None, None)))
    texts = [_own_text(item) for item in items]
    wanted = [i for i, text in enumerate(texts) if text.strip(_WHITESPACE)]
    made: Any = []
    try:
        if wanted:
            made = yield from offload(embedder.embed, [texts[i] for i in wanted])
    except ModelUnavailable:
        return (yield from step(call(None, None, None)))
    vectors: list[Vector | None] = [None] * len(items)
    for i, vector in zip(wanted, made):
        vectors[i] = _as_vector(vector)
    try:
        return (yield from step(call(vectors, embedder.name, 1)))
    except errors.WrongEmbeddingStamp:
        h.embedding_stamp = None
        state = yield from connection_state()
        if not (state.autocommit or state.idle):
            raise
        return (yield from step(call(None, None, None)))


def read(h: Handle, memory_id: int, *, purpose: str, include_superseded: bool = False,
         principal: str | None = None, scopes: Sequence[str] | None = None) -> Call[MemoryRecord]:
    """One memory with its provenance and revisions, if the principal may see it for ``purpose``
    (MemoryNotFound otherwise: missing and not visible are not told apart)."""
    principal, scopes = h.who(principal, scopes)
    return one("read", {"principal": principal, "scopes": scopes, "memory_id": memory_id, "purpose": purpose,
                        "include_superseded": include_superseded}, MemoryRecord)


def derive(h: Handle, sources_: Sequence[int], text: str, *, kind: str = "summary", title: str | None = None,
           confidence: float | None = None, about: Sequence[str] = (), widening_reason: str | None = None,
           principal: str | None = None, scopes: Sequence[str] | None = None) -> Call[int]:
    """A memory from other memories: it may be seen by, and used for, only what every source allows
    (EmptyIntersection when that is nothing), and reach no peer the sources' turns do not unless
    ``widening_reason`` says why (WiderThanEvidence). Returns the new memory's id."""
    principal, scopes = h.who(principal, scopes)
    return value("derive", {"principal": principal, "scopes": scopes, "sources": list(sources_), "body": text,
                            "kind": kind, "title": title, "confidence": confidence, "about": list(about),
                            "widening_reason": widening_reason}, int)


def correct(h: Handle, memory_id: int, text: str, *, revision: int, evidence: Sequence[int] | None = None,
            title: str | None = None, reason: str | None = None, widening_reason: str | None = None,
            principal: str | None = None, scopes: Sequence[str] | None = None) -> Call[int]:
    """Fix a memory in place; ``revision`` is the one you read (RevisionConflict if it moved on). Returns the
    new revision.

    ``evidence`` are the log offsets (in the memory's scope) of what justifies the correction; they join the
    memory's provenance, and erasing them undoes the correction. Evidence seen by fewer peers than the memory
    needs a ``widening_reason`` (WiderThanEvidence otherwise).
    """
    principal, scopes = h.who(principal, scopes)
    return value("correct", {"principal": principal, "scopes": scopes, "memory_id": memory_id,
                             "expected_revision": revision, "body": text, "title": title, "reason": reason,
                             "evidence": _list(evidence), "widening_reason": widening_reason}, int)


def supersede(h: Handle, memory_id: int, text: str, *, revision: int, evidence: Sequence[int],
              title: str | None = None, confidence: float | None = None, about: Sequence[str] | None = None,
              widening_reason: str | None = None, principal: str | None = None,
              scopes: Sequence[str] | None = None) -> Call[int]:
    """Replace a memory because the world changed. Returns the new memory's id.

    ``about`` names the new memory's entities; None keeps the old memory's. The new memory keeps the old
    audience: evidence seen by fewer peers needs a ``widening_reason`` (WiderThanEvidence otherwise).
    """
    principal, scopes = h.who(principal, scopes)
    return value("supersede", {"principal": principal, "scopes": scopes, "memory_id": memory_id,
                               "expected_revision": revision, "body": text, "evidence": _list(evidence),
                               "title": title, "confidence": confidence, "about": _list(about),
                               "widening_reason": widening_reason}, int)


def forget(h: Handle, memory_id: int, *, reason: str, revision: int | None = None, principal: str | None = None,
           scopes: Sequence[str] | None = None) -> Call[int]:
    """Invalidate a memory with a reason (not erasure: the row stays for review). Returns its revision."""
    principal, scopes = h.who(principal, scopes)
    return value("forget", {"principal": principal, "scopes": scopes, "memory_id": memory_id, "reason": reason,
                            "expected_revision": revision}, int)


# -- freshness ----------------------------------------------------------------------------------------------


def wait_for(h: Handle, offset: int, *, scope: str | None = None, projection: str = "embeddings",
             timeout: float = 5.0, principal: str | None = None, scopes: Sequence[str] | None = None) -> Call[bool]:
    """Block until the log or the embeddings are current to ``offset``; False on timeout."""
    principal, scopes = h.who(principal, scopes)
    timeout = boundary.finite_seconds("wait_for", "timeout", timeout, most=600)
    return value("wait_for", {"principal": principal, "scopes": scopes, "scope": scope or scopes[0],
                              "offset": offset, "projection": projection, "timeout_ms": int(timeout * 1000)}, bool)
