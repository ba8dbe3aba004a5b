"""``pgrecall import FILE.jsonl``: a conversation, one JSON object a line, into the log.

Each line: ``{"speaker": "ana", "role": "user", "text": "...",`` and optionally
``"occurred_at": ISO-8601 (without a zone, UTC), "kind": "message", "session_id": 1,
"speaker_kind": "human"|"agent"|"other", "data_subject_id": "...", "payload": {...},
"audience": ["ana", "sage"]}``.
A ``session_id`` is the file's label for a session, the JSON value as written (a
number or a string; a file that writes one label both ways, 1 and "1", is refused,
since both would be one session): the turns go to the scope's session named
``session <label>`` (created if needed), whose peers are everyone
who speaks in it in the file; each of its turns is seen by them, or by the
narrower ``audience`` the line names (speakers of that session). A turn without a
session is seen by the whole scope, or by the ``audience`` it names.
The file is checked whole before anything is written, and then imported in
one transaction: all of it, or none.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from . import db, errors
from .driver import Memory
from .names import check_tenant_name

REQUIRED = ("speaker", "role", "text")
ALLOWED = set(REQUIRED) | {"occurred_at", "kind", "session_id", "speaker_kind", "data_subject_id", "payload",
                           "lawful_basis", "classification", "audience"}


class ImportFileError(ValueError):
    """The file cannot be imported; the message names the line."""


def read_turns(path: str | Path) -> list[dict[str, Any]]:
    try:
        return _read_turns(path)
    except UnicodeDecodeError as exc:  # a binary file given by mistake is bad input, not a crash
        raise ImportFileError(f"{path}: not UTF-8 text (byte {exc.start} cannot be decoded)") from exc


def _read_turns(path: str | Path) -> list[dict[str, Any]]:
    turns = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            turn = _json_line(path, number, line)
            if not isinstance(turn, dict):
                raise ImportFileError(f"{path}:{number}: expected an object")
            missing = [k for k in REQUIRED if not turn.get(k)]
            if missing:
                raise ImportFileError(f"{path}:{number}: missing {', '.join(missing)}")
            unknown = set(turn) - ALLOWED
            if unknown:
                raise ImportFileError(f"{path}:{number}: unknown field(s) {', '.join(sorted(unknown))}")
            named = [k for k in ("speaker", "role", "speaker_kind") if k in turn and not isinstance(turn[k], str)]
            if named:
                raise ImportFileError(f"{path}:{number}: {', '.join(named)} must be a string, not "
                                      f"{_json_type(turn[named[0]])}")
            if "session_id" in turn and (isinstance(turn["session_id"], bool)
                                         or not isinstance(turn["session_id"], (int, str, type(None)))):
                raise ImportFileError(f"{path}:{number}: session_id is a number or a string")
            if "audience" in turn and (not isinstance(turn["audience"], list)
                                       or not all(isinstance(a, str) for a in turn["audience"])):
                raise ImportFileError(f"{path}:{number}: audience is a list of peer names")
            if "occurred_at" in turn:
                try:
                    turn["occurred_at"] = datetime.fromisoformat(turn["occurred_at"])
                except (TypeError, ValueError) as exc:
                    raise ImportFileError(f"{path}:{number}: occurred_at is not ISO-8601") from exc
                if turn["occurred_at"].tzinfo is None:  # UTC, as every time the CLI reads: not PGTZ's zone
                    turn["occurred_at"] = turn["occurred_at"].replace(tzinfo=UTC)
            turn["_line"] = number
            turns.append(turn)
    _check_session_labels(path, turns)
    return turns


def _check_session_labels(path: str | Path, turns: list[dict[str, Any]]) -> None:
    """A session_id is the JSON value as written: 1 and "1" are two labels. Both would be the session named
    "session 1" (and so one session, whose peers see both labels' turns), so a file that writes one label both
    ways is refused at the second way, naming the first; nothing is imported."""
    first: dict[str, tuple[Any, int]] = {}
    for turn in turns:
        label = turn.get("session_id")
        if label is None:
            continue
        seen = first.setdefault(f"session {label}", (label, turn["_line"]))
        if type(seen[0]) is not type(label) or seen[0] != label:
            raise ImportFileError(
                f"{path}:{turn['_line']}: session_id {json.dumps(label)} ({_json_type(label)}) is not session_id "
                f"{json.dumps(seen[0])} ({_json_type(seen[0])}) of line {seen[1]}, but both would be the session "
                f"named 'session {label}': write each session's id the same way on every line (nothing was imported)")


def _json_type(value: Any) -> str:
    return {dict: "an object", list: "an array", bool: "a boolean", int: "a number", float: "a number",
            str: "a string"}.get(
        type(value), type(value).__name__)


def _json_line(path: str | Path, number: int, line: str) -> Any:
    """One line's JSON; what Python's parser cannot read (nested thousands deep, a number of thousands of
    digits) is refused with the line's number, as a syntax error is."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise ImportFileError(f"{path}:{number}: not JSON ({exc.msg})") from exc
    except RecursionError as exc:
        raise ImportFileError(f"{path}:{number}: not JSON this reader takes (nested too deeply)") from exc
    except ValueError as exc:  # int() of a number with more digits than Python converts
        raise ImportFileError(f"{path}:{number}: not JSON this reader takes ({exc})") from exc


BATCH = 500


def _failed_line(exc: Exception, chunk: list[dict[str, Any]]) -> int:
    """The file line of the row a batch error names ("(row N)"), else the batch's first line."""
    import re

    m = re.search(r"\(row (\d+)\)", str(exc))
    return int(chunk[int(m.group(1)) - 1]["_line"] if m else chunk[0]["_line"])


@contextlib.contextmanager
def _at_line(path: str | Path, line: int, conn: psycopg.Connection[Any]) -> Iterator[None]:
    """A refusal while the file's peers and sessions are made, named at the line that asked for it."""
    try:
        yield
    except (errors.PgrecallError, psycopg.Error) as exc:
        conn.rollback()
        ours = errors.translate(exc) if isinstance(exc, psycopg.Error) else exc
        message = ours.args[0] if isinstance(ours, errors.PgrecallError) and ours.args else str(ours)
        hint = getattr(ours, "hint", None)
        message += f" (hint: {hint})" if hint else ""
        raise ImportFileError(f"{path}:{line}: {message} (nothing was imported)") from exc


def import_jsonl(path: str | Path, *, tenant: str, scope: str, progress: bool = True,
                 conninfo: str | None = None) -> int:
    from tqdm import tqdm

    check_tenant_name(tenant)
    turns = read_turns(path)
    with psycopg.connect(conninfo or db.tenant_conninfo(tenant), autocommit=False) as conn:
        mem = Memory(tenant, conn=conn, scopes=[scope])
        mem.add_scope(scope)
        kinds: dict[str, tuple[str, int]] = {}
        for turn in turns:
            default_kind = "human" if turn["role"] == "user" else "agent"
            kinds.setdefault(turn["speaker"], (turn.get("speaker_kind") or default_kind, turn["_line"]))
        for speaker, (kind, line) in kinds.items():
            with _at_line(path, line, conn):  # the peer's first line: where its name or kind is refused
                mem.add_peer(speaker, kind)
        principal = turns[0]["speaker"] if turns else None
        sessions: dict[Any, int] = {}
        for turn in turns:
            label = turn.get("session_id")
            if label is not None and label not in sessions:
                with _at_line(path, turn["_line"], conn):
                    sessions[label] = mem.create_session(f"session {label}", principal=principal)
        # Who was there: everyone who speaks in a session is one of its peers before its first turn.
        for label, session in sessions.items():
            mem.add_session_peers(session, list(dict.fromkeys(t["speaker"] for t in turns
                                                              if t.get("session_id") == label)),
                                  principal=principal)
        # Batches of BATCH rows, one call each, all in one transaction.
        with tqdm(total=len(turns), desc="importing", unit="turn", disable=not progress) as bar:
            for start in range(0, len(turns), BATCH):
                chunk = turns[start:start + BATCH]
                rows = [{"body": t["text"], "source_role": t["role"], "kind": t.get("kind", "message"),
                         "actor": t["speaker"], "occurred_at": t.get("occurred_at"),
                         "session_id": sessions.get(t.get("session_id")),
                         "payload": t.get("payload"), "data_subject_id": t.get("data_subject_id"),
                         "lawful_basis": t.get("lawful_basis"), "classification": t.get("classification", "internal"),
                         "audience": t.get("audience")}
                        for t in chunk]
                try:
                    mem.append_many(rows, principal=chunk[0]["speaker"])
                except Exception as exc:
                    conn.rollback()
                    line = _failed_line(exc, chunk)
                    raise ImportFileError(f"{path}:{line}: {exc} (nothing was imported)") from exc
                bar.update(len(chunk))
        conn.commit()
    return len(turns)
