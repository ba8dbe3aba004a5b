"""Recall and message search: the query is embedded here (or given), then one stored function ranks in the
database and returns its items with the metadata of that very call.

A precomputed ``query_embedding`` is used as given, and then (with no re-rank hook) the operation is the one
Call, run without a Program around it; otherwise the handle's embedder runs (an :class:`Offload` step of
:func:`query_vector`, so the async driver runs it in a thread); an embedder that is down (ModelUnavailable)
leaves the dense arm out and the answer says why. The vector travels in binary as pgvector's type and is read
by the function as ``real[]``.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt
from pgvector import Vector

from .. import errors
from ..embedder import DIMENSIONS, ModelUnavailable
from ._calls import (
    REAL_ARRAY,
    Call,
    Cast,
    Handle,
    Operation,
    Program,
    json_list,
    json_object,
    offload,
    one,
    parse,
    step,
)
from ._generated import FactProvenance as FactProvenance  # re-exported
from ._generated import MessageHit as MessageHit  # re-exported
from ._generated import MessageSearchMeta as MessageSearchMeta
from ._generated import RecallItem as RecallItem  # re-exported
from ._generated import RecallMeta as RecallMeta

# -- row types ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Recalled:
    """Recall's answer: the items (after the permission walk) and the metadata of the same call."""

    items: list[RecallItem] = field(metadata=parse(json_list(RecallItem), composite=True))
    meta: RecallMeta = field(metadata=parse(json_object(RecallMeta), composite=True))

    @property
    def dense_available(self) -> bool:
        return self.meta.dense_available


@dataclass(frozen=True)
class MessagesFound:
    """search_messages' answer and the metadata of the same call."""

    items: list[MessageHit] = field(metadata=parse(json_list(MessageHit), composite=True))
    meta: MessageSearchMeta = field(metadata=parse(json_object(MessageSearchMeta), composite=True))

    @property
    def semantic_available(self) -> bool:
        return self.meta.semantic_available


# A re-rank hook: given the query and the items that passed the walk, return
# them (or a subset) in a new order. A local cross-encoder fits this shape.
Reranker = Callable[[str, list[RecallItem]], list[RecallItem]]

QueryEmbedding = Sequence[float] | npt.NDArray[Any]


# -- the embed-and-call step ----------------------------------------------------------------------------------


# pgvector-python (0.5) keeps a Vector's numbers as array('f'): a vector checked here is adopted as it is, where
# Vector(ndarray) would convert it again through numpy (cold between two recalls, 25 us of one; make bench-driver).
_ARRAY_BACKED = isinstance(getattr(Vector([0.0]), "_value", None), array)
_FLOAT32 = np.dtype(np.float32)  # the native one (a big-endian float32 is another dtype)


def _plain_vector(embedding: QueryEmbedding) -> Vector | None:
    """The vector of an embedding that is plainly DIMENSIONS finite numbers (a float32 numpy array, or a list of
    floats), checked with the fewest numpy calls: numpy's calls, cold between two recalls, cost a recall 60-100 us
    (make bench-driver); None for anything else, which :func:`as_vector` converts or refuses with numpy."""
    try:
        if type(embedding) is np.ndarray:
            if embedding.dtype is not _FLOAT32 or embedding.shape != (DIMENSIONS,):  # native float32 alone
                return None
            values = array("f", embedding.tobytes())  # its numbers in C order, whatever its strides
        elif isinstance(embedding, list):
            values = array("f", embedding)
        else:
            return None
    except (TypeError, ValueError, OverflowError):
        return None
    # a NaN or an infinity makes the sum NaN or infinite; 384 finite float32s cannot overflow a double
    if len(values) != DIMENSIONS or not math.isfinite(sum(values)):
        return None
    if not _ARRAY_BACKED:
        return Vector(values.tolist())
    vector = Vector.__new__(Vector)
    vector._value = values
    return vector


