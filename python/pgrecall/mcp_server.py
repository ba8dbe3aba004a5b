"""``pgrecall mcp``: a principal's memory as an MCP server (the official ``mcp`` SDK, 2.x).

The principal, its authorised scopes and the purpose are fixed when the server starts: no tool
argument names a principal, and a scope argument must be one of the authorised set. The server logs
in as the tenant's application role, so the database still decides what the principal may see.

Tools: recall, read, remember, derive, correct, supersede, forget (the seven operations), plus
search_messages and facts. The session-start bundle is a prompt (``session_start``) and a resource
(``pgrecall://bundle``, ``pgrecall://session/{session}/bundle``) for clients that inject context.

Errors come back as tool errors whose text starts with the SQLSTATE and the error class (``PR105
RevisionConflict: ...``) and whose structured content is ``{"error": {"code", "type", "message",
"hint"}}``: a model can tell a stale revision from a typo without parsing prose. Arguments the tool's schema
refuses, and an unknown tool, come back in that shape too (PR107), not as the framework's own text.
"""

import contextlib
import ipaddress
import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol, TypeVar

import psycopg
from pydantic import AfterValidator, Field

from . import __version__, errors
from .agent import AgentMemory

if TYPE_CHECKING:  # the SDK is imported when a server is built, not with the CLI
    from mcp.server import MCPServer
    from mcp.types import CallToolResult

Tool = TypeVar("Tool", bound=Callable[..., Any])

# No ``from __future__ import annotations`` here: the SDK reads each tool's signature with
# eval_str, and the annotations of the tools below refer to the server's own principal and scopes.

log = logging.getLogger("pgrecall.mcp")

Purpose = Literal["converse", "act", "personalize", "review"]
MemoryKind = Literal["note", "fact", "decision", "summary"]
Mode = Literal["hybrid", "lexical", "dense"]


