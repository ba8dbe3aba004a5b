"""The Python driver: each method calls one stored function of the tenant.

>>> import pgrecall
>>> mem = pgrecall.connect(tenant="acme", principal="assistant", scopes=["default"])
>>> offset = mem.append("I live in Lisbon", role="user", actor="ana")
>>> mem.remember("Ana lives in Lisbon", evidence=[offset], purposes=["converse"])

Nothing connects at import time and nothing here runs DDL: a tenant is
created with ``pgrecall tenant create`` (or pgrecall.create_tenant() in SQL).
"""

from __future__ import annotations

import functools
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Iterator, NoReturn, Sequence

import psycopg
from psycopg import sql
from psycopg.adapt import PyFormat
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from . import boundary, db, errors, sources
from .names import check_tenant_name

def _named_arguments(args: dict) -> sql.Composed:
    """``p_name => %(name)s, ...``; a query embedding goes in binary: as text its 384 numbers cost
    more to format and parse (~1.2 ms a call, measured) than the rest of the round trip."""
    return sql.SQL(", ").join(
        sql.SQL("{} => {}").format(sql.Identifier("p_" + n),
                                   sql.Placeholder(n, PyFormat.BINARY if n == "query_embedding" else PyFormat.AUTO))
        for n in args)


@dataclass(frozen=True)
class Remembered:
    memory_id: int | None
    status: str  # 'created' or 'noop'
    reason: str | None

    @property
    def created(self) -> bool:
        return self.status == "created"


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
    valid: Any
    provenance: dict
    revisions: list[dict]


@dataclass(frozen=True)
class RecallItem:
    rank: int
    memory_id: int | None   # None for a fact row
    scope: str
    kind: str
    title: str | None
    body: str
    score: float
    lexical_rank: int | None
    dense_rank: int | None
    cosine: float | None
    bm25: float | None
    provenance: dict        # a fact row: subject, predicate, object, valid and its evidence
    item: str = "memory"    # memory, or fact: a fact about an entity the query names
    fact_id: int | None = None
    fact_rank: int | None = None


@dataclass(frozen=True)
class Recalled:
    """Recall's answer: the items (after the permission walk) and the metadata.

    ``meta`` holds the counts taken after the walk, the dropped terms,
    ``dense_available`` (and why not), missing embeddings and watermarks.
    """

    items: list[RecallItem]
    meta: dict

    @property
    def dense_available(self) -> bool:
        return bool(self.meta.get("dense_available"))


@dataclass(frozen=True)
class MessageAdded:
    offset: int
    tasks: int  # derivation tasks queued for it


@dataclass(frozen=True)
class Turn:
    session_id: int
    offset: int
    opened: bool  # a new session was opened for this turn


@dataclass(frozen=True)
class Task:
    """A leased derivation task, as claim_tasks() hands it out."""

    task_id: int
    lease_token: Any
    task_type: str  # 'representation' or 'summary'
    session_id: int
    scope: str
    sender: str | None  # whose message (the peer represented)
    observer: str | None  # None: the sender's global representation
    message_offset: int
    messages: list[dict]
    attempts: int
    lease_until: datetime


@dataclass(frozen=True)
class MessageHit:
    """One passage found by search_messages: where it is in the log, its text and byte span, and its ranks."""

    rank: int
    scope: str
    log_offset: int
    session_id: int | None
    actor: str
    source_role: str
    kind: str
    occurred_at: datetime
    passage_id: int
    ordinal: int
    start_byte: int
    end_byte: int
    body: str
    score: float
    lexical_rank: int | None
    semantic_rank: int | None
    bm25: float | None
    cosine: float | None


@dataclass(frozen=True)
class MessagesFound:
    """search_messages' answer; ``meta`` says which arms ran and, if the semantic one did not, why."""

    items: list[MessageHit]
    meta: dict

    @property
    def semantic_available(self) -> bool:
        return bool(self.meta.get("semantic_available"))


# A re-rank hook: given the query and the items that passed the walk, return
# them (or a subset) in a new order. A local cross-encoder fits this shape.
Reranker = Callable[[str, list[RecallItem]], list[RecallItem]]


@dataclass(frozen=True)
class AssertedFact:
    fact_id: int
    outcome: str            # inserted, superseded (closed contradicting facts) or confirmed (already known)
    closed_facts: list[int]


@dataclass(frozen=True)
class FactRow:
    fact_id: int
    subject: str
    predicate: str
    object: str
    statement: str
    valid: Any
    known: Any
    confidence: float
    salience: float
    observer: str | None
    evidence: list[dict]


@dataclass(frozen=True)
class DuplicateSide:
    """One memory of a proposed pair, as the reviewer is shown it."""

    id: int
    scope: str
    kind: str
    title: str | None
    body: str
    revision: int
    created_at: datetime
    audience: str | None
    purposes: list[str]
    provenance: dict        # as read() gives it: the turns it came from (speaker, time), visible sources, entities


@dataclass(frozen=True)
class DuplicatePair:
    """Two memories similar enough to be shown to a person: ``a`` is the older one."""

    rank: int
    cosine: float
    a: DuplicateSide
    b: DuplicateSide
    b_may_replace_a: bool   # b reaches everyone a reaches, for every purpose: "supersede a by b" is allowed
    a_may_replace_b: bool


@dataclass(frozen=True)
class DuplicateProposals:
    """duplicate_proposals' answer; ``meta`` says which window was compared and, if nothing is proposed, why
    (``empty_reason``: no_memories, one_memory, no_embeddings, below_threshold, all_decided)."""

    pairs: list[DuplicatePair]
    meta: dict


@dataclass(frozen=True)
class DuplicateDecision:
    decision_id: int
    decision: str                 # distinct, supersede or forget
    retired_memory: int | None    # the memory superseded or forgotten (a); None when both are kept
    retired_revision: int | None  # its revision now


