"""The OpenAI Agents SDK's ``Session`` on pgrecall: ``PgrecallSession``, conversation history as a pgrecall session.

``pip install 'pgrecall[openai-agents]'``. A session is bound to a driver handle's tenant and principal (the
agent), to one scope (the handle's first unless ``scope=`` names another) and to the peer the agent talks with
(``user=``, a peer of the tenant). Its ``session_id`` names a pgrecall session of that scope (made on first use,
with the principal and the user in it), so a new ``PgrecallSession`` on the same id, in this process or
another, reads the same history.

- Every item ``add_items`` gets is a **turn** of that session, in order: kept whole (its JSON, in the turn's
  payload) and with its text (a message's content, a tool call's output or arguments) as the turn's body, so
  ``search_messages(..., session_id=...)`` finds it. A user message is the user's turn; every other item the
  principal's, in the role it was in (``system`` for system and developer messages, ``tool`` for a tool's
  output, ``assistant`` for the rest). Turns reach the session's peers only, like every message of a session.
- ``get_items(limit)`` returns the items in log order (the last ``limit`` of them, still in order), as the
  database answers them: only turns the principal may see, and none that a retraction hides. Without a
  ``limit``, the session's ``session_settings.limit`` (the SDK's ``SessionSettings``, given to the constructor or
  set later) if any; a limit of 0 reads none, as in the SDK's own sessions.
- The log stays **append-only**. ``pop_item`` does not delete the last item: it appends a retraction turn (kind
  ``event``, payload ``{"agents_retract": [offset]}``) that hides it from ``get_items``, and returns it;
  ``clear_session`` appends one retraction of every visible item. The retracted turns and the retractions
  themselves stay in the log, searchable and erasable like any other turn (only ``erase`` deletes).

The SQL is ``agent_session_*`` in plpgsql/integrations/agent_sessions.sql. The SDK's methods are coroutines;
each runs its one stored call in a thread (the handle's psycopg connection serialises its users).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from agents.memory.session import SessionABC
from agents.memory.session_settings import SessionSettings, resolve_session_limit
from psycopg.types.json import Jsonb

from ..driver import Memory

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

__all__ = ["PgrecallSession"]


class PgrecallSession(SessionABC):
    """The Agents SDK's ``Session`` on a pgrecall session (the module says how)."""

    def __init__(self, session_id: str, memory: Memory, *, user: str, scope: str | None = None,
                 session_settings: SessionSettings | None = None) -> None:
        self.session_id = session_id
        self.session_settings = session_settings
        self.memory = memory
        # agent_session_* are methods generated from the catalog (driver/_generated.py), which a type checker
        # does not see on Memory
        self._sql: Any = memory
        principal, scopes = memory.who(None, None)
        self.principal, self.scopes = principal, scopes
        self.scope = scope if scope is not None else scopes[0]
        self.user = user
        self._id: int | None = None

    @property
    def pgrecall_session(self) -> int:
        """The pgrecall session's id (made on first use): for ``search_messages(..., session_id=...)``."""
        if self._id is None:
            self._id = int(self._sql.agent_session_open(self.scope, self.session_id, self.user,
                                                        principal=self.principal, scopes=self.scopes))
        return self._id

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._sql, name)(self.pgrecall_session, *args, principal=self.principal, scopes=self.scopes,
                                        **kwargs)

    # -- the Session protocol ----------------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        rows = await asyncio.to_thread(self._call, "agent_session_items",
                                       limit=resolve_session_limit(limit, self.session_settings))
        return [row.item for row in rows]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        if items:
            await asyncio.to_thread(self._call, "agent_session_add", Jsonb(list(items)), self.user)

    async def pop_item(self) -> TResponseInputItem | None:
        rows = await asyncio.to_thread(self._call, "agent_session_pop")
        return rows[0].item if rows else None

    async def clear_session(self) -> None:
        await asyncio.to_thread(self._call, "agent_session_clear")