def _utc_when_naive(value: datetime) -> datetime:
    """A time without an offset is UTC, as on the command line: not the database session's time zone (PGTZ or the
    server's configuration), which the model cannot see."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


Moment = Annotated[datetime, AfterValidator(_utc_when_naive)]

# Only these hosts are loopback: anything else would put a principal's memory on the network
# behind no authentication.
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def parse_http_address(value: str) -> tuple[str, int]:
    """``HOST:PORT`` on a loopback host only (``[::1]:PORT`` for IPv6); anything else is refused."""
    host, sep, port = value.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise errors.InvalidArgument(f"--http takes HOST:PORT, not {value!r}",
                                     hint="For example --http 127.0.0.1:8765.")
    if host not in LOCAL_HOSTS:
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        reason = "a loopback address other than 127.0.0.1 or ::1" if loopback else "not this machine's loopback"
        raise errors.InvalidArgument(
            f"--http host {host!r} is {reason}: the MCP server listens on 127.0.0.1, localhost or ::1 only",
            hint="The server has no authentication; reach it from another machine through an SSH tunnel.")
    return host, int(port)


# -- the MCP surface ------------------------------------------------------------

INSTRUCTIONS = """\
pgrecall is the long-term memory of {principal}: what was said in earlier conversations and what was
remembered from it. Recall before you say you have no context or do not know something about
{principal}, their people, projects or earlier conversations. Recall returns the nearest stored
rows, not necessarily relevant ones; each memory is a dated claim with the turns it came from, not
current truth: check its provenance (a fact's is its fact_provenance, with its `valid` range) before
you rely on it. Remember only what was stated, in the speaker's words; correct or supersede with the
revision you read.\
"""

TOOL_DESCRIPTIONS = {
    "recall": (
        "Search {principal}'s memory. Call it before saying you have no context or do not know. "
        "Returns the nearest rows, not necessarily relevant ones: judge each. A memory is a dated claim, "
        "not current truth: read its provenance (the turns it came from, who said them, when) before "
        "trusting it; a fact row carries its `valid` range and quotes. meta says whether the semantic arm "
        "ran (dense_available) and how many candidates each arm found."
    ),
    "read": (
        "Read one memory by id with its full provenance (source turns, source memories, entities), its "
        "revision and its history. Read before you correct or supersede: they need the revision."
    ),
    "remember": (
        "Store a memory of what was stated. Only what someone actually said: questions, guesses and empty "
        "text are refused (status noop, with the reason). Every memory cites the words it came from: pass "
        "`said` (the user's own words, verbatim), or `evidence` (log offsets from search_messages); with "
        "neither, `text` itself is recorded as the user's words. Cited words are kept in the log as "
        "{principal}'s and shown as the memory's provenance."
    ),
    "derive": (
        "Write a conclusion drawn from other memories (their ids). It may be seen and used only for what "
        "every source allows; refused (PR106) if they share none."
    ),
    "correct": (
        "Fix a wrong memory in place (a typo, a misheard detail): the revision goes up and the old text "
        "stays in its history. Pass the revision you read; a stale one fails with PR105: read again. "
        "Cite what justifies the fix: `said` (the user's words) or `evidence` offsets; with neither, "
        "`text` is recorded as the user's words."
    ),
    "supersede": (
        "The world changed (they moved, changed jobs): a new memory replaces the old, which stays as "
        "history. Pass the revision you read (PR105 if stale) and the words that say what changed "
        "(`said` or `evidence`; with neither, `text` is recorded as the user's words)."
    ),
    "forget": (
        "Invalidate a memory, with a reason, only when asked to forget it or when it is plainly wrong and "
        "cannot be corrected. It is no longer recalled or read."
    ),
    "search_messages": (
        "Search what was said (the log of turns), not what was remembered. Use it for exact wording or "
        "to find log offsets to cite as evidence. Returns the nearest passages, not necessarily relevant ones."
    ),
    "facts": (
        "What is believed about an entity (a person, place, thing): the current facts, or those valid at "
        "`valid_at` as known at `known_at`. Each fact has its `valid` range and quoted evidence."
    ),
}

MemoryId = Annotated[int, Field(ge=1, description="a memory id, as recall or read gave it")]
Revision = Annotated[int, Field(ge=1, description="the revision you read (read gives it)")]
Offsets = Annotated[list[int] | None, Field(description="log offsets (from search_messages) of what was said")]
Said = Annotated[str | None, Field(description="the user's own words that state it, verbatim, from this conversation")]


def _error_result(exc: Exception) -> "CallToolResult":
    from mcp.types import CallToolResult, TextContent

    if isinstance(exc, errors.PgrecallError):
        error = {"code": exc.sqlstate, "type": type(exc).__name__,
                 "message": exc.args[0] if exc.args else str(exc), "hint": exc.hint}
    else:  # a PostgreSQL error pgrecall does not raise itself, e.g. a statement timeout
        diag = getattr(exc, "diag", None)
        error = {"code": getattr(exc, "sqlstate", None), "type": type(exc).__name__,
                 "message": (diag.message_primary if diag else None) or str(exc),
                 "hint": diag.message_hint if diag else None}
    text = f"{error['code'] or 'error'} {error['type']}: {error['message']}"
    if error["hint"]:
        text += f" (hint: {error['hint']})"
    return CallToolResult(content=[TextContent(text=text)], structured_content={"error": error}, is_error=True)


def _result(value: dict[str, Any]) -> "CallToolResult":
    from mcp.types import CallToolResult, TextContent

    return CallToolResult(content=[TextContent(text=json.dumps(value, ensure_ascii=False, sort_keys=True,
                                                                     allow_nan=False))],
                          structured_content=value)


def _answer(operation: Callable[[], dict[str, Any]]) -> "CallToolResult":
    """Run one operation; a pgrecall or database error becomes a tool error with its code and hint."""
    try:
        return _result(operation())
    except (errors.PgrecallError, psycopg.Error) as raised:
        exc = errors.translate(raised) if isinstance(raised, psycopg.Error) else raised
        log.info("tool error: %s", exc.args[0] if exc.args else exc)
        return _error_result(exc)


def _invalid_arguments(tool: str, exc: Any) -> errors.InvalidArgument:
    """A tool's arguments that do not fit its schema, as PR107 naming each one and what it must be: the
    framework's own text is pydantic's, with the rejected values and a link to pydantic's docs."""
    problems = []
    for err in exc.errors():
        where = ".".join(str(part) for part in err.get("loc", ())) or "the arguments"
        problems.append(f"{where}: {str(err.get('msg', 'invalid')).lower()}")
    return errors.InvalidArgument(f"{tool}: " + "; ".join(problems),
                                  hint=f"Call {tool} with the arguments its input schema lists (tools/list).")


def _mcp_server_class() -> "type[MCPServer]":
    """MCPServer, but every failure of a tool call is one error shape ({"error": {code, type, message,
    hint}}): arguments the framework refuses before the tool runs, and a tool that does not exist, too."""
    from mcp.server import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import ValidationError

    class PgrecallMCPServer(MCPServer):
        async def call_tool(self, name: str, arguments: dict[str, Any],
                            context: Any = None) -> Any:  # MCPServer.call_tool's signature, in its own terms
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                if isinstance(exc.__cause__, ValidationError):
                    log.info("tool %s: arguments refused", name)
                    return _error_result(_invalid_arguments(name, exc.__cause__))
                if self._tool_manager.get_tool(name) is None:
                    return _error_result(errors.InvalidArgument(
                        f"there is no tool {name!r}", hint="tools/list names the tools this server has."))
                raise

    return PgrecallMCPServer


def build_server(agent: AgentMemory, *, preload: bool = True) -> "MCPServer":
    """The MCP server over ``agent``: nine tools, the bundle as a prompt and as resources. With
    ``preload``, the embedding model loads in the background once the server runs."""
    from mcp.server import MCPServer
    from mcp.types import ToolAnnotations

    @contextlib.asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[dict[str, Any]]:
        # Here, not before run(): on stdio the transport owns stdout by now, so nothing the model's
        # libraries might print can reach the protocol stream.
        if preload:
            agent.preload_model()
        yield {}

    who = {"principal": agent.principal}
    server = _mcp_server_class()(
        name="pgrecall", title=f"pgrecall: {agent.principal}'s memory", version=__version__,
        instructions=INSTRUCTIONS.format(**who), log_level="WARNING", lifespan=lifespan,
        description=f"Memory of {agent.principal} in tenant {agent.tenant} (scopes {', '.join(agent.scopes)}; "
                    f"purpose {agent.purpose})")
    reading = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    writing = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
    revising = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)

    kinds = {"reading": reading, "writing": writing, "revising": revising}

    def tool(name: str, kind: str) -> Callable[[Tool], Tool]:
        return server.tool(name=name, description=TOOL_DESCRIPTIONS[name].format(**who), annotations=kinds[kind])

    # In the order a client lists them.
    _add_memory_reading_tools(tool, agent)
    _add_writing_tools(tool, agent)
    _add_revising_tools(tool, agent)
    _add_log_tools(tool, agent)
    _add_bundle(server, agent)
    return server