def _duplicate_pair(item: dict) -> DuplicatePair:
    def side(prefix: str) -> DuplicateSide:
        fields = {f: item[f"{prefix}_{f}"] for f in ("id", "scope", "kind", "title", "body", "revision",
                                                      "created_at", "audience", "purposes", "provenance")}
        fields["created_at"] = datetime.fromisoformat(fields["created_at"])
        return DuplicateSide(**fields)

    return DuplicatePair(item["rank"], item["cosine"], side("a"), side("b"), item["b_may_replace_a"],
                         item["a_may_replace_b"])


def dict_row_type(**kwargs) -> dict:
    return dict(kwargs)


def _raise(where: str, exc: psycopg.Error, args: dict | None = None) -> NoReturn:
    """Raise the pgrecall error for a failed statement (see boundary.call_error), or a non-input failure as it is."""
    err = boundary.call_error(where, exc, args)
    if err is exc:
        raise exc
    raise err from exc


def _guard_input(cls: type) -> type:
    """Every public method of ``cls`` raises InvalidArgument, not Python's TypeError or AttributeError, when it
    trips over a caller's argument while preparing its call; pgrecall's own errors pass through."""
    for name, fn in list(vars(cls).items()):
        if name.startswith("_") or not callable(fn) or isinstance(fn, (staticmethod, classmethod, type)):
            continue

        def guarded(self, *args, _fn=fn, _name=name, **kwargs):
            try:
                return _fn(self, *args, **kwargs)
            except errors.PgrecallError:
                raise
            except boundary.PYTHON_INPUT_ERRORS as exc:
                raise boundary.bad_input(_name, exc) from exc

        setattr(cls, name, functools.wraps(fn)(guarded))
    return cls


