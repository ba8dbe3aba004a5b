"""A data subject's export, and its import into another tenant (issue #50, item 2).

``pgrecall export --subject u-42`` writes JSON lines: a header line, then one line per stored row that
``<tenant>.export()`` returns, i.e. every row an erasure of the same subject would remove (the erasure plan
decides both). The format (docs/reference.md, "The export format"), version 1::

    {"format": "pgrecall-export", "format_version": 1, "tenant": "acme", "schema_version": 37,
     "pgrecall_version": "...", "selector": {"data_subject": "u-42"}, "exported_at": "...",
     "rows": 12, "kinds": {"observation": 3, ...}}
    {"kind": "observation", "key": "41", "record": {...the row as stored...}}
    ...

``pgrecall import --export FILE`` replays an export into a tenant through the app's own operations, in one
transaction (all of it, or nothing): the peers and scopes it names, the turns (appended in their order,
with their data subject, so that an erasure there removes them again), the sessions and peers' words, the
memories (their first text, then each correction, with the turns they cite), the facts believed now, and
the aliases. What a tenant derives for itself (passages, vectors, links, work, working representations) is
derived again there; what the export holds that is another subject's (``memory_reverted``: a memory of
someone else that a correction of this subject's rewrote) is not imported.
"""

from __future__ import annotations

import functools
import heapq
import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import psycopg

from . import db, errors
from .importer import ImportFileError
from .names import check_tenant_name

FORMAT = "pgrecall-export"
FORMAT_VERSION = 1


class ExportFileError(ImportFileError):
    """An export file that cannot be imported; the message names the line and nothing was written."""


# -- export -----------------------------------------------------------------------------------------------------


def header(tenant: str, schema_version: int, selector: Mapping[str, Any], counts: Mapping[str, int]) -> dict[str, Any]:
    from . import __version__

    return {"format": FORMAT, "format_version": FORMAT_VERSION, "tenant": tenant, "schema_version": schema_version,
            "pgrecall_version": __version__, "selector": dict(selector),
            "exported_at": datetime.now(UTC).isoformat(), "rows": sum(counts.values()), "kinds": dict(counts)}


def _connect(conninfo: str, tenant: str, role: str) -> psycopg.Connection[Any]:
    """A connection (not autocommit) as the tenant's role; a login refused because that role does not exist
    is a tenant that does not exist (TenantNotFound), as everywhere else."""
    from .driver.connections import check_role

    try:
        return psycopg.connect(conninfo, autocommit=False)
    except psycopg.OperationalError as exc:
        check_role(exc, tenant, role)
        raise


def export_rows(tenant: str, selector: Mapping[str, Any], *,
                conninfo: str | None = None) -> tuple[dict[str, Any], list[Any]]:
    """The header and the rows of an export, read as the tenant's admin role in one REPEATABLE READ
    transaction (one consistent picture, however long it takes)."""
    from .driver import Memory

    check_tenant_name(tenant)
    with _connect(conninfo or db.tenant_conninfo(tenant, "admin"), tenant, "admin") as conn:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        mem = Memory(tenant, conn=conn, role="admin")
        rows = mem.export(selector)
        schema_version = conn.execute(f'select schema_version from "{tenant}".schema_info()').fetchone()
        conn.rollback()
    counts = Counter(r.kind for r in rows)
    return header(tenant, schema_version[0] if schema_version else 0, selector, counts), rows


def write_export(out: IO[str], head: Mapping[str, Any], rows: Iterable[Any]) -> None:
    out.write(json.dumps(head, ensure_ascii=False, sort_keys=True) + "\n")
    for r in rows:
        out.write(json.dumps({"kind": r.kind, "key": r.row_key, "record": r.record}, ensure_ascii=False,
                             sort_keys=True, default=str) + "\n")