class ToolMaker(Protocol):
    """build_server's ``tool(name, kind)``: registers a tool with its description and annotations."""

    def __call__(self, name: str, kind: str) -> Callable[[Tool], Tool]: ...


def _add_memory_reading_tools(tool: ToolMaker, agent: AgentMemory) -> None:
    """recall and read: what the principal may see of its memories."""
    from mcp.types import CallToolResult

    @tool("recall", "reading")
    def recall(
        query: Annotated[str, Field(description="what you want to know, in plain words")],
        limit: Annotated[int, Field(ge=1, le=50, description="at most this many rows")] = 10,
        mode: Annotated[Mode | None, Field(description="default: the tenant's (hybrid)")] = None,
        include_superseded: Annotated[bool, Field(description="also memories that were replaced")] = False,
        as_of: Annotated[Moment | None, Field(
            description="answer as the memory stood at this past time (ISO 8601, UTC without an offset; "
                        "default: now)")] = None,
    ) -> CallToolResult:
        return _answer(lambda: agent.recall(query, limit=limit, mode=mode, include_superseded=include_superseded,
                                            as_of=as_of))

    @tool("read", "reading")
    def read(
        memory_id: MemoryId,
        include_superseded: Annotated[bool, Field(description="read it even if it was replaced")] = False,
    ) -> CallToolResult:
        return _answer(lambda: agent.read(memory_id, include_superseded=include_superseded))


