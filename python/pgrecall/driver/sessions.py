"""Peers, sessions, messages, representations and the derivation work queue.

Each function builds the call of one stored function; ``Memory`` and ``AsyncMemory`` run it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from ._calls import Call, Handle, column, json_items, json_list, json_object, one, parse, rows, timestamp, value
from ._generated import BundleEntity as BundleEntity  # re-exported
from ._generated import BundleMemory as BundleMemory  # re-exported
from ._generated import PeerConfig as PeerConfig
from ._generated import QueueCount as QueueCount  # re-exported
from ._generated import QueueStatus as QueueStatus  # re-exported
from ._generated import RepresentationItem as RepresentationItem  # re-exported
from ._generated import SessionPeer as SessionPeer  # re-exported
from ._generated import SessionPeerAdded as SessionPeerAdded  # re-exported
from ._generated import SessionPeerConfig as SessionPeerConfig
from ._generated import TaskFailure as TaskFailure  # re-exported
from .graph import AssertedFact
from .memories import Remembered, peer_names

# -- row types ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MessageAdded:
    offset: int = field(metadata=column("log_offset"))
    tasks: int = field()  # derivation tasks queued for it


@dataclass(frozen=True)
class Turn:
    session_id: int
    offset: int = field(metadata=column("log_offset"))
    opened: bool = field()  # a new session was opened for this turn


@dataclass(frozen=True)
class WorkingItem:
    """One derived observation in a working representation."""

    text: str
    offset: int
    observation_id: int
    at: datetime = field(metadata=parse(timestamp))
    memory_id: int | None = None
    fact_id: int | None = None


def _per_target(document: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, list[WorkingItem]]:
    items = json_list(WorkingItem)
    return {target: items(entries) for target, entries in document.items()}


@dataclass(frozen=True)
class WorkingRepresentation:
    """A peer's working representation in a session: per observed peer, the newest derived observations."""

    session: int
    peer: str
    updated_at: datetime | None = field(metadata=parse(timestamp))
    representation: dict[str, list[WorkingItem]] = field(metadata=parse(_per_target))


@dataclass(frozen=True)
class SessionBundle:
    """What an agent starts with: recent memories, pinned notes, top entities, and with a session its working
    representation there."""

    recent: list[BundleMemory] = field(metadata=parse(json_list(BundleMemory), composite=True))
    pinned: list[BundleMemory] = field(metadata=parse(json_list(BundleMemory), composite=True))
    entities: list[BundleEntity] = field(metadata=parse(json_list(BundleEntity), composite=True))
    working_representation: WorkingRepresentation | None = field(
        metadata=parse(json_object(WorkingRepresentation), composite=True))


@dataclass(frozen=True)
class Task:
    """A leased derivation task, as claim_tasks() hands it out.

    ``messages`` stay dicts (offset, actor, source_role, body, ...): they are what a user's ``extract``
    callable receives, typically to put into an LLM prompt as JSON.
    """

    task_id: int
    lease_token: UUID
    task_type: str  # 'representation' or 'summary'
    session_id: int
    scope: str
    sender: str | None  # whose message (the peer represented)
    observer: str | None  # None: the sender's global representation
    message_offset: int
    messages: list[dict[str, Any]]
    attempts: int
    lease_until: datetime


# -- peers --------------------------------------------------------------------------------------------------


def set_peer_config(h: Handle, peer: str, *, observed_globally: bool | None) -> Call[PeerConfig]:
    """Set whether a global representation of the peer is derived (None: the tenant default)."""
    return one("set_peer_config", {"peer": peer, "config": Jsonb({"observed_globally": observed_globally})},
               PeerConfig)


# -- sessions and messages ----------------------------------------------------------------------------------


def add_session_peers(h: Handle, session: int, peers: Sequence[str | Mapping[str, Any]], *,
                      defaults: Mapping[str, Any] | None = None, principal: str | None = None,
                      scopes: Sequence[str] | None = None) -> Call[list[SessionPeerAdded]]:
    """Add peers: names, or ``{"peer": name, "observe_others": bool, "observed_by_others": bool}``.

    ``defaults`` gives the flags of peers that do not set them; the tenant settings fill the rest.
    """
    principal, scopes = h.who(principal, scopes)
    return rows("add_session_peers", {"principal": principal, "scopes": scopes, "session": session,
                                      "peers": Jsonb(list(peers)),
                                      "defaults": Jsonb(defaults if defaults is not None else {})}, SessionPeerAdded)