def write_export_file(path: str | Path, head: Mapping[str, Any], rows: Iterable[Any]) -> None:
    """Written beside the target and renamed over it: a reader never sees half an export."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or Path("."))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            write_export(out, head, rows)
        os.chmod(tmp, 0o600)  # personal data: the operator's to share
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# -- reading an export ------------------------------------------------------------------------------------------


def read_export(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and the rows of an export file, checked whole: ExportFileError names the first bad line."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except UnicodeDecodeError as exc:
        raise ExportFileError(f"{path}: not UTF-8 text (byte {exc.start} cannot be decoded)") from exc
    parsed = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            parsed.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise ExportFileError(f"{path}:{number}: not JSON ({exc.msg})") from exc
    if not parsed:
        raise ExportFileError(f"{path}: empty: an export starts with its header line")
    number, head = parsed[0]
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        raise ExportFileError(f"{path}:{number}: not a pgrecall export (the first line has no "
                              f'"format": "{FORMAT}")')
    version = head.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= FORMAT_VERSION:
        raise ExportFileError(f"{path}:{number}: export format version {version!r}; this pgrecall reads versions "
                              f"1 to {FORMAT_VERSION} (a newer pgrecall wrote it: upgrade to import it)")
    selector = head.get("selector")
    if selector is not None and (not isinstance(selector, dict) or not all(
            isinstance(selector.get(k), (str, type(None))) for k in ("data_subject", "peer"))):
        raise ExportFileError(f'{path}:{number}: the header\'s "selector" must be an object such as '
                              '{"data_subject": "u-42"} or {"peer": "ana"}')
    rows = []
    for number, row in parsed[1:]:
        if (not isinstance(row, dict) or not isinstance(row.get("kind"), str) or not isinstance(row.get("key"), str)
                or not isinstance(row.get("record"), dict)):
            raise ExportFileError(f"{path}:{number}: a row is an object with a kind, a key and a record")
        problem = _shape_problem(row["kind"], row["record"])
        if problem:
            raise ExportFileError(f"{path}:{number}: the {row['kind']} row's record {problem}")
        rows.append({**row, "_line": number})
    problem = _history_problem(rows)
    if problem:
        raise ExportFileError(f"{path}:{problem}")
    declared = head.get("rows")
    if declared is not None and declared != len(rows):
        raise ExportFileError(f"{path}: the header says {declared} rows and the file has {len(rows)}: "
                              "the file is cut short or was edited")
    return head, rows


# What the replay reads of each kind's record, and the JSON type each must have: a file edited by hand
# or by an attacker is refused naming its line and field, never half-read into an internal error.
# (name, type, required); "ints" and "strs" are arrays of them, "place" is {"scope": ..., "offset": ...}.
_PLACES = ("observations", "places", False)
ROW_SHAPES: dict[str, tuple[tuple[str, str, bool], ...]] = {
    "peer": (("name", "str", True), ("kind", "str", False), ("metadata", "dict", False)),
    "observation": (("scope", "str", True), ("log_offset", "int", True), ("body", "str", True),
                    ("source_role", "str", True), ("kind", "str", True), ("names", "names", True),
                    ("occurred_at", "time", False), ("payload", "dict", False), ("retention_until", "time", False)),
    "session": (("scope", "str", True), ("name", "str", False), ("metadata", "dict", False)),
    "memory": (("id", "int", True), ("scope", "str", True), ("revision", "revision", True), ("body", "str", True),
               ("kind", "str", True), ("purposes", "strs", True), ("names", "names", False),
               ("evidence", "ints", False), ("derived_from", "ints", False), ("about", "strs", False),
               ("title", "str", False), ("confidence", "number", False), ("superseded_by", "int", False),
               ("created_at", "time", False), ("updated_at", "time", False), ("invalidated_at", "time", False),
               ("valid", "range", False), ("invalidation_reason", "str", False), ("pinned", "bool", False),
               ("store_namespace", "strs", False), ("store_key", "str", False), ("store_value", "dict", False)),
    "memory_revision": (("memory_id", "int", True), ("revision", "revision", True), ("body", "str", False),
                        ("title", "str", False), ("reason", "str", False), ("changed_at", "time", False),
                        ("store_value", "dict", False)),
    "memory_correction_evidence": (("memory_id", "int", True), ("revision", "revision", True), _PLACES),
    "fact": (("id", "int", True), ("scope", "str", True), ("predicate", "str", True), ("names", "names", False),
             ("entities", "dict", False), ("known", "range", False), ("valid", "range", False),
             ("purposes", "strs", False), ("confidence", "number", False)),
    "fact_evidence": (("fact_id", "int", True), ("quote", "str", True), ("byte_start", "int", True),
                      ("byte_end", "int", True), _PLACES),
    "duplicate_decision": (("memory_low", "int", True), ("memory_high", "int", True), ("decision", "str", True),
                           ("reason", "str", True), ("retired_memory", "int", False), ("decided_at", "time", False)),
    "entity_alias": (("entity", "str", True), ("alias", "str", True), ("scope", "str", True)),
}
_WHAT = {"str": "a string", "bool": "a boolean (true or false)",
         "int": "an integer", "revision": "a revision number (1 to 2147483647)", "dict": "an object",
         "number": "a number", "strs": "an array of strings", "ints": "an array of integers",
         "names": "an object of peer names (strings, or arrays of them)",
         "places": "an object of {\"scope\", \"offset\"} places", "time": "an ISO 8601 time with its zone",
         "range": "a time range as PostgreSQL prints it (with zones, from its start to its end)"}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _fits(kind: str, value: Any) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind == "bool":
        return isinstance(value, bool)
    if kind in ("int", "revision"):
        # a revision is an integer column: a larger number is no revision any history made
        return _is_int(value) and (kind == "int" or 1 <= value <= 2**31 - 1)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "dict":
        return isinstance(value, dict)
    if kind in ("strs", "ints"):
        return isinstance(value, list) and all(isinstance(v, str) if kind == "strs" else _is_int(v) for v in value)
    if kind == "names":
        return isinstance(value, dict) and all(
            v is None or isinstance(v, str) or (isinstance(v, list) and all(isinstance(n, str) for n in v))
            for v in value.values())
    if kind == "places":
        return isinstance(value, dict) and all(
            v is None or (isinstance(v, dict) and isinstance(v.get("scope"), str) and _is_int(v.get("offset")))
            for v in value.values())
    try:
        times = [datetime.fromisoformat(value)] if kind == "time" else [t for t in _range(value) if t is not None]
        # an export writes every time with its zone, one without it cannot be ordered among the others; and
        # a range that ends before it begins is none PostgreSQL prints (a fact retracted before it was believed)
        return isinstance(value, str) and all(t.tzinfo is not None for t in times) and times == sorted(times)
    except (TypeError, ValueError):
        return False


def _shape_problem(kind: str, record: Mapping[str, Any]) -> str | None:
    """Why a record of ``kind`` cannot be replayed (a field missing or of the wrong type), or None. Kinds the
    replay does not import are not looked into."""
    shape = ROW_SHAPES.get(kind, ())
    if shape and record.get("id") is not None and not _is_int(record["id"]):  # the replay's order
        return f"field 'id' must be {_WHAT['int']}"
    if kind == "observation" and isinstance(record.get("names"), dict) \
            and not isinstance(record["names"].get("actor_id"), str):  # the turn's speaker: the replay's principal
        return "field 'names' has no 'actor_id' (the name of the peer who said it, a string)"
    if kind == "memory" and len({record.get(f) is None for f in ("store_namespace", "store_key", "store_value")}) > 1:
        return ("is half a store item: a store item has a namespace, a key and a value "
                "('store_namespace', 'store_key', 'store_value'), a memory none of them")
    for name, want, required in shape:
        value = record.get(name)
        if value is None:
            if required:
                return f"has no {name!r} ({_WHAT[want]})"
            continue
        if not _fits(want, value):
            return f"field {name!r} must be {_WHAT[want]}"
    return None


def _history_problem(rows: list[dict[str, Any]]) -> str | None:
    """"LINE: why" when the rows cannot be one tenant's history (an edited file): two rows for one memory, fact or
    revision (the replay kept one of them silently), a duplicate decision retiring a memory outside its pair, a
    revision kept for a text at or after its memory's current one, a memory superseded by itself or around a
    cycle (the replay wrote a copy of it, or none), or one derived from itself or around a cycle (the replay wrote
    it from what it stood on first, as if told)."""
    seen: dict[tuple[Any, ...], int] = {}
    for r in rows:
        rec = r["record"]
        key = {"memory": ("memory", rec.get("id")), "fact": ("fact", rec.get("id")),
               "memory_revision": ("revision", rec.get("memory_id"), rec.get("revision"))}.get(r["kind"])
        if key is None:
            continue
        if key in seen:
            what = f"revision {key[2]} of memory {key[1]}" if key[0] == "revision" else f"{key[0]} {key[1]}"
            return f"{r['_line']}: {what} is on line {seen[key]} already"
        seen[key] = r["_line"]
    for r in rows:
        rec = r["record"]
        if r["kind"] == "duplicate_decision" and rec.get("retired_memory") not in (None, rec["memory_low"],
                                                                                   rec["memory_high"]):
            # the replay would retire it for a pair the row does not name, and skip its own supersession
            return (f"{r['_line']}: field 'retired_memory' is {rec['retired_memory']}, which is neither "
                    f"memory_low ({rec['memory_low']}) nor memory_high ({rec['memory_high']})")
    memories = {r["record"]["id"]: r for r in rows if r["kind"] == "memory"}
    for r in rows:
        kept = memories.get(r["record"].get("memory_id")) if r["kind"] == "memory_revision" else None
        if kept is not None and r["record"]["revision"] >= kept["record"]["revision"]:
            return (f"{r['_line']}: field 'revision' is {r['record']['revision']}, but memory "
                    f"{kept['record']['id']} (line {kept['_line']}) is at revision {kept['record']['revision']}: "
                    "a kept revision is an earlier text")
    for memory_id, r in memories.items():
        chain, at = [memory_id], r["record"].get("superseded_by")
        while at in memories and at not in chain:
            chain.append(at)
            at = memories[at]["record"].get("superseded_by")
        if at == memory_id:
            return (f"{r['_line']}: field 'superseded_by' makes a cycle: memory "
                    + " -> ".join(str(m) for m in [*chain, memory_id]) + " (each superseded by the next)")
    return _derivation_cycle(memories)


def _derivation_cycle(memories: Mapping[int, dict[str, Any]]) -> str | None:
    """"LINE: why" when a memory is derived from itself, directly or through others (an edited file: a memory is
    derived from memories that were there before it), else None. The cycle is named from its memory on the
    earliest line. One walk over the derivations, depth first, with its own stack (a chain may be long)."""
    state: dict[int, int] = {}  # 1: on the path walked now; 2: done, no cycle through it

    def sources(memory_id: int) -> Iterator[int]:
        return iter([m for m in memories[memory_id]["record"].get("derived_from") or [] if m in memories])

    for start in memories:
        if start in state:
            continue
        state[start] = 1
        path, stack = [start], [sources(start)]
        while stack:
            source = next(stack[-1], None)
            if source is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(source) == 1:
                cycle = path[path.index(source):]
                first = min(range(len(cycle)), key=lambda i: memories[cycle[i]]["_line"])
                cycle = cycle[first:] + cycle[:first]
                return (f"{memories[cycle[0]]['_line']}: field 'derived_from' makes a cycle: memory "
                        + " -> ".join(str(m) for m in [*cycle, cycle[0]]) + " (each derived from the next)")
            elif source not in state:
                state[source] = 1
                path.append(source)
                stack.append(sources(source))
    return None


# -- import -----------------------------------------------------------------------------------------------------


def _range(text: Any) -> tuple[datetime | None, datetime | None]:
    """A tstzrange as PostgreSQL prints it ('["2026-01-01 00:00:00+00",)'): its bounds, None where open."""
    if not isinstance(text, str) or len(text) < 3 or text == "empty":
        # "empty": what a memory superseded at the moment it was written (by an import) is valid for
        return None, None
    low, _, high = text[1:-1].partition(",")

    def bound(s: str) -> datetime | None:
        s = s.strip().strip('"')
        return datetime.fromisoformat(s) if s else None

    return bound(low), bound(high)


def _erased(name: str) -> bool:
    """An erased peer's name ("erased peer<U+00A0><id>"): no peer can be given it, so it is no peer here."""
    return "\u00a0" in name