@_guard_input
class Memory:
    """A handle on one tenant, acting for a principal over a set of authorised scopes.

    ``principal`` and ``scopes`` given here are defaults; every method accepts
    them as keyword arguments too.
    """

    def __init__(self, tenant: str, *, conn: psycopg.Connection | None = None, pool=None,
                 conninfo: str | None = None, principal: str | None = None,
                 scopes: Sequence[str] | None = None, role: str = "app"):
        check_tenant_name(tenant)
        if sum(x is not None for x in (conn, pool, conninfo)) > 1:
            raise ValueError("pass at most one of conn, pool and conninfo")
        self.tenant = tenant
        self.principal = principal
        self.scopes = list(scopes) if scopes is not None else None
        self._conn = conn
        self._pool = pool
        self._owns_conn = False
        if conn is None and pool is None:
            self._conn = _open(conninfo or db.tenant_conninfo(tenant, role), tenant, role)
            self._owns_conn = True
        self._check_schema()

    # -- plumbing -------------------------------------------------------------

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection]:
        if self._pool is not None:
            with self._pool.connection() as conn:
                yield conn
        else:
            yield self._conn

    def _call(self, function: str, args: dict[str, Any], *, row_type=None, many: bool = False):
        """SELECT * FROM tenant.function(p_name => %(name)s, ...) with named parameters."""
        names = list(args)
        query = sql.SQL("select * from {}.{}({})").format(
            sql.Identifier(self.tenant), sql.Identifier(function),
            sql.SQL(", ").join(sql.SQL("{} => {}").format(sql.Identifier("p_" + n), sql.Placeholder(n)) for n in names),
        )
        params = args
        boundary.check_arguments(function, args)
        try:
            with self._connection() as conn:
                with conn.cursor(row_factory=class_row(row_type) if row_type else psycopg.rows.tuple_row) as cur:
                    cur.execute(query, params)
                    return cur.fetchall() if many else cur.fetchone()
        except psycopg.Error as exc:
            _raise(function, exc, args)

    def _answer(self, function: str, args: dict) -> tuple[list[dict], dict]:
        """One call of an *_answer function: its items (JSON objects) and the metadata of that very call."""
        query = sql.SQL("select items, meta from {}.{}({})").format(
            sql.Identifier(self.tenant), sql.Identifier(function), _named_arguments(args))
        boundary.check_arguments(function, args)
        try:
            with self._connection() as conn:
                return conn.execute(query, args).fetchone()
        except psycopg.Error as exc:
            _raise(function, exc, args)

    def _who(self, principal, scopes) -> tuple[str, list[str]]:
        principal = principal if principal is not None else self.principal
        scopes = list(scopes) if scopes is not None else self.scopes
        if principal is None:
            raise errors.UnknownPeer("no principal: pass principal= to connect() or to the call")
        if not scopes:
            raise errors.ScopeNotAuthorised("no authorised scopes: pass scopes= to connect() or to the call")
        return principal, scopes

    def _check_schema(self) -> None:
        try:
            row = self._call("schema_info", {})
        except psycopg.errors.InvalidSchemaName as exc:
            raise errors.TenantNotFound(f"tenant {self.tenant!r} is not installed in this database",
                                        hint=f"Create it: pgrecall tenant create {self.tenant}") from exc
        except errors.NotPermitted as exc:
            raise errors.TenantNotFound(f"this role may not use tenant {self.tenant!r}",
                                        hint=f"Connect as one of pgrecall_{self.tenant}_app, _worker or _admin.") from exc
        version = row[1]
        if version is None or version < sources.latest_version():
            raise errors.SchemaOutOfDate(
                f"tenant {self.tenant!r} is at migration {version}, this driver needs {sources.latest_version()}",
                hint=f"Upgrade it: pgrecall tenant upgrade {self.tenant}")

    def close(self) -> None:
        if self._owns_conn and self._conn is not None:
            self._conn.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- setup ----------------------------------------------------------------

    def add_scope(self, name: str, description: str | None = None) -> str:
        return self._call("add_scope", {"name": name, "description": description})[0]

    def add_peer(self, name: str, kind: str = "human", metadata: dict | None = None, *,
                 data_subject_id: str | None = None) -> int:
        """Create a peer (or merge metadata into it); returns its id. With ``data_subject_id``, erasing that
        subject anonymises the peer (its name and metadata are the subject's personal data)."""
        return self._call("add_peer", {"name": name, "kind": kind, "metadata": Jsonb(metadata or {}),
                                       "data_subject_id": data_subject_id})[0]

    # -- the log --------------------------------------------------------------

    def append(self, text: str, *, role: str, scope: str | None = None, kind: str = "message",
               actor: str | None = None, session_id: int | None = None, occurred_at: datetime | None = None,
               payload: dict | None = None, data_subject_id: str | None = None, lawful_basis: str | None = None,
               classification: str = "internal", retention_until: datetime | None = None,
               principal: str | None = None, scopes: Sequence[str] | None = None) -> int:
        """Append an observation; returns its log offset in the scope."""
        principal, scopes = self._who(principal, scopes)
        return self._call("append_observation", {
            "principal": principal, "scopes": scopes, "scope": scope or scopes[0], "body": text,
            "source_role": role, "kind": kind, "actor": actor, "session_id": session_id,
            "occurred_at": occurred_at, "payload": Jsonb(payload or {}), "data_subject_id": data_subject_id,
            "lawful_basis": lawful_basis, "classification": classification, "retention_until": retention_until,
        })[0]

    def append_many(self, rows: Sequence[dict], *, scope: str | None = None, principal: str | None = None,
                    scopes: Sequence[str] | None = None) -> list[int]:
        """Append a batch in one call; each row is a dict with body and source_role (and optionally kind,
        actor, session_id, occurred_at, payload, data_subject_id, lawful_basis, classification,
        retention_until). All are validated before any is written. Returns the offsets in order."""
        principal, scopes = self._who(principal, scopes)
        rows = [{k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in r.items()} for r in rows]
        result = self._call("append_observations", {"principal": principal, "scopes": scopes,
                                                    "scope": scope or scopes[0], "rows": Jsonb(rows)}, many=True)
        return [r[1] for r in result]

    def watermark(self, scope: str | None = None, *, principal: str | None = None,
                  scopes: Sequence[str] | None = None) -> int:
        principal, scopes = self._who(principal, scopes)
        return self._call("log_watermark", {"principal": principal, "scopes": scopes, "scope": scope or scopes[0]})[0]

    # -- memories -------------------------------------------------------------

    def remember(self, text: str, *, evidence: Sequence[int], purposes: Sequence[str], scope: str | None = None,
                 audience: str | None = None, kind: str = "note", title: str | None = None,
                 confidence: float = 1.0, about: Sequence[str] = (), observer: str | None = None,
                 principal: str | None = None, scopes: Sequence[str] | None = None) -> Remembered:
        """Write a memory. ``observer`` makes it that peer's local view (None: the global view)."""
        principal, scopes = self._who(principal, scopes)
        args = {
            "principal": principal, "scopes": scopes, "scope": scope or scopes[0], "body": text,
            "evidence": list(evidence) if evidence is not None else None,
            "purposes": list(purposes) if purposes is not None else None, "audience": audience, "kind": kind,
            "title": title, "confidence": confidence, "about": list(about),
        }
        if observer is not None:
            args["observer"] = observer
        return self._call("remember", args, row_type=Remembered)

    def remember_many(self, items: Sequence[dict], *, scope: str | None = None, principal: str | None = None,
                      scopes: Sequence[str] | None = None) -> list[Remembered]:
        """remember() for a batch: each item a dict with body, evidence, purposes (and optionally audience,
        kind, title, confidence, about, observer). Validated whole before anything is written; one result per item."""
        principal, scopes = self._who(principal, scopes)
        rows = self._call("remember_many", {"principal": principal, "scopes": scopes, "scope": scope or scopes[0],
                                            "items": Jsonb(list(items))}, many=True)
        return [Remembered(r[1], r[2], r[3]) for r in rows]

    def read(self, memory_id: int, *, purpose: str, include_superseded: bool = False,
             principal: str | None = None, scopes: Sequence[str] | None = None) -> MemoryRecord:
        principal, scopes = self._who(principal, scopes)
        return self._call("read", {"principal": principal, "scopes": scopes, "memory_id": memory_id,
                                   "purpose": purpose, "include_superseded": include_superseded},
                          row_type=MemoryRecord)

    def derive(self, sources_: Sequence[int], text: str, *, kind: str = "summary", title: str | None = None,
               confidence: float | None = None, about: Sequence[str] = (), principal: str | None = None,
               scopes: Sequence[str] | None = None) -> int:
        principal, scopes = self._who(principal, scopes)
        return self._call("derive", {"principal": principal, "scopes": scopes, "sources": list(sources_),
                                     "body": text, "kind": kind, "title": title, "confidence": confidence,
                                     "about": list(about)})[0]

    def correct(self, memory_id: int, text: str, *, revision: int, evidence: Sequence[int] | None = None,
                title: str | None = None, reason: str | None = None, principal: str | None = None,
                scopes: Sequence[str] | None = None) -> int:
        """Fix a memory in place; ``revision`` is the one you read. Returns the new revision.

        ``evidence`` are the log offsets (in the memory's scope) of what justifies the correction; they join
        the memory's provenance, and erasing them undoes the correction.
        """
        principal, scopes = self._who(principal, scopes)
        return self._call("correct", {"principal": principal, "scopes": scopes, "memory_id": memory_id,
                                      "expected_revision": revision, "body": text, "title": title,
                                      "reason": reason,
                                      "evidence": list(evidence) if evidence is not None else None})[0]

    def supersede(self, memory_id: int, text: str, *, revision: int, evidence: Sequence[int],
                  title: str | None = None, confidence: float | None = None, about: Sequence[str] | None = None,
                  principal: str | None = None, scopes: Sequence[str] | None = None) -> int:
        """Replace a memory because the world changed. Returns the new memory's id.

        ``about`` names the new memory's entities; None keeps the old memory's.
        """
        principal, scopes = self._who(principal, scopes)
        return self._call("supersede", {"principal": principal, "scopes": scopes, "memory_id": memory_id,
                                        "expected_revision": revision, "body": text,
                                        "evidence": list(evidence) if evidence is not None else None,
                                        "title": title, "confidence": confidence,
                                        "about": list(about) if about is not None else None})[0]

    def duplicate_proposals(self, *, limit: int = 20, principal: str | None = None,
                            scopes: Sequence[str] | None = None) -> DuplicateProposals:
        """Pairs of current memories the principal may see for a common purpose, among its newest
        ``duplicate_window``, with cosine >= ``duplicate_cosine`` and not yet decided; best first.
        Nothing is merged: a person decides with :meth:`decide_duplicate`."""
        principal, scopes = self._who(principal, scopes)
        items, meta = self._answer("duplicate_proposals_answer",
                                   {"principal": principal, "scopes": scopes, "limit": limit})
        return DuplicateProposals([_duplicate_pair(i) for i in items], meta)

    def decide_duplicate(self, a: int, b: int, decision: str, *, reason: str, revision_a: int | None = None,
                         revision_b: int | None = None, principal: str | None = None,
                         scopes: Sequence[str] | None = None) -> DuplicateDecision:
        """Record a person's decision about a pair: ``distinct`` (keep both), ``supersede`` (b replaces a) or
        ``forget`` (a). Pass the revisions you were shown; someone deciding first is DuplicateDecided."""
        principal, scopes = self._who(principal, scopes)
        return self._call("decide_duplicate", {"principal": principal, "scopes": scopes, "a": a, "b": b,
                                               "decision": decision, "reason": reason, "revision_a": revision_a,
                                               "revision_b": revision_b}, row_type=DuplicateDecision)

    def recall(self, query: str, *, purpose: str = "converse", mode: str | None = None, limit: int = 10,
               include_superseded: bool = False, at: datetime | None = None, rerank: Reranker | None = None,
               embed: bool = True, principal: str | None = None, scopes: Sequence[str] | None = None) -> Recalled:
        """Ranked recall in the database; the query is embedded here when the model is available.

        Without the model (or with ``embed=False``) the answer is lexical and
        ``dense_available`` is false: recall degrades, it does not fail.
        """
        principal, scopes = self._who(principal, scopes)
        vector, model = None, None
        if embed and mode != "lexical":
            from .embedder import ModelUnavailable, get_embedder

            try:
                embedder = get_embedder()
                vector, model = embedder.embed([query or ""])[0], embedder.name
            except ModelUnavailable:
                vector = None
        args = {"principal": principal, "scopes": scopes, "query": query, "purpose": purpose,
                "query_embedding": vector, "mode": mode, "limit": limit,
                "include_superseded": include_superseded, "at": at, "query_model": model}
        items, meta = self._answer("recall_answer", args)
        items = [RecallItem(**item) for item in items]
        if rerank is not None and items:
            reordered = rerank(query, list(items))
            allowed = {item.memory_id for item in items}
            if any(item.memory_id not in allowed for item in reordered):
                raise ValueError("a re-rank hook may reorder or drop items, never add them")
            items = reordered
        return Recalled(items, meta)

    def search_messages(self, query: str, *, mode: str | None = None, session_id: int | None = None,
                        peer: str | None = None, limit: int = 10, embed: bool = True,
                        principal: str | None = None, scopes: Sequence[str] | None = None) -> MessagesFound:
        """Search the passages of the log in every authorised scope, one session (``session_id``) or what one
        peer sent (``peer``): lexical and/or semantic as the tenant's settings allow, fused by RRF.

        The query is embedded here when the model is available; without it the answer is lexical and
        ``semantic_available`` is false.
        """
        principal, scopes = self._who(principal, scopes)
        vector, model = None, None
        if embed and mode != "lexical":
            from .embedder import ModelUnavailable, get_embedder

            try:
                embedder = get_embedder()
                vector, model = embedder.embed([query or ""])[0], embedder.name
            except ModelUnavailable:
                vector = None
        args = {"principal": principal, "scopes": scopes, "query": query, "query_embedding": vector, "mode": mode,
                "session_id": session_id, "peer": peer, "limit": limit, "query_model": model}
        items, meta = self._answer("search_messages_answer", args)
        items = [MessageHit(**{**hit, "occurred_at": datetime.fromisoformat(hit["occurred_at"])}) for hit in items]
        return MessagesFound(items, meta)

    def session_bundle(self, *, purpose: str = "converse", recent: int = 10, entities: int = 5,
                       session: int | None = None, principal: str | None = None,
                       scopes: Sequence[str] | None = None) -> dict:
        """What an agent starts with; with ``session``, also its working representation there."""
        principal, scopes = self._who(principal, scopes)
        return self._call("session_bundle", {"principal": principal, "scopes": scopes, "purpose": purpose,
                                             "recent": recent, "entities": entities, "session": session})[0]

    def pin(self, memory_id: int, pinned: bool = True, *, principal: str | None = None,
            scopes: Sequence[str] | None = None) -> bool:
        principal, scopes = self._who(principal, scopes)
        return self._call("pin", {"principal": principal, "scopes": scopes, "memory_id": memory_id,
                                  "pinned": pinned})[0]

    def embedding_status(self) -> dict:
        row = self._call("embedding_status", {})
        return dict(zip(("queued", "leased", "current", "stale", "model", "input_version",
                         "passages_queued", "passages_current", "passages_stale"), row))

    def freshness(self, scope: str | None = None, *, principal: str | None = None,
                  scopes: Sequence[str] | None = None) -> dict:
        principal, scopes = self._who(principal, scopes)
        row = self._call("freshness", {"principal": principal, "scopes": scopes, "scope": scope or scopes[0]})
        return dict(zip(("scope", "log_watermark", "embeddings_current_to", "embedding_jobs"), row))

    def wait_for(self, offset: int, *, scope: str | None = None, projection: str = "embeddings",
                 timeout: float = 5.0, principal: str | None = None, scopes: Sequence[str] | None = None) -> bool:
        """Block until the log or the embeddings are current to ``offset``; False on timeout."""
        principal, scopes = self._who(principal, scopes)
        timeout = boundary.finite_seconds("wait_for", "timeout", timeout, most=600)
        return self._call("wait_for", {"principal": principal, "scopes": scopes, "scope": scope or scopes[0],
                                       "offset": offset, "projection": projection,
                                       "timeout_ms": int(timeout * 1000)})[0]

    # -- the back office (the admin role) ---------------------------------------

    def erase(self, selector: dict, *, reason: str, actor: str, requested_by: str | None = None) -> dict:
        """Erase an observation, a data subject, a peer or a scope, and everything derived from it (admin role).

        ``actor`` is who runs it (recorded in the receipt with the login role). Returns the receipt: rows
        erased and the residual per projection kind (zeros when it worked).
        """
        query = sql.SQL("select to_jsonb(r) from {}.erase(%s, %s, %s, %s) r").format(sql.Identifier(self.tenant))
        try:
            with self._connection() as conn:
                return conn.execute(query, (actor, Jsonb(selector), reason, requested_by)).fetchone()[0]
        except psycopg.Error as exc:
            _raise("erase", exc)

    def expire(self, *, actor: str = "expiry gate") -> list[dict]:
        """With the tenant's expiry gate on, erase what passed its retention date (admin role); the receipts."""
        query = sql.SQL("select to_jsonb(r) from {}.expire(%s) r").format(sql.Identifier(self.tenant))
        try:
            with self._connection() as conn:
                return [r[0] for r in conn.execute(query, (actor,)).fetchall()]
        except psycopg.Error as exc:
            _raise("statement", exc)

    def refresh_erasure_statistics(self, request_id: int) -> dict:
        """ANALYZE the tables an erasure touched, so that the planner statistics (``pg_stats``) hold none of
        the erased values, and stamp the receipt (``statistics_refreshed_at``). Call it after the erasure
        committed (admin role); returns the receipt."""
        query = sql.SQL("select to_jsonb(r) from {}.refresh_erasure_statistics(%s) r").format(
            sql.Identifier(self.tenant))
        try:
            with self._connection() as conn:
                return conn.execute(query, (request_id,)).fetchone()[0]
        except psycopg.Error as exc:
            _raise("statement", exc)

    def vacuum_erased(self, receipt: dict) -> list[str]:
        """VACUUM the tables an erasure touched, so that their dead rows (which still hold the erased
        values) are removed from the table and its indexes; returns the tables vacuumed.

        VACUUM needs the MAINTAIN privilege (PostgreSQL 17+; the control plane grants it on a tenant's
        tables to its admin role) or the tables' owner, and a connection outside a transaction. Raises
        :class:`errors.NotPermitted` (naming what is missing) before vacuuming anything otherwise.
        """
        tables = list(receipt.get("tables_touched") or [])
        with self._connection() as conn:
            if not conn.autocommit or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                raise errors.InvalidArgument("VACUUM cannot run inside a transaction",
                                             hint="Use an autocommit connection, as pgrecall.connect() opens.")
            if not tables:
                return []
            version = conn.info.server_version
            try:
                allowed = dict(conn.execute(
                    sql.SQL("select t, pg_has_role(c.relowner, 'USAGE') {} "
                            "from unnest(%s::text[]) t join pg_class c on c.relname = t "
                            "and c.relnamespace = {}::regnamespace").format(
                        sql.SQL("or has_table_privilege(c.oid, 'MAINTAIN')") if version >= 170000 else sql.SQL(""),
                        sql.Literal(self.tenant)),
                    (tables,)).fetchall())
            except psycopg.Error as exc:
                _raise("statement", exc)
            missing = [t for t in tables if not allowed.get(t, True)]
            if missing:
                raise errors.NotPermitted(
                    f"cannot VACUUM {', '.join(missing)}: this role is not their owner"
                    + ("" if version >= 170000 else f" and PostgreSQL {version // 10000} has no MAINTAIN privilege"),
                    hint="Run VACUUM on them as the tenant's owner or a superuser"
                         + (", or upgrade the tenant (pgrecall tenant upgrade) to grant MAINTAIN to its admin role."
                            if version >= 170000 else "; PostgreSQL 17+ lets the admin role do it (MAINTAIN)."))
            present = [t for t in tables if t in allowed]
            try:
                conn.execute(sql.SQL("vacuum {}").format(sql.SQL(", ").join(
                    sql.Identifier(self.tenant, t) for t in present)))
            except psycopg.Error as exc:
                _raise("statement", exc)
            return present

    def erasure_requests(self, limit: int = 20) -> list[dict]:
        """The newest erasure receipts (admin role)."""
        query = sql.SQL("select to_jsonb(r) from {}.erasure_requests(%s) r").format(sql.Identifier(self.tenant))
        try:
            with self._connection() as conn:
                return [r[0] for r in conn.execute(query, (limit,)).fetchall()]
        except psycopg.Error as exc:
            _raise("statement", exc)

    def rebuild_embeddings(self, everything: bool = False) -> int:
        """Queue missing or stale embeddings (all of them with ``everything``) for the worker (admin role)."""
        return self._call("rebuild_embeddings", {"everything": everything})[0]

    def set_embedding_version(self, model: str, input_version: int) -> int:
        """Switch the embedding model or input version; queues everything (admin role). Returns jobs queued."""
        return self._call("set_embedding_version", {"model": model, "input_version": input_version})[0]

    def settings(self) -> dict:
        """The tenant's settings as {key: value}."""
        return {key: value for key, value, _ in self._call("settings", {}, many=True)}

    def set_setting(self, key: str, value: Any) -> Any:
        """Change one setting (admin role); the value must have the current one's JSON type and pass its range."""
        return self._call("set_setting", {"key": key, "value": Jsonb(value)})[0]

    def refresh_term_stats(self) -> dict:
        """Recompute the lexical statistics (worker or admin role)."""
        row = self._call("refresh_term_stats", {})
        return {"documents": row[0], "terms": row[1]}

    # --- the graph -------------------------------------------------------

    def assert_fact(self, subject: str, predicate: str, object_: str, *, evidence: Sequence[dict],
                    statement: str | None = None, valid_from: datetime | None = None,
                    valid_to: datetime | None = None, confidence: float = 1.0, observer: str | None = None,
                    audience: str | None = None, purposes: Sequence[str] | None = None,
                    subject_type: str | None = None, object_type: str | None = None, scope: str | None = None,
                    principal: str | None = None, scopes: Sequence[str] | None = None) -> AssertedFact:
        """Assert a fact with evidence: each item {"offset": n, "quote": "..."} and optionally "start"/"end"
        UTF-8 byte offsets. A single-valued predicate's overlapping current value is closed, not overwritten."""
        principal, scopes = self._who(principal, scopes)
        return self._call("assert_fact", {
            "principal": principal, "scopes": scopes, "scope": scope or scopes[0], "subject": subject,
            "predicate": predicate, "object": object_, "evidence": Jsonb(list(evidence)), "statement": statement,
            "valid_from": valid_from, "valid_to": valid_to, "confidence": confidence, "observer": observer,
            "audience": audience, "purposes": list(purposes) if purposes is not None else None,
            "subject_type": subject_type, "object_type": object_type}, row_type=AssertedFact)

    def assert_facts(self, items: Sequence[dict], *, scope: str | None = None, principal: str | None = None,
                     scopes: Sequence[str] | None = None) -> list[AssertedFact]:
        """assert_fact() for a batch: dicts with subject, predicate, object, evidence (and the optional
        keyword arguments of assert_fact). In order, all-or-nothing; one result per item."""
        principal, scopes = self._who(principal, scopes)
        items = [{k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in i.items()} for i in items]
        rows = self._call("assert_facts", {"principal": principal, "scopes": scopes, "scope": scope or scopes[0],
                                           "items": Jsonb(items)}, many=True)
        return [AssertedFact(r[1], r[2], r[3]) for r in rows]

    def retract_fact(self, fact_id: int, *, reason: str, principal: str | None = None,
                     scopes: Sequence[str] | None = None):
        principal, scopes = self._who(principal, scopes)
        return self._call("retract_fact", {"principal": principal, "scopes": scopes, "fact_id": fact_id,
                                           "reason": reason})

    def facts_as_of(self, subject: str, predicate: str | None = None, *, valid_at: datetime | None = None,
                    known_at: datetime | None = None, purpose: str = "converse", principal: str | None = None,
                    scopes: Sequence[str] | None = None) -> list[FactRow]:
        """What was true of ``subject`` at ``valid_at`` as believed at ``known_at`` (defaults: now)."""
        principal, scopes = self._who(principal, scopes)
        return self._call("facts_as_of", {"principal": principal, "scopes": scopes, "subject": subject,
                                          "predicate": predicate, "valid_at": valid_at, "known_at": known_at,
                                          "purpose": purpose}, row_type=FactRow, many=True)

    def neighbourhood(self, seeds: Sequence[str], *, hops: int = 2, valid_at: datetime | None = None,
                      known_at: datetime | None = None, purpose: str = "converse", principal: str | None = None,
                      scopes: Sequence[str] | None = None) -> list[dict]:
        principal, scopes = self._who(principal, scopes)
        rows = self._call("neighbourhood", {"principal": principal, "scopes": scopes, "seeds": list(seeds),
                                            "hops": hops, "valid_at": valid_at, "known_at": known_at,
                                            "purpose": purpose}, row_type=dict_row_type, many=True)
        return rows

    def resolve_citation(self, fact_id: int, *, principal: str | None = None,
                         scopes: Sequence[str] | None = None) -> list[dict]:
        principal, scopes = self._who(principal, scopes)
        return self._call("resolve_citation", {"principal": principal, "scopes": scopes, "fact_id": fact_id},
                          row_type=dict_row_type, many=True)

    def merge_entities(self, keep: str, absorb: str, *, scope: str | None = None, principal: str | None = None,
                       scopes: Sequence[str] | None = None) -> dict:
        principal, scopes = self._who(principal, scopes)
        return self._call("merge_entities", {"principal": principal, "scopes": scopes, "scope": scope or scopes[0],
                                             "keep": keep, "absorb": absorb}, row_type=dict_row_type)

    def add_entity_alias(self, entity: str, alias: str, *, scope: str | None = None,
                         data_subject_id: str | None = None, principal: str | None = None,
                         scopes: Sequence[str] | None = None) -> dict:
        """Another name for an entity. With ``data_subject_id``, erasing that subject removes the alias."""
        principal, scopes = self._who(principal, scopes)
        return self._call("add_entity_alias", {"principal": principal, "scopes": scopes, "scope": scope or scopes[0],
                                               "entity": entity, "alias": alias, "data_subject_id": data_subject_id},
                          row_type=dict_row_type)

    def forget(self, memory_id: int, *, reason: str, revision: int | None = None, principal: str | None = None,
               scopes: Sequence[str] | None = None) -> int:
        principal, scopes = self._who(principal, scopes)
        return self._call("forget", {"principal": principal, "scopes": scopes, "memory_id": memory_id,
                                     "reason": reason, "expected_revision": revision})[0]


    # -- peers, sessions, representations, the work queue ----------------------

    def peer_config(self, peer: str) -> dict:
        """A peer's own flags: ``observed_globally`` (and whether it follows the tenant default)."""
        return self._call("peer_config", {"peer": peer})[0]

    def set_peer_config(self, peer: str, *, observed_globally: bool | None) -> dict:
        """Set whether a global representation of the peer is derived (None: the tenant default)."""
        return self._call("set_peer_config", {"peer": peer, "config": Jsonb({"observed_globally": observed_globally})})[0]

    def create_session(self, name: str | None = None, *, scope: str | None = None, metadata: dict | None = None,
                       data_subject_id: str | None = None, principal: str | None = None,
                       scopes: Sequence[str] | None = None) -> int:
        """A session in a scope (an existing name returns its id). Returns the session id. With
        ``data_subject_id``, erasing that subject clears the session's name and metadata."""
        principal, scopes = self._who(principal, scopes)
        return self._call("create_session", {"principal": principal, "scopes": scopes, "scope": scope or scopes[0],
                                             "name": name, "metadata": Jsonb(metadata or {}),
                                             "data_subject_id": data_subject_id})[0]

    def add_session_peers(self, session: int, peers: Sequence[str | dict], *, defaults: dict | None = None,
                          principal: str | None = None, scopes: Sequence[str] | None = None) -> list[dict]:
        """Add peers: names, or ``{"peer": name, "observe_others": bool, "observed_by_others": bool}``.

        ``defaults`` gives the flags of peers that do not set them; the tenant settings fill the rest.
        """
        principal, scopes = self._who(principal, scopes)
        rows = self._call("add_session_peers", {"principal": principal, "scopes": scopes, "session": session,
                                                "peers": Jsonb(list(peers)), "defaults": Jsonb(defaults or {})},
                          many=True)
        return [dict(zip(("peer", "observe_others", "observed_by_others", "joined_at"), r)) for r in rows]

    def remove_session_peers(self, session: int, peers: Sequence[str], *, principal: str | None = None,
                             scopes: Sequence[str] | None = None) -> int:
        principal, scopes = self._who(principal, scopes)
        return self._call("remove_session_peers", {"principal": principal, "scopes": scopes, "session": session,
                                                   "peers": list(peers)})[0]

    def session_peers(self, session: int, *, include_left: bool = False, principal: str | None = None,
                      scopes: Sequence[str] | None = None) -> list[dict]:
        principal, scopes = self._who(principal, scopes)
        rows = self._call("session_peers", {"principal": principal, "scopes": scopes, "session": session,
                                            "include_left": include_left}, many=True)
        return [dict(zip(("peer", "kind", "joined_at", "left_at", "observe_others", "observed_by_others"), r))
                for r in rows]

    def session_peer_config(self, session: int, peer: str, *, principal: str | None = None,
                            scopes: Sequence[str] | None = None) -> dict:
        principal, scopes = self._who(principal, scopes)
        return self._call("session_peer_config", {"principal": principal, "scopes": scopes, "session": session,
                                                  "peer": peer})[0]

    def set_session_peer_config(self, session: int, peer: str, config: dict, *, principal: str | None = None,
                                scopes: Sequence[str] | None = None) -> dict:
        """Change ``observe_others`` and/or ``observed_by_others`` of one peer in a session."""
        principal, scopes = self._who(principal, scopes)
        return self._call("set_session_peer_config", {"principal": principal, "scopes": scopes, "session": session,
                                                      "peer": peer, "config": Jsonb(config)})[0]

    def add_messages(self, session: int, messages: Sequence[dict], *, principal: str | None = None,
                     scopes: Sequence[str] | None = None) -> list[MessageAdded]:
        """Append messages (dicts with actor and body, optionally source_role, occurred_at, payload, ...)
        to a session; each queues its derivation tasks. Returns offset and tasks queued per message."""
        principal, scopes = self._who(principal, scopes)
        rows = [{k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in m.items()} for m in messages]
        result = self._call("add_messages", {"principal": principal, "scopes": scopes, "session": session,
                                             "messages": Jsonb(rows)}, many=True)
        return [MessageAdded(r[1], r[2]) for r in result]

    def log_turn(self, log: str, actor: str, text: str, *, role: str | None = None,
                 occurred_at: datetime | None = None, data_subject_id: str | None = None, scope: str | None = None,
                 principal: str | None = None, scopes: Sequence[str] | None = None) -> Turn:
        """The turn log: append a turn to ``log``'s current session, or open a new one after a gap of more
        than turn_gap_seconds (2 hours). The actor joins the session if needed. ``data_subject_id`` is the
        turn's, and the session's when the turn opens one (its name holds the log's name)."""
        principal, scopes = self._who(principal, scopes)
        row = self._call("log_turn", {"principal": principal, "scopes": scopes, "scope": scope or scopes[0],
                                      "log": log, "actor": actor, "body": text, "source_role": role,
                                      "occurred_at": occurred_at, "data_subject_id": data_subject_id})
        return Turn(*row)

    def representation(self, target: str, *, observer: str | None = None, purpose: str = "converse",
                       limit: int = 100, principal: str | None = None,
                       scopes: Sequence[str] | None = None) -> list[dict]:
        """What is believed about ``target`` from ``observer``'s view (None: the global representation): the
        memories, then the currently believed facts (``item`` says which; ``kind`` is the memory kind or the
        fact's predicate), newest first, through the eligibility rules for the principal."""
        principal, scopes = self._who(principal, scopes)
        rows = self._call("representation", {"principal": principal, "scopes": scopes, "target": target,
                                             "observer": observer, "purpose": purpose, "limit": limit}, many=True)
        return [dict(zip(("item", "id", "scope", "kind", "body", "confidence", "observer", "created_at", "evidence"), r))
                for r in rows]

    def get_representation(self, session: int, peer: str, target: str | None = None, *,
                           principal: str | None = None, scopes: Sequence[str] | None = None) -> dict:
        """A peer's working representation in a session (one observed peer if ``target`` is given)."""
        principal, scopes = self._who(principal, scopes)
        return self._call("get_representation", {"principal": principal, "scopes": scopes, "session": session,
                                                 "peer": peer, "target": target})[0]

    def claim_tasks(self, worker: str, *, limit: int = 10, task_types: Sequence[str] | None = None) -> list[Task]:
        return self._call("claim_tasks", {"worker": worker, "limit": limit,
                                          "task_types": list(task_types) if task_types else None},
                          row_type=Task, many=True)

    def task_remember(self, task: Task, items: Sequence[dict], *, worker: str | None = None) -> list[Remembered]:
        """Write a leased task's memories (worker role): dicts with body, evidence (offsets of the task's
        messages), purposes, and optionally kind, title, confidence, about. The database sets the scope, the
        acting peer and the perspective from the task."""
        rows = self._call("task_remember", {"worker": worker, "task_id": task.task_id,
                                            "lease_token": task.lease_token, "items": Jsonb(list(items))}, many=True)
        return [Remembered(r[1], r[2], r[3]) for r in rows]

    def task_assert_fact(self, task: Task, predicate: str, object_: str, *, evidence: Sequence[dict],
                         statement: str | None = None, confidence: float = 1.0,
                         purposes: Sequence[str] | None = None, worker: str | None = None) -> AssertedFact:
        """Assert a fact about a leased representation task's sender, quoting its message (worker role)."""
        return self._call("task_assert_fact", {
            "worker": worker, "task_id": task.task_id, "lease_token": task.lease_token, "predicate": predicate,
            "object": object_, "evidence": Jsonb(list(evidence)), "statement": statement, "confidence": confidence,
            "purposes": list(purposes) if purposes is not None else None}, row_type=AssertedFact)

    def complete_task(self, task: Task, result: dict, *, worker: str | None = None) -> str:
        return self._call("complete_task", {"worker": worker, "task_id": task.task_id,
                                            "lease_token": task.lease_token, "result": Jsonb(result)})[0]

    def fail_task(self, task: Task, error: str, *, worker: str | None = None) -> dict:
        row = self._call("fail_task", {"worker": worker, "task_id": task.task_id, "lease_token": task.lease_token,
                                       "error": error})
        return dict(zip(("status", "attempts", "available_at"), row))

    def queue_status(self, peer: str, target: str | None = None, *, session: int | None = None) -> dict:
        """Is a representation current? Without ``target``: ``peer``'s global one; with it: ``peer``'s view
        of ``target``. Returns status ('current' or 'pending'), remaining, in_progress, done, dead."""
        row = self._call("queue_status", {"peer": peer, "target": target, "session": session})
        return dict(zip(("status", "remaining", "in_progress", "done", "dead"), row))

    def work_queue_status(self) -> dict:
        """Task counts as {task_type: {status: n}}."""
        out: dict = {}
        for task_type, status, n in self._call("work_queue_status", {}, many=True):
            out.setdefault(task_type, {})[status] = n
        return out

    def chat(self, observer: str | None, target: str, question: str, *, session: int | None = None,
             llm: Callable[[str], str] | None = None, purpose: str = "converse", limit: int = 10,
             principal: str | None = None, scopes: Sequence[str] | None = None) -> "Chat":
        """The dialectic: what ``observer`` (None: the global view) knows about ``target`` for ``question``.

        Gathers the representation, recall evidence for the question (as the observer, or the principal
        for the global view) and, with a session, the working representation. With ``llm`` (a callable
        taking the prompt), asks it to answer from that context only; without one, returns the context.
        """
        from .dialectic import gather

        return gather(self, observer, target, question, session=session, llm=llm, purpose=purpose, limit=limit,
                      principal=principal, scopes=scopes)


def _open(conninfo: str, tenant: str, role: str = "app") -> psycopg.Connection:
    try:
        return psycopg.connect(conninfo, autocommit=True)
    except psycopg.OperationalError as exc:
        if f'role "{db.role_name(tenant, role)}" does not exist' in str(exc):
            raise errors.TenantNotFound(f"tenant {tenant!r} does not exist on the embedded server",
                                        hint=f"Create it: pgrecall tenant create {tenant}") from exc
        raise


def connect(dsn: str | None = None, *, tenant: str, principal: str | None = None,
            scopes: Sequence[str] | None = None, conn: psycopg.Connection | None = None, pool=None,
            role: str = "app") -> Memory:
    """A :class:`Memory` handle on ``tenant``.

    With ``conn`` or ``pool`` the caller's connections are used (and their
    transactions respected). Otherwise ``dsn``, else ``PGRECALL_DSN``, else the
    embedded server, where the handle logs in as the tenant's login role of
    ``role``: ``app`` (the agent's operations, the default), ``worker``
    (claiming queued work) or ``admin`` (erasure, rebuilds, settings, merges).
    """
    return Memory(tenant, conn=conn, pool=pool, conninfo=dsn, principal=principal, scopes=scopes, role=role)