def _add_writing_tools(tool: ToolMaker, agent: AgentMemory) -> None:
    """remember and derive: new memories, from what was said or from other memories."""
    from mcp.types import CallToolResult

    @tool("remember", "writing")
    def remember(
        text: Annotated[str, Field(description="the memory: one self-contained statement, e.g. 'Ana is vegetarian'")],
        said: Said = None,
        evidence: Offsets = None,
        purposes: Annotated[list[Purpose] | None, Field(
            description=f"what it may be used for (default: {agent.purpose})")] = None,
        private: Annotated[bool, Field(description=f"only {agent.principal} may see it")] = False,
        kind: Annotated[MemoryKind, Field(description="note, fact, decision or summary")] = "note",
        title: Annotated[str | None, Field(description="a short title")] = None,
        about: Annotated[list[str] | None,
                         Field(description="names of the people, places or things it is about")] = None,
        scope: Annotated[str | None, Field(description=f"one of {', '.join(agent.scopes)} "
                                                       f"(default: {agent.scopes[0]})")] = None,
    ) -> CallToolResult:
        return _answer(lambda: agent.remember(text, said=said, evidence=evidence, purposes=purposes, private=private,
                                              kind=kind, title=title, about=about, scope=scope))

    @tool("derive", "writing")
    def derive(
        sources: Annotated[list[int], Field(min_length=1, description="ids of the memories it is drawn from")],
        text: Annotated[str, Field(description="the conclusion")],
        kind: Annotated[MemoryKind, Field(description="default: summary")] = "summary",
        title: Annotated[str | None, Field(description="a short title")] = None,
        about: Annotated[list[str] | None, Field(description="names it is about")] = None,
    ) -> CallToolResult:
        return _answer(lambda: agent.derive(sources, text, kind=kind, title=title, about=about))


def _add_revising_tools(tool: ToolMaker, agent: AgentMemory) -> None:
    """correct, supersede and forget: changing a memory read at a revision."""
    from mcp.types import CallToolResult

    @tool("correct", "revising")
    def correct(
        memory_id: MemoryId,
        text: Annotated[str, Field(description="the corrected memory")],
        revision: Revision,
        said: Said = None,
        evidence: Offsets = None,
        reason: Annotated[str | None, Field(description="why, e.g. 'she said it was March 13'")] = None,
        title: Annotated[str | None, Field(description="a new title (default: keep it)")] = None,
    ) -> CallToolResult:
        return _answer(lambda: agent.correct(memory_id, text, revision=revision, said=said, evidence=evidence,
                                             reason=reason, title=title))

    @tool("supersede", "revising")
    def supersede(
        memory_id: MemoryId,
        text: Annotated[str, Field(description="the new memory that replaces it")],
        revision: Revision,
        said: Said = None,
        evidence: Offsets = None,
        title: Annotated[str | None, Field(description="a new title (default: keep it)")] = None,
        about: Annotated[list[str] | None, Field(description="names it is about (default: the old memory's)")] = None,
    ) -> CallToolResult:
        return _answer(lambda: agent.supersede(memory_id, text, revision=revision, said=said, evidence=evidence,
                                               title=title, about=about))

    @tool("forget", "revising")
    def forget(
        memory_id: MemoryId,
        reason: Annotated[str, Field(description="why, e.g. 'the user asked'")],
        revision: Annotated[int | None, Field(ge=1, description="the revision you read, to fail if it changed")] = None,
    ) -> CallToolResult:
        return _answer(lambda: agent.forget(memory_id, reason=reason, revision=revision))


def _add_log_tools(tool: ToolMaker, agent: AgentMemory) -> None:
    """search_messages and facts: what was said, and what is believed about an entity."""
    from mcp.types import CallToolResult

    @tool("search_messages", "reading")
    def search_messages(
        query: Annotated[str, Field(description="words to look for in what was said")],
        session_id: Annotated[int | None, Field(ge=1, description="only this session")] = None,
        sender: Annotated[str | None, Field(description="only what this peer said")] = None,
        limit: Annotated[int, Field(ge=1, le=50, description="at most this many passages")] = 10,
        mode: Annotated[Literal["hybrid", "lexical", "semantic"] | None,
                        Field(description="default: the tenant's settings")] = None,
    ) -> CallToolResult:
        return _answer(lambda: agent.search_messages(query, session_id=session_id, sender=sender, limit=limit,
                                                     mode=mode))

    @tool("facts", "reading")
    def facts(
        subject: Annotated[str, Field(description="the entity's name or alias, e.g. 'Ana'")],
        predicate: Annotated[str | None, Field(description="one predicate, e.g. 'lives_in' (default: all)")] = None,
        valid_at: Annotated[Moment | None, Field(
            description="true at this time (ISO 8601, UTC without an offset; default: now)")] = None,
        known_at: Annotated[Moment | None, Field(
            description="as believed at this time (ISO 8601, UTC without an offset; default: now)")] = None,
    ) -> CallToolResult:
        return _answer(lambda: agent.facts(subject, predicate=predicate, valid_at=valid_at, known_at=known_at))


