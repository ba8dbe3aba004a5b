"""The Python driver: each method calls one stored function of the tenant.

>>> import pgrecall
>>> mem = pgrecall.connect(tenant="acme", principal="assistant", scopes=["default"])
>>> offset = mem.append("I live in Lisbon", role="user", actor="ana")
>>> mem.remember("Ana lives in Lisbon", evidence=[offset], purposes=["converse"])
Remembered(memory_id=1, status='created', reason=None)

The same with asyncio: ``mem = await pgrecall.connect_async(...)`` returns an
:class:`AsyncMemory` whose methods are the same, awaited.

By area, each a module of pure functions that build a call (the stored function, its named arguments and the
frozen dataclass its rows are read into, by column name): ``memories`` (setup, the log, the memory
operations, freshness), ``recall`` (recall and message search), ``duplicates`` (proposed pairs and a person's
decisions), ``graph`` (entities and facts), ``sessions`` (peers, sessions, representations, the derivation
queue), ``embeddings`` and ``admin`` (the back office).
``Memory`` and ``AsyncMemory`` run those calls; see ``_handles.py``.

Nothing connects at import time and nothing here runs DDL: a tenant is
created with ``pgrecall tenant create`` (or pgrecall.create_tenant() in SQL).
"""

from __future__ import annotations

from . import _generated
from ._handles import AsyncMemory, Memory, _operation, _Operations, connect, connect_async
from ._run import configure, configure_async
from .admin import ErasureReceipt, Flushed, Setting, TableStatistics, TermStats
from .connections import open_connection
from .dialectic import Chat, ChatEvidence
from .duplicates import DuplicateDecision, DuplicateMeta, DuplicatePair, DuplicateProposals, DuplicateSide
from .embeddings import EmbeddingJob, EmbeddingStatus, MemoryEmbeddingJob
from .graph import (
    AssertedFact,
    Citation,
    Edge,
    Entity,
    EntityAliases,
    EntityMerge,
    Evidence,
    FactQuote,
    FactRow,
    Predicate,
    RetractedFact,
)
from .memories import (
    AboutEntity,
    Freshness,
    MemoryItem,
    MemoryProvenance,
    MemoryRecord,
    MemoryTextRevision,
    ObservationRef,
    ObservationRow,
    Provenance,
    Remembered,
    RememberedSaid,
    Revision,
    SchemaInfo,
    Scope,
    SourceMemory,
)
from .recall import (
    FactProvenance,
    MessageHit,
    MessageSearchMeta,
    MessagesFound,
    Recalled,
    RecallItem,
    RecallMeta,
    Reranker,
)
from .sessions import (
    BundleEntity,
    BundleMemory,
    MessageAdded,
    PeerConfig,
    QueueStatus,
    RepresentationItem,
    SessionBundle,
    SessionPeer,
    SessionPeerAdded,
    SessionPeerConfig,
    Task,
    TaskFailure,
    Turn,
    WorkingItem,
    WorkingRepresentation,
)

# Every public tenant function (sql/duties.sql) has a Memory method of its name, except these, on purpose
# (tests/test_driver_async.py holds the driver to this list):
NOT_METHODS = {
    "append_observation": "Memory.append",
    "append_observations": "Memory.append_many",
    "log_watermark": "Memory.watermark",
    "recall_answer": "Memory.recall: the same rows as recall() with the metadata of that call",
    "recall": "Memory.recall calls recall_answer, which returns these rows and their metadata in one call",
    "search_messages_answer": "Memory.search_messages",
    "duplicate_proposals_answer": "Memory.duplicate_proposals: the pairs and the metadata of that call",
    "scopes": "Memory.list_scopes (Memory.scopes is the handle's authorised set)",
    "search_messages": "Memory.search_messages calls search_messages_answer (rows and metadata in one call)",
    "remember_said": "Memory.remember(..., said=...)",
    "claim_embedding_jobs": "the Worker (pgrecall.worker) leases, embeds and stores in a pipeline",
    "complete_embedding_jobs": "the Worker",
    "release_embedding_jobs": "the Worker",
    "claim_passage_embedding_jobs": "the Worker",
    "complete_passage_embedding_jobs": "the Worker",
    "release_passage_embedding_jobs": "the Worker",
    "listen_channel": "pgrecall.names.listen, which the worker and deriver loops call (pgrecall.loop)",
}

# A public function no hand-written operation covers (nor NOT_METHODS) is a method through its generated call
# builder (_generated.py, made by `make driver` from the catalog): a new operation is its SQL, its duty line and
# its reference entry.
GENERATED_METHODS = sorted(name for name in _generated.BUILDERS
                           if name not in NOT_METHODS and not hasattr(_Operations, name))
for _name in GENERATED_METHODS:
    setattr(_Operations, _name, _operation(_generated.BUILDERS[_name]))

__all__ = [
    "AboutEntity", "AssertedFact", "AsyncMemory", "BundleEntity", "BundleMemory", "Chat", "ChatEvidence",
    "Citation", "DuplicateDecision", "DuplicateMeta", "DuplicatePair", "DuplicateProposals", "DuplicateSide",
    "Edge", "EmbeddingJob", "EmbeddingStatus", "Entity", "EntityAliases", "EntityMerge", "ErasureReceipt",
    "Evidence", "FactProvenance", "FactQuote", "FactRow", "Flushed", "Freshness", "Memory", "MemoryEmbeddingJob",
    "MemoryItem", "MemoryProvenance", "MemoryRecord", "MemoryTextRevision",
    "MessageAdded", "MessageHit", "MessageSearchMeta", "MessagesFound", "ObservationRef", "ObservationRow",
    "PeerConfig", "Predicate",
    "Provenance", "QueueStatus", "RecallItem", "RecallMeta", "Recalled", "Remembered", "RememberedSaid",
    "RepresentationItem",
    "Reranker", "RetractedFact", "Revision", "SchemaInfo", "Scope", "SessionBundle", "SessionPeer",
    "SessionPeerAdded", "SessionPeerConfig", "Setting", "SourceMemory", "TableStatistics", "Task", "TaskFailure",
    "TermStats", "Turn",
    "WorkingItem", "WorkingRepresentation", "configure", "configure_async", "connect", "connect_async",
    "open_connection",
]