def add_messages(h: Handle, session: int, messages: Sequence[Mapping[str, Any]], *, principal: str | None = None,
                 scopes: Sequence[str] | None = None) -> Call[list[MessageAdded]]:
    """Append messages (dicts with actor and body, optionally source_role, occurred_at, payload, audience, ...)
    to a session; each queues its derivation tasks. A message is seen by the session's peers now (and its
    sender), or the narrower ``audience`` it names. Returns offset and tasks queued per message."""
    principal, scopes = h.who(principal, scopes)
    return rows("add_messages", {"principal": principal, "scopes": scopes, "session": session,
                                 "messages": Jsonb(json_items(messages))}, MessageAdded, ordered_by="ordinal")


def log_turn(h: Handle, log: str, actor: str, text: str, *, role: str | None = None,
             occurred_at: datetime | None = None, data_subject_id: str | None = None,
             audience: Sequence[str] | None = None, scope: str | None = None,
             principal: str | None = None, scopes: Sequence[str] | None = None) -> Call[Turn]:
    """The turn log: append a turn to ``log``'s current session, or open a new one after a gap of more
    than turn_gap_seconds (2 hours). The actor and the principal join the session if needed; the turn is seen
    by the session's peers, or the narrower ``audience`` (peer names). ``data_subject_id`` is the
    turn's, and the session's when the turn opens one (its name holds the log's name)."""
    principal, scopes = h.who(principal, scopes)
    return one("log_turn", {"principal": principal, "scopes": scopes, "scope": scope or scopes[0], "log": log,
                            "actor": actor, "body": text, "source_role": role, "occurred_at": occurred_at,
                            "data_subject_id": data_subject_id, "audience": peer_names("audience", audience)},
               Turn)


# -- representations ----------------------------------------------------------------------------------------


# -- the derivation work queue (the worker role) ------------------------------------------------------------


def claim_tasks(h: Handle, worker: str, *, limit: int = 10,
                task_types: Sequence[str] | None = None) -> Call[list[Task]]:
    """Lease up to ``limit`` ready derivation tasks (worker role)."""
    return rows("claim_tasks", {"worker": worker, "limit": limit,
                                "task_types": list(task_types) if task_types else None}, Task)


def task_remember(h: Handle, task: Task, items: Sequence[Mapping[str, Any]], *,
                  worker: str | None = None) -> Call[list[Remembered]]:
    """Write a leased task's memories (worker role): dicts with body, evidence (offsets of the task's
    messages), purposes, and optionally kind, title, confidence, about. The database sets the scope, the
    acting peer and the perspective from the task."""
    return rows("task_remember", {"worker": worker, "task_id": task.task_id, "lease_token": task.lease_token,
                                  "items": Jsonb(list(items))}, Remembered, ordered_by="ordinal")


def task_assert_fact(h: Handle, task: Task, predicate: str, object_: str, *, evidence: Sequence[Mapping[str, Any]],
                     statement: str | None = None, confidence: float = 1.0, purposes: Sequence[str] | None = None,
                     worker: str | None = None) -> Call[AssertedFact]:
    """Assert a fact about a leased representation task's sender, quoting its message (worker role)."""
    return one("task_assert_fact", {
        "worker": worker, "task_id": task.task_id, "lease_token": task.lease_token, "predicate": predicate,
        "object": object_, "evidence": Jsonb(list(evidence)), "statement": statement,
        "confidence": confidence, "purposes": list(purposes) if purposes is not None else None}, AssertedFact)


def complete_task(h: Handle, task: Task, result: Mapping[str, Any], *, worker: str | None = None) -> Call[str]:
    """Complete a leased task with its result (worker role); a representation result updates the
    working representation."""
    return value("complete_task", {"worker": worker, "task_id": task.task_id, "lease_token": task.lease_token,
                                   "result": Jsonb(result)}, str)


def fail_task(h: Handle, task: Task, error: str, *, worker: str | None = None) -> Call[TaskFailure]:
    """Give a leased task back with the error (worker role): retried with backoff, then dead-lettered."""
    return one("fail_task", {"worker": worker, "task_id": task.task_id, "lease_token": task.lease_token,
                             "error": error}, TaskFailure)


def _by_type(counts: list[QueueCount]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for c in counts:
        out.setdefault(c.task_type, {})[c.status] = c.tasks
    return out


def work_queue_status(h: Handle) -> Call[dict[str, dict[str, int]]]:
    """Task counts as {task_type: {status: n}}."""
    return rows("work_queue_status", {}, QueueCount).then(_by_type)