def _add_bundle(server: "MCPServer", agent: AgentMemory) -> None:
    """The bundle, as the session_start prompt and as two resources."""
    from mcp.server.mcpserver.exceptions import ResourceError
    from mcp.shared.exceptions import MCPError
    from mcp.types import INVALID_PARAMS

    def bundle_or_error(session: int | None) -> str:
        try:
            return agent.bundle_text(session=session)
        except (errors.PgrecallError, psycopg.Error) as raised:
            exc = errors.translate(raised) if isinstance(raised, psycopg.Error) else raised
            payload = _error_result(exc).content[0]
            raise ResourceError(getattr(payload, "text", str(exc))) from raised

    def session_number(session: str | None) -> int | None:
        if session in (None, ""):
            return None
        if not str(session).isdigit() or int(session) < 1:
            raise ResourceError(f"PR107 InvalidArgument: session must be a session id (a positive number), "
                                f"not {session!r}")
        return int(session)

    @server.prompt(name="session_start", title="What I remember",
                   description=f"{agent.principal}'s session-start memory: pinned notes, recent memories, the "
                               "entities most written about and, for a session, the working representation; "
                               "each memory with the turns it came from.")
    def session_start(
        session: Annotated[str | None, Field(description="a session id, for its working representation")] = None,
    ) -> str:
        try:
            return bundle_or_error(session_number(session))
        except ResourceError as exc:
            # The SDK answers any other error of a prompt with "Error rendering prompt session_start" alone:
            # the client would not learn that the session is unknown or not a number.
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from exc

    @server.resource("pgrecall://bundle", name="session_bundle", title="Session-start memory",
                     description=f"What {agent.principal} starts a conversation with (plain text for a model).",
                     mime_type="text/plain")
    def bundle_resource() -> str:
        return bundle_or_error(None)

    @server.resource("pgrecall://session/{session}/bundle", name="session_bundle_in_session",
                     title="Session-start memory in a session",
                     description="The bundle with the working representation of one session.",
                     mime_type="text/plain")
    def session_bundle_resource(session: str) -> str:
        return bundle_or_error(session_number(session))


@contextlib.contextmanager
def _stdout_is_stderr() -> Iterator[None]:
    """Until the protocol owns stdout, anything printed (by us, a library or a child such as the embedded
    server's pg_ctl) goes to stderr: on stdio, one stray line would corrupt the stream."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def serve(tenant: str, principal: str, scopes: list[str] | None, purpose: str, http: str | None = None,
          preload: bool = True) -> int:
    """``pgrecall mcp``: stdio unless ``http`` (HOST:PORT on loopback) is given."""
    address = parse_http_address(http) if http else None
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="pgrecall mcp: %(message)s")
    with _stdout_is_stderr():
        agent = AgentMemory(tenant, principal, scopes, purpose=purpose)
        server = build_server(agent, preload=preload)
        where = f"http://{address[0] if ':' not in address[0] else f'[{address[0]}]'}:{address[1]}/mcp" \
            if address else "stdio"
        print(f"pgrecall mcp: serving {principal}'s memory in tenant {tenant} (scopes {', '.join(agent.scopes)}; "
              f"purpose {purpose}) on {where}", file=sys.stderr, flush=True)
    try:
        if address:
            server.run("streamable-http", host=address[0], port=address[1])
        else:
            server.run("stdio")
    except KeyboardInterrupt:
        pass
    finally:
        agent.close()
    return 0