def _audience(record: Mapping[str, Any]) -> list[str] | None:
    """A turn's audience less its erased peers, who see nothing there any more; the speaker stays in it, so
    a turn that only they and an erased peer saw is not widened to the whole scope."""
    audience = (record.get("names") or {}).get("audience")
    if audience is None:
        return None
    kept = [n for n in audience if not _erased(n)]
    return kept or [record["names"]["actor_id"]]


def _in_order(keys: Mapping[Any, tuple[Any, ...]], before: Mapping[Any, set[Any]]) -> list[Any]:
    """The steps, each after the steps it needs (``before``), otherwise in the order of their keys (when it
    happened there). What a cycle (an edited file) leaves waiting follows in key order, to fail where it fails."""
    waiting = {e: {d for d in before.get(e, ()) if d in keys and d != e} for e in keys}
    followers: dict[Any, list[Any]] = {}
    for event, needs in waiting.items():
        for need in needs:
            followers.setdefault(need, []).append(event)
    numbered = {e: n for n, e in enumerate(sorted(keys, key=lambda e: keys[e]))}
    ready = [(numbered[e], e) for e, needs in waiting.items() if not needs]
    heapq.heapify(ready)
    order: list[Any] = []
    while ready:
        _, event = heapq.heappop(ready)
        order.append(event)
        for follower in followers.get(event, []):
            waiting[follower].discard(event)
            if not waiting[follower]:
                heapq.heappush(ready, (numbered[follower], follower))
    done = set(order)
    return order + sorted((e for e in keys if e not in done), key=lambda e: numbered[e])


