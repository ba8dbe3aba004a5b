"""A principal's memory as an agent is given it: one principal, a fixed set of scopes, one purpose.

``pgrecall mcp`` serves these operations as MCP tools and ``pgrecall bundle`` prints the
session-start bundle through them. What the principal may see is still decided by the database:
this logs in as the tenant's application role and names the principal and scopes on every call.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any, TypeVar

import psycopg

from . import db, errors
from .driver import Memory, open_connection
from .names import check_tenant_name
from .render import bundle_text, jsonable, jsonable_object

T = TypeVar("T")

from .vocabulary import PURPOSES  # noqa: E402  (one definition, held to the catalog)

# Recorded statements say how they got into the log, so a reader of the provenance can tell an
# agent's transcription from a message the application appended.
RECORDED_BY = {"recorded_by": "pgrecall mcp"}


class AgentMemory:
    """The memory operations an agent is given: one principal, a fixed set of scopes, one purpose.

    Every operation runs under one lock on one connection of the tenant's application role; those
    that append the words they cite do both in one transaction, so a refused memory leaves nothing
    in the log.
    """

    def __init__(self, tenant: str, principal: str, scopes: list[str] | None = None, *,
                 purpose: str = "converse", conninfo: str | None = None):
        check_tenant_name(tenant)  # before it reaches a URI or an identifier
        if purpose not in PURPOSES:
            raise errors.InvalidPurpose(f"purpose {purpose!r} is not one of {', '.join(PURPOSES)}")
        self.tenant, self.principal, self.purpose = tenant, principal, purpose
        self._conninfo = conninfo or db.tenant_conninfo(tenant, "app")
        self._lock = threading.Lock()
        self._model_lock = threading.Lock()
        self._preloading = False
        self._conn = self._open()
        try:
            self.scopes = list(dict.fromkeys(scopes or self._every_scope()))
            self.mem = self._memory()
            # Fails now, not at the first tool call, on an unknown principal, scope or purpose.
            self.mem.session_bundle(purpose=self.purpose, recent=0, entities=0)
        except BaseException:
            self._conn.close()
            raise

    def _every_scope(self) -> list[str]:
        # Connecting reports a missing or outdated tenant first.
        scopes = [s.name for s in Memory(self.tenant, conn=self._conn).list_scopes()]
        if not scopes:
            raise errors.ScopeNotAuthorised(f"tenant {self.tenant!r} has no scopes",
                                            hint=f"Add one: pgrecall scope add default --tenant {self.tenant}")
        return scopes

    # -- plumbing -------------------------------------------------------------

    def _open(self) -> psycopg.Connection[Any]:
        """Our own connection of the app role: the driver uses it (conn=), and we use its transactions."""
        return open_connection(self._conninfo, self.tenant, "app")

    def _memory(self) -> Memory:
        return Memory(self.tenant, conn=self._conn, principal=self.principal, scopes=self.scopes)

    def _connect(self) -> None:
        self._conn = self._open()
        self.mem = self._memory()

    @contextlib.contextmanager
    def _session(self) -> Iterator[Memory]:
        """The connection, to this operation alone; one known to be dead is replaced first."""
        with self._lock:
            if self._conn is None or self._conn.closed or self._conn.broken:
                self._connect()
            yield self.mem

    def _read(self, operation: Callable[[Memory], T]) -> T:
        """Run a read. A connection that died since the last call (the server restarted) is only found
        dead by using it: then the read runs once more on a new one. Writes are not run again: one
        that failed in flight may have committed, and the next call reconnects anyway."""
        with self._session() as mem:
            try:
                return operation(mem)
            except (psycopg.OperationalError, errors.ConnectionLost):
                if not (self._conn.broken or self._conn.closed):
                    raise
                self._connect()
                return operation(self.mem)

    def preload_model(self) -> None:
        """Load the embedding model in the background, once, so that the first recall does not wait for
        it (a cold load takes seconds, 18 s measured on a loaded machine)."""
        if self._preloading:
            return
        self._preloading = True

        def load() -> None:
            from .embedder import ModelUnavailable, default_embedder

            with self._model_lock:
                try:
                    default_embedder().embed(["warm-up"])  # the resident one starts, or this process loads it
                except ModelUnavailable:  # recall degrades to lexical and says why
                    pass

        threading.Thread(target=load, name="pgrecall-model", daemon=True).start()

    def _model_loaded(self) -> None:
        """Wait for a load in progress rather than start a second one."""
        with self._model_lock:
            pass

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()

    def _scope(self, scope: str | None) -> str:
        if scope is None:
            return self.scopes[0]
        if scope not in self.scopes:
            raise errors.ScopeNotAuthorised(f"scope {scope!r} is not in this server's authorised set {self.scopes}",
                                            hint="The scopes are fixed when pgrecall mcp starts (--scopes).")
        return scope

    def _record(self, mem: Memory, said: str, scope: str, audience: str | None) -> int:
        """The principal's words, appended as a note of theirs: the evidence a memory cites, seen by the
        memory's audience (and the principal), so that words about a private memory stay private."""
        return mem.append(said, role="user", kind="note", scope=scope, payload=RECORDED_BY,
                          audience=[audience] if audience else None)

    def _readable(self, mem: Memory, memory_id: int, include_superseded: bool = False) -> dict[str, Any] | None:
        """The memory as read() gives it, or None when this server's purpose may not use it."""
        try:
            return jsonable_object(mem.read(memory_id, purpose=self.purpose, include_superseded=include_superseded))
        except errors.MemoryNotFound:
            return None

    def _scope_of(self, mem: Memory, memory_id: int) -> tuple[str, str | None]:
        """The scope and audience of a memory the principal may change, where and for whom the words that
        change it are recorded.
        correct and supersede accept a target of any purpose, so this looks under each (this server's
        first); a memory the principal may not see is not found under any. Superseded ones are found, so
        that the change itself says it was superseded (PR108). Outside the write's transaction: a
        failed read there would abort it."""
        for purpose in (self.purpose, *(p for p in PURPOSES if p != self.purpose)):
            try:
                found = mem.read(memory_id, purpose=purpose, include_superseded=True)
                return found.scope, found.audience
            except errors.MemoryNotFound as exc:
                missing = exc
        raise missing

    def _revise(self, memory_id: int, text: str, said: str | None, evidence: list[int] | None,
                change: Callable[[Memory, list[int]], dict[str, Any]]) -> dict[str, Any]:
        """correct and supersede: ``change(mem, cited)`` cites the evidence given and the words said (by default
        the new text), which are recorded in the memory's own scope in the same transaction, so a refused
        change leaves nothing in the log. Its result gains the evidence and the memory it leaves (``memory_id``
        of the result), as read() gives it, read after the commit."""
        cited = list(evidence or [])
        if said is None and not cited:
            said = text
        with self._session() as mem:
            scope, audience = self._scope_of(mem, memory_id) if said is not None else (None, None)
            with self._conn.transaction():
                if said is not None and scope is not None:
                    cited.append(self._record(mem, said, scope, audience))
                result = change(mem, cited)
            return {**result, "evidence": cited, "memory": self._readable(mem, result["memory_id"])}

    # -- the operations ---------------------------------------------------------

    def recall(self, query: str, *, limit: int = 10, mode: str | None = None,
               include_superseded: bool = False, as_of: datetime | None = None) -> dict[str, Any]:
        self._model_loaded()
        r = self._read(lambda mem: mem.recall(query, purpose=self.purpose, mode=mode, limit=limit,
                                              include_superseded=include_superseded, as_of=as_of))
        return {"items": jsonable(r.items), "meta": jsonable(r.meta)}

    def read(self, memory_id: int, *, include_superseded: bool = False) -> dict[str, Any]:
        return jsonable_object(self._read(lambda mem: mem.read(memory_id, purpose=self.purpose,
                                                               include_superseded=include_superseded)))

    def remember(self, text: str, *, said: str | None = None, evidence: list[int] | None = None,
                 purposes: Sequence[str] | None = None, private: bool = False, kind: str = "note",
                 title: str | None = None, about: list[str] | None = None, scope: str | None = None) -> dict[str, Any]:
        scope = self._scope(scope)
        cited = list(evidence or [])
        if said is None and not cited:
            said = text
        common: dict[str, Any] = {"purposes": list(purposes or [self.purpose]), "scope": scope,
                                  "audience": self.principal if private else None, "kind": kind, "title": title,
                                  "about": list(about or [])}
        with self._session() as mem:
            if said is not None:
                # The words and the memory in one stored call: nothing remembered, nothing left in the log.
                r = mem.remember(text, said=said, said_payload=RECORDED_BY, evidence=cited, **common)
                recorded = getattr(r, "log_offset", None)
            else:
                r, recorded = mem.remember(text, evidence=cited, **common), None
            result: dict[str, Any] = {"memory_id": r.memory_id, "status": r.status, "reason": r.reason,
                                      "scope": scope, "evidence": cited + ([recorded] if recorded is not None else []),
                                      "recorded_offset": recorded}
            if r.created and r.memory_id is not None:
                result["memory"] = self._readable(mem, r.memory_id)
        return result

    def derive(self, sources: list[int], text: str, *, kind: str = "summary", title: str | None = None,
               about: list[str] | None = None) -> dict[str, Any]:
        with self._session() as mem:
            memory_id = mem.derive(sources, text, kind=kind, title=title, about=list(about or []))
            return {"memory_id": memory_id, "memory": self._readable(mem, memory_id)}

    def correct(self, memory_id: int, text: str, *, revision: int, said: str | None = None,
                evidence: list[int] | None = None, reason: str | None = None,
                title: str | None = None) -> dict[str, Any]:
        return self._revise(memory_id, text, said, evidence, lambda mem, cited: {
            "memory_id": memory_id,
            "revision": mem.correct(memory_id, text, revision=revision, evidence=cited, title=title, reason=reason)})

    def supersede(self, memory_id: int, text: str, *, revision: int, said: str | None = None,
                  evidence: list[int] | None = None, title: str | None = None,
                  about: list[str] | None = None) -> dict[str, Any]:
        return self._revise(memory_id, text, said, evidence, lambda mem, cited: {
            "memory_id": mem.supersede(memory_id, text, revision=revision, evidence=cited, title=title, about=about),
            "superseded": memory_id})

    def forget(self, memory_id: int, *, reason: str, revision: int | None = None) -> dict[str, Any]:
        with self._session() as mem:
            return {"memory_id": memory_id, "revision": mem.forget(memory_id, reason=reason, revision=revision),
                    "forgotten": True}

    def search_messages(self, query: str, *, session_id: int | None = None, sender: str | None = None,
                        limit: int = 10, mode: str | None = None) -> dict[str, Any]:
        self._model_loaded()
        r = self._read(lambda mem: mem.search_messages(query, mode=mode, session_id=session_id, peer=sender,
                                                       limit=limit))
        return {"items": jsonable(r.items), "meta": jsonable(r.meta)}

    def facts(self, subject: str, *, predicate: str | None = None, valid_at: datetime | None = None,
              known_at: datetime | None = None) -> dict[str, Any]:
        rows = self._read(lambda mem: mem.facts_as_of(subject, predicate, valid_at=valid_at, known_at=known_at,
                                                      purpose=self.purpose))
        return {"subject": subject, "facts": jsonable(rows)}

    def bundle(self, *, session: int | None = None, recent: int = 10, entities: int = 5) -> dict[str, Any]:
        return jsonable_object(self._read(lambda mem: mem.session_bundle(purpose=self.purpose, recent=recent,
                                                                         entities=entities, session=session)))

    def bundle_text(self, *, session: int | None = None) -> str:
        return bundle_text(self.bundle(session=session), principal=self.principal, tenant=self.tenant,
                           scopes=self.scopes, purpose=self.purpose, session=session)