def as_vector(embedding: QueryEmbedding, what: str = "query_embedding") -> Vector:
    """A query embedding as pgvector's type: DIMENSIONS finite numbers (InvalidArgument otherwise)."""
    plain = _plain_vector(embedding)
    if plain is not None:
        return plain
    try:
        array = np.asarray(embedding, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise errors.InvalidArgument(f"{what} must be {DIMENSIONS} numbers, not {type(embedding).__name__}",
                                     hint="Pass a sequence of floats or a 1-D numpy array.") from exc
    if array.shape != (DIMENSIONS,):
        raise errors.InvalidArgument(f"{what} must be {DIMENSIONS} numbers, not an array of shape {array.shape}",
                                     hint=f"Embed the query with the tenant's model ({DIMENSIONS} dimensions).")
    if not bool(np.isfinite(array).all()):
        raise errors.InvalidArgument(f"{what} holds NaN or infinite numbers",
                                     hint="A query embedding is a unit-length vector of finite numbers.")
    return Vector(array)


def _embed(h: Handle, query: str) -> tuple[Vector | None, str | None]:
    try:
        embedder = h.embedder
        [vector] = embedder.embed([query or ""])
    except ModelUnavailable:
        return None, None
    return as_vector(vector, f"the vector of embedder {embedder.name!r}"), embedder.name


def query_vector(h: Handle, query: str, *, mode: str | None, embed: bool, query_embedding: QueryEmbedding | None,
                 query_model: str | None) -> Program[tuple[Vector | None, str | None]]:
    """The query's vector and the model that made it: the caller's, else the handle's embedder's, else none."""
    if not _embeds(mode, embed, query_embedding):
        return _unembedded(query_embedding, query_model)
    return (yield from offload(_embed, h, query))


def _embeds(mode: str | None, embed: bool, query_embedding: QueryEmbedding | None) -> bool:
    """Whether the query is embedded here (an Offload step): no vector was given and one is wanted."""
    return query_embedding is None and embed and mode != "lexical"


def _unembedded(query_embedding: QueryEmbedding | None,
                query_model: str | None) -> tuple[Vector | None, str | None]:
    """The query's vector when it is not embedded here: the caller's, or none."""
    if query_embedding is not None:
        return as_vector(query_embedding), query_model
    return None, None


def _reranked(rerank: Reranker, query: str, answer: Recalled) -> Recalled:
    reordered = rerank(query, list(answer.items))
    allowed = {(item.item, item.memory_id, item.fact_id) for item in answer.items}
    if any((item.item, item.memory_id, item.fact_id) not in allowed for item in reordered):
        raise ValueError("a re-rank hook may reorder or drop items, never add them")
    return Recalled(reordered, answer.meta)


# -- calls --------------------------------------------------------------------------------------------------


def recall(h: Handle, query: str, *, purpose: str = "converse", mode: str | None = None, limit: int = 10,
           include_superseded: bool = False, at: datetime | None = None, rerank: Reranker | None = None,
           embed: bool = True, query_embedding: QueryEmbedding | None = None, query_model: str | None = None,
           as_of: datetime | None = None, principal: str | None = None,
           scopes: Sequence[str] | None = None) -> Operation[Recalled]:
    """Ranked recall in the database, with the metadata of the same call.

    The query is embedded with the handle's embedder unless ``query_embedding`` (384 numbers, e.g. a numpy
    array; ``query_model`` names its model, which recall checks against the tenant's) is given. Without a
    model (or with ``embed=False``) the answer is lexical and ``dense_available`` is false: recall degrades,
    it does not fail. ``rerank`` may reorder or drop the items that passed the permission walk.
    ``as_of`` answers as the memory stood at that past moment (revisions, forgets, supersessions and facts
    as known then), under today's rules of who may see what; ``at`` asks what is valid at a time.
    """
    principal, scopes = h.who(principal, scopes)
    if rerank is None and not _embeds(mode, embed, query_embedding):  # one call, no step between: no Program
        vector, model = _unembedded(query_embedding, query_model)
        return _recall_call(principal, scopes, query, purpose, vector, mode, limit, include_superseded, at, model,
                            as_of)
    return _recall(h, query, principal, scopes, purpose, mode, limit, include_superseded, at, rerank, embed,
                   query_embedding, query_model, as_of)


def _recall_call(principal: str, scopes: list[str], query: str, purpose: str, vector: Vector | None,
                 mode: str | None, limit: int, include_superseded: bool, at: datetime | None, model: str | None,
                 as_of: datetime | None) -> Call[Recalled]:
    return one("recall_answer", {
        "principal": principal, "scopes": scopes, "query": query, "purpose": purpose,
        "query_embedding": Cast(vector, REAL_ARRAY), "mode": mode, "limit": limit,
        "include_superseded": include_superseded, "at": at, "query_model": model, "as_of": as_of}, Recalled)


def _recall(h: Handle, query: str, principal: str, scopes: list[str], purpose: str, mode: str | None, limit: int,
            include_superseded: bool, at: datetime | None, rerank: Reranker | None, embed: bool,
            query_embedding: QueryEmbedding | None, query_model: str | None,
            as_of: datetime | None) -> Program[Recalled]:
    """recall() as a Program: the query embedded (an Offload step), and/or the answer re-ranked."""
    vector, model = yield from query_vector(h, query, mode=mode, embed=embed, query_embedding=query_embedding,
                                            query_model=query_model)
    answer = yield from step(_recall_call(principal, scopes, query, purpose, vector, mode, limit,
                                          include_superseded, at, model, as_of))
    if rerank is not None and answer.items:
        answer = yield from offload(_reranked, rerank, query, answer)
    return answer


_recall.__name__ = "recall"  # a Program is named after its method in the errors raised while it is built


def search_messages(h: Handle, query: str, *, mode: str | None = None, session_id: int | None = None,
                    peer: str | None = None, limit: int = 10, embed: bool = True,
                    query_embedding: QueryEmbedding | None = None, query_model: str | None = None,
                    principal: str | None = None, scopes: Sequence[str] | None = None) -> Operation[MessagesFound]:
    """Search the passages of the log in every authorised scope, one session (``session_id``) or what one
    peer sent (``peer``): lexical and/or semantic as the tenant's settings allow, fused by RRF.

    The query is embedded as for recall (or ``query_embedding`` is used); without a model the answer is
    lexical and ``semantic_available`` is false.
    """
    principal, scopes = h.who(principal, scopes)
    if not _embeds(mode, embed, query_embedding):  # one call: no Program
        vector, model = _unembedded(query_embedding, query_model)
        return _search_call(principal, scopes, query, vector, mode, session_id, peer, limit, model)
    return _search_messages(h, query, principal, scopes, mode, session_id, peer, limit)


def _search_call(principal: str, scopes: list[str], query: str, vector: Vector | None, mode: str | None,
                 session_id: int | None, peer: str | None, limit: int, model: str | None) -> Call[MessagesFound]:
    return one("search_messages_answer", {
        "principal": principal, "scopes": scopes, "query": query, "query_embedding": Cast(vector, REAL_ARRAY),
        "mode": mode, "session_id": session_id, "peer": peer, "limit": limit, "query_model": model},
        MessagesFound)


def _search_messages(h: Handle, query: str, principal: str, scopes: list[str], mode: str | None,
                     session_id: int | None, peer: str | None, limit: int) -> Program[MessagesFound]:
    """search_messages() as a Program: the query embedded (an Offload step), then the call."""
    vector, model = yield from offload(_embed, h, query)
    return (yield from step(_search_call(principal, scopes, query, vector, mode, session_id, peer, limit, model)))


_search_messages.__name__ = "search_messages"