def _when(text: Any) -> datetime:
    """A time of the export (ISO 8601), or the earliest one for a time it does not give: the replay's order."""
    return datetime.fromisoformat(text) if isinstance(text, str) else datetime.min.replace(tzinfo=UTC)


def _at(record: Mapping[str, Any], column: str) -> tuple[str, int] | None:
    placed = (record.get("observations") or {}).get(column)
    return (placed["scope"], int(placed["offset"])) if isinstance(placed, dict) else None


class _Replay:
    """The export's rows replayed through the app's operations, kind by kind; ``line`` is the row at work."""

    def __init__(self, mem: Any, conn: psycopg.Connection[Any], head: Mapping[str, Any],
                 rows: list[dict[str, Any]]) -> None:
        self.mem, self.conn, self.rows = mem, conn, rows
        self.subject = (head.get("selector") or {}).get("data_subject")
        self.by_kind: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            self.by_kind.setdefault(r["kind"], []).append(r)
        self.offsets: dict[tuple[str, int], int] = {}     # (scope, offset there) -> offset here
        self.memories: dict[int, int] = {}                  # memory id there -> id here
        self.session_ids: dict[int, int] = {}               # session id there -> id here
        self.revision_here: dict[int, int] = {}             # memory id there -> its revision here
        self.memory_rows: dict[int, dict[str, Any]] = {}
        self.revisions: dict[int, dict[int, Mapping[str, Any]]] = {}
        self.cited: dict[int, dict[int, list[tuple[str, int] | None]]] = {}
        self.replacing: dict[int, int] = {}                 # replacement there -> the memory it replaced there
        self.done: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()
        self.line = 0

    def kind(self, kind: str) -> list[dict[str, Any]]:
        return sorted(self.by_kind.get(kind, []), key=lambda r: r["record"].get("id") or 0)

    def run(self) -> None:
        self.scopes_and_peers()
        self.sessions()
        self.observations()
        self.memories_with_revisions()
        self.facts()
        self.aliases()
        for kind, rows in self.by_kind.items():
            if kind not in {"observation", "peer", "session", "memory", "memory_revision", "fact", "fact_evidence",
                            "entity_alias", "memory_correction_evidence", "duplicate_decision"}:
                self.skipped[kind] += len(rows)
        # a correction's cited turns go in with the correction; another subject's memory's do not
        left = len(self.kind("memory_correction_evidence")) - self.done["memory_correction_evidence"]
        if left > 0:
            self.skipped["memory_correction_evidence"] += left

    def scopes_and_peers(self) -> None:
        # each scope at the first line that names it, so that a refused name is shown where it is
        scopes = {r["record"]["scope"]: r["_line"] for r in reversed(self.rows)
                  if isinstance(r["record"].get("scope"), str)}
        for scope in sorted(scopes):
            self.line = scopes[scope]
            self.mem.add_scope(scope)
        kinds: dict[str, str] = {}
        for r in self.kind("peer"):
            kinds[r["record"]["name"]] = r["record"].get("kind", "human")
        for r in self.rows:
            for column, name in (r["record"].get("names") or {}).items():
                for n in name if isinstance(name, list) else [name]:
                    if n is None:
                        continue
                    role = r["record"].get("source_role") if column == "actor_id" else None
                    kinds.setdefault(n, "agent" if role in ("assistant", "tool") or column == "created_by" else "human")
        for r in self.kind("peer"):
            self.line = r["_line"]
            rec = r["record"]
            self.mem.add_peer(rec["name"], kind=rec.get("kind"), metadata=rec.get("metadata") or {},
                              data_subject_id=self.subject)
            self.done["peer"] += 1
        exported = {r["record"]["name"] for r in self.kind("peer")}
        for name, kind in kinds.items():
            if _erased(name) or name in exported:
                continue
            try:
                with self.conn.transaction():  # the kind is a guess: a peer of that name already here stays as it is
                    self.mem.add_peer(name, kind=kind)
            except errors.InvalidArgument:
                pass

    def observations(self) -> None:
        turns = sorted(self.kind("observation"), key=lambda r: (r["record"]["scope"], r["record"]["log_offset"]))
        for scope in dict.fromkeys(r["record"]["scope"] for r in turns):
            batch = [r for r in turns if r["record"]["scope"] == scope]
            for start in range(0, len(batch), 500):
                chunk = batch[start:start + 500]
                self.line = chunk[0]["_line"]
                rows = [{"body": r["record"]["body"], "source_role": r["record"]["source_role"],
                         "kind": r["record"]["kind"], "actor": r["record"]["names"]["actor_id"],
                         "occurred_at": r["record"]["occurred_at"], "payload": r["record"].get("payload") or {},
                         "data_subject_id": r["record"].get("data_subject_id"),
                         "lawful_basis": r["record"].get("lawful_basis"),
                         "classification": r["record"].get("classification") or "internal",
                         "retention_until": r["record"].get("retention_until"),
                         "audience": _audience(r["record"]),
                         "session_id": self.session_ids.get(r["record"].get("session_id"))} for r in chunk]
                new = self.mem.append_many(rows, scope=scope, principal=rows[0]["actor"])
                for r, offset in zip(chunk, new, strict=True):
                    self.offsets[(scope, int(r["record"]["log_offset"]))] = offset
                self.done["observation"] += len(chunk)

    def sessions(self) -> None:
        """The sessions, before their turns: each exported one by its name, each other one a turn was said in (it
        is not the subject's, so its name is not in the export) under a name made here; in each, the peers who
        spoke or were told something in it, and those the export says were in it."""
        principal = next(iter(self.mem_peers()), None)
        for r in self.kind("session"):
            self.line, rec = r["_line"], r["record"]
            if rec.get("name"):
                self.session_ids[rec["id"]] = self.mem.create_session(
                    rec["name"], scope=rec["scope"], metadata=rec.get("metadata") or {}, data_subject_id=self.subject,
                    principal=principal)
                self.done["session"] += 1
        peers: dict[int, dict[str, None]] = {}
        for r in sorted(self.kind("observation"), key=lambda r: (r["record"]["scope"], r["record"]["log_offset"])):
            self.line, rec = r["_line"], r["record"]
            session = rec.get("session_id")
            if not _is_int(session):
                continue
            if session not in self.session_ids:
                self.session_ids[session] = self.mem.create_session(scope=rec["scope"], principal=principal)
            names = rec.get("names") or {}
            peers.setdefault(session, {}).update(dict.fromkeys([names["actor_id"], *(_audience(rec) or [])]))
        for r in self.kind("working_representation"):
            session, peer = r["record"].get("session_id"), (r["record"].get("names") or {}).get("peer_id")
            if session in self.session_ids and isinstance(peer, str) and not _erased(peer):
                peers.setdefault(session, {})[peer] = None
        for session, names in sorted(peers.items()):
            self.mem.add_session_peers(self.session_ids[session], list(names), principal=principal)

    @functools.cached_property
    def speakers(self) -> dict[tuple[str, int], str]:
        """Who spoke each turn of the export, by (scope, offset there): read once, not at every step an erased
        peer made."""
        return {(r["record"]["scope"], r["record"]["log_offset"]): r["record"]["names"]["actor_id"]
                for r in self.by_kind.get("observation", [])}

    def mem_peers(self) -> list[str]:
        return [r["record"]["names"]["actor_id"] for r in self.kind("observation")] + \
               [r["record"]["name"] for r in self.kind("peer") if not _erased(r["record"]["name"])]

    def acting(self, name: Any, rec: Mapping[str, Any], places: Iterable[tuple[str, int]] = ()) -> str | None:
        """Who makes a step here: the peer who made it there, unless that peer was erased (a memory it wrote on
        another's words outlives it, under a name no peer can be given); then the peer it is for, else the first
        who spoke a turn it cites, else the first peer of the export."""
        if isinstance(name, str) and not _erased(name):
            return name
        candidates = [(rec.get("names") or {}).get("audience_peer_id"), *(self.speakers.get(p) for p in places),
                      *self.mem_peers()]
        return next((c for c in candidates if isinstance(c, str) and not _erased(c)), None)

    def cited_places(self, rec: Mapping[str, Any]) -> list[tuple[str, int]]:
        return [(rec["scope"], o) for o in rec.get("evidence") or []]

    def mapped(self, places: Iterable[tuple[str, int] | None]) -> list[int]:
        return sorted({self.offsets[p] for p in places if p is not None and p in self.offsets})

    def memories_with_revisions(self) -> None:
        """Each memory's life replayed in the order it happened, across memories: written (remembered, derived,
        or made by the supersession that replaced another), corrected, superseded or decided a duplicate,
        forgotten. In that order a derivation finds its sources still current, a correction finds the revision
        it follows, and a superseded memory points to its replacement as it did there."""
        revisions: dict[int, dict[int, Mapping[str, Any]]] = {}
        for r in self.kind("memory_revision"):
            revisions.setdefault(r["record"]["memory_id"], {})[r["record"]["revision"]] = r["record"]
        cited: dict[int, dict[int, list[tuple[str, int] | None]]] = {}
        for r in self.kind("memory_correction_evidence"):
            rec = r["record"]
            cited.setdefault(rec["memory_id"], {}).setdefault(rec["revision"], []).append(_at(rec, "observation_id"))
        self.memory_rows = {r["record"]["id"]: r for r in self.kind("memory")}
        self.revisions, self.cited = revisions, cited
        decided = {r["record"].get("retired_memory") for r in self.kind("duplicate_decision")}
        # a replacement that supersede() wrote: made when the memory it replaced is superseded, not before
        self.replacing = {rec["superseded_by"]: rec["id"] for rec in (r["record"] for r in self.memory_rows.values())
                          if rec.get("superseded_by") in self.memory_rows and rec["id"] not in decided}
        steps: dict[tuple[Any, ...], tuple[tuple[Any, ...], Any]] = {}
        before: dict[tuple[Any, ...], set[tuple[Any, ...]]] = {}

        def step(event: tuple[Any, ...], when: datetime, memory_id: int, phase: int, n: int, action: Any,
                 after: Iterable[tuple[Any, ...]] = ()) -> None:
            steps[event] = ((when, memory_id, phase, n), action)
            before.setdefault(event, set()).update(after)

        # What each step needs done first, for the steps an export gives the same moment (an import writes
        # everything at one moment): a memory is written before it is corrected, corrected before it is
        # superseded or forgotten, derived from before that, and its replacement is written by its supersession.
        users: dict[int, list[int]] = {}
        for memory_id, r in self.memory_rows.items():
            if r["record"].get("origin") == "derived":
                for source in r["record"].get("derived_from") or []:
                    users.setdefault(source, []).append(memory_id)
        def written(memory_id: int) -> tuple[Any, ...]:
            """The step that writes a memory here: its own, or the supersession that made it."""
            return ("s", self.replacing[memory_id]) if memory_id in self.replacing else ("w", memory_id)

        last: dict[int, tuple[Any, ...]] = {}
        for memory_id, r in self.memory_rows.items():
            rec = r["record"]
            last[memory_id] = written(memory_id)
            if memory_id not in self.replacing:
                step(("w", memory_id), _when(rec.get("created_at")), memory_id, 0, 0, (self.write, r),
                     after=[written(m) for m in rec.get("derived_from") or [] if m in self.memory_rows])
            for n, text in self.texts(rec)[:-1]:
                step(("c", memory_id, n), _when(text.get("changed_at")), memory_id, 1, n, (self.correction, r, n),
                     after=[last[memory_id]])
                last[memory_id] = ("c", memory_id, n)
        for memory_id, r in self.memory_rows.items():
            rec = r["record"]
            end = [last[memory_id], *(("w", m) for m in users.get(memory_id, []))]
            if rec.get("superseded_by") is not None and memory_id not in decided:
                step(("s", memory_id), _range(rec.get("valid"))[1] or _when(rec.get("updated_at")), memory_id, 2, 0,
                     (self.supersession, r), after=end)
                end = [("s", memory_id)]
            if rec.get("invalidated_at") and memory_id not in decided:
                step(("f", memory_id), _when(rec["invalidated_at"]), memory_id, 3, 0, (self.forgetting, r), after=end)
        for r in self.kind("duplicate_decision"):
            rec = r["record"]
            pair = [m for m in (rec["memory_low"], rec["memory_high"]) if m in last]
            step(("d", r["_line"]), _when(rec.get("decided_at")), rec.get("retired_memory") or rec["memory_low"], 2, 0,
                 (self.decision, r), after=[last[m] for m in pair] + [("w", u) for m in pair for u in users.get(m, [])])
            for m in pair:  # both were still current
                for later in (("s", m), ("f", m)):
                    before.setdefault(later, set()).add(("d", r["_line"]))
        for event in _in_order({e: key for e, (key, _) in steps.items()}, before):
            action, *args = steps[event][1]
            action(*args)

    def texts(self, rec: Mapping[str, Any]) -> list[tuple[int, Mapping[str, Any]]]:
        """The texts a memory had, first to current, each with the revision it was: the ones before the current
        are kept in memory_revision, one row per correction (a supersession, a forgetting or an erasure moves
        the revision without one). Only those in the file: a revision number is not a count to build a list of
        (a file may say 10**12)."""
        kept = self.revisions.get(rec["id"], {})
        return [(n, kept[n]) for n in sorted(kept) if n < rec["revision"] and kept[n].get("body")] + \
            [(rec["revision"], rec)]

    def told(self, rec: Mapping[str, Any]) -> list[int]:
        """The turns a memory was first written on, here: its evidence less what its corrections cited, or all
        of it when a correction cited only turns it was written on."""
        corrected = {p for places in self.cited.get(rec["id"], {}).values() for p in places if p is not None}
        evidence = [(rec["scope"], o) for o in rec.get("evidence") or []]
        return self.mapped(p for p in evidence if p not in corrected) or self.mapped(evidence)

    def write(self, r: Mapping[str, Any]) -> None:
        self.line, rec = r["_line"], r["record"]
        names = rec.get("names") or {}
        principal = self.acting(names.get("created_by"), rec, self.cited_places(rec))
        first = self.texts(rec)[0][1]
        sources = [self.memories[m] for m in rec.get("derived_from") or [] if m in self.memories]
        if rec.get("origin") == "derived" and sources and not self.narrower_than_its_sources_here(rec):
            memory_id = self.mem.derive(sources, first["body"], kind=rec["kind"], title=first.get("title"),
                                        confidence=rec.get("confidence"), about=rec.get("about") or [],
                                        widening_reason=rec.get("widening_reason"), principal=principal)
        else:
            made = self.mem.remember(first["body"], evidence=self.told(rec), purposes=rec["purposes"],
                                     scope=rec["scope"], audience=names.get("audience_peer_id"), kind=rec["kind"],
                                     title=first.get("title"), confidence=rec.get("confidence", 1.0),
                                     about=rec.get("about") or [], observer=names.get("observer_peer_id"),
                                     widening_reason=rec.get("widening_reason"), embed=False, principal=principal)
            if made.memory_id is None:
                self.skipped["memory"] += 1  # e.g. no turn it cites is in the export
                return
            memory_id = made.memory_id
            if rec.get("store_key") is not None:  # a store item: the item its first put made
                self.mem.store_restore(memory_id, 1, rec["store_namespace"], rec["store_key"],
                                       self.store_value(self.texts(rec), 0), principal=principal)
        self.made(rec, memory_id)

    @staticmethod
    def store_value(texts: list[tuple[int, Mapping[str, Any]]], at: int) -> Any:
        """A store item's value at its text ``at``: the value kept with it, or with the next one kept (a plain
        correction of an item keeps its value and writes none into the revision it keeps)."""
        return next(t["store_value"] for _, t in texts[at:] if t.get("store_value") is not None)

    def narrower_than_its_sources_here(self, rec: Mapping[str, Any]) -> bool:
        """Whether a derived memory was for fewer peers or purposes than the sources the export holds allow: a
        source it does not hold (another subject's) narrowed it there, and derived here from the rest it would
        reach more. Such a memory is not imported (derive takes its audience and purposes from its sources)."""
        held = [self.memory_rows[m]["record"] for m in rec.get("derived_from") or []
                if m in self.memories and m in self.memory_rows]
        audiences = {(s.get("names") or {}).get("audience_peer_id") for s in held} - {None}
        purposes = set.intersection(*(set(s.get("purposes") or []) for s in held)) if held else set()
        audience = (rec.get("names") or {}).get("audience_peer_id")
        return audiences != ({audience} - {None}) or purposes != set(rec.get("purposes") or [])

    def made(self, rec: Mapping[str, Any], memory_id: int) -> None:
        self.memories[rec["id"]] = memory_id
        self.revision_here[rec["id"]] = 1
        self.done["memory"] += 1
        if rec.get("pinned"):  # in every session-start bundle there, and so here
            self.mem.pin(memory_id, principal=self.acting((rec.get("names") or {}).get("created_by"), rec,
                                                          self.cited_places(rec)))

    def correction(self, r: Mapping[str, Any], n: int) -> None:
        """The correction that followed revision n: the next text, with the reason and the turns it cited."""
        self.line, rec = r["_line"], r["record"]
        if rec["id"] not in self.memories:
            return
        texts = self.texts(rec)
        old = next(i for i, (revision, _) in enumerate(texts) if revision == n)
        if rec.get("store_key") is not None and texts[old][1].get("store_value") is not None:  # a put of the item
            self.revision_here[rec["id"]] = self.mem.store_restore(
                self.memories[rec["id"]], self.revision_here[rec["id"]], rec["store_namespace"], rec["store_key"],
                self.store_value(texts, old + 1),
                principal=self.acting(self.corrector(texts[old][1], rec), rec, self.cited_places(rec)))
            self.done["memory_revision"] += 1
            return
        new, evidence = texts[old + 1][1], self.mapped(self.cited.get(rec["id"], {}).get(n + 1, []))
        self.revision_here[rec["id"]] = self.mem.correct(
            self.memories[rec["id"]], new["body"], revision=self.revision_here[rec["id"]], title=new.get("title"),
            reason=texts[old][1].get("reason"), evidence=evidence or None,
            widening_reason=rec.get("widening_reason"),
            principal=self.acting(self.corrector(texts[old][1], rec), rec, self.cited_places(rec)))
        self.done["memory_revision"] += 1
        self.done["memory_correction_evidence"] += len(evidence)

    @staticmethod
    def corrector(kept: Mapping[str, Any], rec: Mapping[str, Any]) -> str | None:
        """Who made the correction that kept this text: its row names them; else the memory's author."""
        return (kept.get("names") or {}).get("changed_by") or (rec.get("names") or {}).get("created_by")

    def supersession(self, r: Mapping[str, Any]) -> None:
        """Superseded by the memory that supersede() wrote in its place, written here the same way; a
        replacement the export does not hold (another subject's) leaves it forgotten, with that said."""
        self.line, rec = r["_line"], r["record"]
        replacement = self.memory_rows.get(rec["superseded_by"])
        if rec["id"] not in self.memories:
            if replacement is not None and self.replacing.get(rec["superseded_by"]) == rec["id"]:
                self.write(replacement)  # what it replaced is not here: written as told
            return
        evidence = self.told(replacement["record"]) if replacement is not None else []
        if replacement is None or not evidence:
            if replacement is not None:
                self.skipped["memory"] += 1  # no turn it was written on is in the export
            self.forget_here(rec, f"superseded by memory {rec['superseded_by']} of the export")
            return
        self.line, new = replacement["_line"], replacement["record"]
        first = self.texts(new)[0][1]
        memory_id = self.mem.supersede(
            self.memories[rec["id"]], first["body"], revision=self.revision_here[rec["id"]], evidence=evidence,
            title=first.get("title"), confidence=new.get("confidence"), about=new.get("about") or [],
            widening_reason=new.get("widening_reason"),
            principal=self.acting((new.get("names") or {}).get("created_by"), new, self.cited_places(new)))
        self.revision_here[rec["id"]] += 1
        self.made(new, memory_id)

    def forgetting(self, r: Mapping[str, Any]) -> None:
        self.line, rec = r["_line"], r["record"]
        if rec["id"] in self.memories:
            self.forget_here(rec, rec.get("invalidation_reason") or "forgotten in the exporting tenant")

    def forget_here(self, rec: Mapping[str, Any], reason: str) -> None:
        self.revision_here[rec["id"]] = self.mem.forget(self.memories[rec["id"]], reason=reason,
                                                        principal=self.acting((rec.get("names") or {}).get(
                                                            "created_by"), rec, self.cited_places(rec)))

    def decision(self, r: Mapping[str, Any]) -> None:
        """A person's decision about a pair of duplicates, made again here: the retired memory superseded by or
        forgotten for the other one, or both kept."""
        self.line, rec = r["_line"], r["record"]
        low, high, retired = rec["memory_low"], rec["memory_high"], rec.get("retired_memory")
        a, b = (retired, high if retired == low else low) if retired is not None else (low, high)
        if a not in self.memories or b not in self.memories:
            self.skipped["duplicate_decision"] += 1
            return
        done = self.mem.decide_duplicate(self.memories[a], self.memories[b], rec["decision"], reason=rec["reason"],
                                         principal=self.acting((rec.get("names") or {}).get("decided_by"),
                                                               self.memory_rows[a]["record"]))
        if done.retired_revision is not None:
            self.revision_here[a] = done.retired_revision
        self.done["duplicate_decision"] += 1

    def facts(self) -> None:
        evidence: dict[int, list[dict[str, Any]]] = {}
        quoted: dict[int, list[tuple[str, int]]] = {}  # fact id there -> the turns it quotes, there
        for r in self.kind("fact_evidence"):
            rec = r["record"]
            place = _at(rec, "observation_id")
            if place is not None and place in self.offsets:
                quoted.setdefault(rec["fact_id"], []).append(place)
                evidence.setdefault(rec["fact_id"], []).append(
                    {"offset": self.offsets[place], "quote": rec["quote"], "start": rec["byte_start"],
                     "end": rec["byte_end"]})
        # The facts' history, in the order it was known: each asserted when it came to be believed (a
        # single-valued predicate's newer value closes the older one, as it did there), and retracted, with
        # its reason, when it stopped being believed without a newer value.
        steps = []
        for r in self.kind("fact"):
            known_from, known_to = _range(r["record"].get("known"))
            steps.append((known_from or _when(None), r["record"]["id"], 0, r))
            if known_to is not None and r["record"].get("retraction_reason"):
                steps.append((known_to, r["record"]["id"], 1, r))
        here: dict[int, int] = {}
        for _, fact_id, phase, r in sorted(steps, key=lambda s: s[:3]):
            self.line, rec = r["_line"], r["record"]
            if phase == 1:
                if fact_id in here:
                    self.mem.retract_fact(here[fact_id], reason=rec["retraction_reason"],
                                          principal=self.acting((rec.get("names") or {}).get("asserted_by"), rec))
                continue
            if fact_id not in evidence:
                self.skipped["fact"] += 1  # no quote of it is in the export
                continue
            names, entities = rec.get("names") or {}, rec.get("entities") or {}
            valid_from, valid_to = _range(rec.get("valid"))
            here[fact_id] = self.mem.assert_fact(
                entities.get("subject_id"), rec["predicate"], entities.get("object_id") or rec.get("object_value"),
                evidence=evidence[fact_id], statement=rec.get("statement"), valid_from=valid_from,
                valid_to=valid_to, confidence=rec.get("confidence", 1.0), observer=names.get("observer_peer_id"),
                audience=names.get("audience_peer_id"), purposes=rec.get("purposes"),
                widening_reason=rec.get("widening_reason"), scope=rec["scope"],
                principal=self.acting(names.get("asserted_by"), rec, quoted.get(fact_id, []))).fact_id
            self.done["fact"] += 1

    def aliases(self) -> None:
        principal = next(iter(self.mem_peers()), None)
        for r in self.kind("entity_alias"):
            self.line, rec = r["_line"], r["record"]
            try:
                with self.conn.transaction():  # an entity that nothing imported names is not here
                    self.mem.add_entity_alias(rec["entity"], rec["alias"], scope=rec["scope"],
                                              data_subject_id=self.subject, principal=principal)
                self.done["entity_alias"] += 1
            except errors.UnknownEntity:
                self.skipped["entity_alias"] += 1


def import_export(path: str | Path, *, tenant: str, conninfo: str | None = None) -> dict[str, Any]:
    """Replay an export file into a tenant as its app role, in one transaction: all of it or nothing.
    Returns what was imported and what was not, per kind."""
    from .driver import Memory

    check_tenant_name(tenant)
    head, rows = read_export(path)
    with _connect(conninfo or db.tenant_conninfo(tenant), tenant, "app") as conn:
        replay = _Replay(Memory(tenant, conn=conn, scopes=_scopes(rows)), conn, head, rows)
        try:
            replay.run()
        except (errors.PgrecallError, psycopg.Error) as exc:
            conn.rollback()
            said, hint = _said(exc)
            raise ExportFileError(f"{path}:{replay.line}: {said} (nothing was imported)"
                                  + (f" (hint: {hint})" if hint else "")) from exc
        conn.commit()
    return {"imported": dict(replay.done), "not_imported": dict(replay.skipped), "tenant": tenant,
            "from_tenant": head.get("tenant"), "selector": head.get("selector")}


def _said(exc: Exception) -> tuple[str, str | None]:
    """The refusal and its hint apart, as the CLI shows an error: str() puts the hint on a line of its own,
    which the CLI's one-line output showed as a literal backslash and n."""
    if isinstance(exc, errors.PgrecallError):
        return str(exc.args[0]), exc.hint
    return " ".join(str(exc).split()), None


def _scopes(rows: list[dict[str, Any]]) -> list[str]:
    return sorted({r["record"]["scope"] for r in rows if isinstance(r["record"].get("scope"), str)}) or ["default"]
