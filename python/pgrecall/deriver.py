"""The deriver loop: claims representation and summary tasks from the tenant's
work queue, turns messages into claims with a pluggable ``extract`` callable,
writes each as a memory through ``task_remember`` and, when the claim names a
predicate, as a fact through ``task_assert_fact`` with its quote and UTF-8
byte span. It logs in as the tenant's worker role, which may write only what
a task it holds allows: the database sets the scope, the acting peer and the
perspective from the task and checks evidence and role policy,
and completes each task in the same transaction as its writes.

A task is complete only when its results are committed with it: a deriver
that dies mid-task takes its database session with it, which ends its lease,
and the next claim (its own after a restart, or another deriver's) does the
work again. A task whose processing raises is given back
with ``fail_task`` (retried with backoff, then dead-lettered).

``extract(messages) -> claims`` is the user's (an LLM, typically). The
deterministic :func:`first_person` extractor shipped here takes only explicit
first-person statements ("I live in Lisbon", "my name is Ana", "I work at
Acme"); anything it cannot parse yields nothing, and nothing is written.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from . import db, errors, loop, names
from .driver import Memory, Task


@dataclass(frozen=True)
class Claim:
    """One explicit statement a message makes about its sender."""

    subject: str  # the peer it is about (the message's actor)
    predicate: str | None  # a predicate of the ontology (lives_in, has_name, works_at); None: a memory only
    object: str
    statement: str  # the memory text, e.g. "ana lives in Lisbon"
    quote: str  # the verbatim words of the message
    start: int  # the quote's UTF-8 byte span in the message body
    end: int
    offset: int  # the message's log offset
    confidence: float = 1.0


Message = dict[str, Any]  # a task's message as claim_tasks() returns it: offset, actor, source_role, body, ...
Extract = Callable[[list[Message]], list[Claim]]
Summarize = Callable[[list[Message]], "str | None"]

_NAME_WORD = r"[^\W\d_][\w'’&-]*"
_PATTERNS = [
    ("lives_in", re.compile(r"\bI\s+live\s+in\s+(?P<o>" + _NAME_WORD + r"(?:\s+" + _NAME_WORD + r")*)"),
     "{s} lives in {o}"),
    ("has_name", re.compile(r"\b[Mm]y\s+name\s+is\s+(?P<o>" + _NAME_WORD + r"(?:\s+" + _NAME_WORD + r")*)"),
     "{s}'s name is {o}"),
    ("works_at", re.compile(r"\bI\s+work\s+(?:at|for)\s+(?P<o>" + _NAME_WORD + r"(?:\s+" + _NAME_WORD + r")*)"),
     "{s} works at {o}"),
]


def _proper_name(text: str) -> int:
    """How many characters of ``text`` its leading capitalised words take ("Lisbon with Ben" -> 6); 0 if
    it does not start with one."""
    end = 0
    for word in re.finditer(r"\S+", text):
        w = word.group().rstrip("'’-&")
        if not w or not w[0].isupper():
            break
        end = word.start() + len(w)
    return end


def first_person(messages: list[Message]) -> list[Claim]:
    """Explicit first-person statements of each message about its sender. Questions and anything not
    naming a proper noun ("I live in a small flat") are not claims."""
    claims = []
    for message in messages:
        body, actor = message["body"], message["actor"]
        for predicate, pattern, template in _PATTERNS:
            for m in pattern.finditer(body):
                length = _proper_name(m.group("o"))
                if length == 0:
                    continue
                end_char = m.start("o") + length
                obj = re.sub(r"\s+", " ", body[m.start("o"):end_char])
                sentence_end = re.search(r"[.!?;\n]", body[end_char:])
                if sentence_end and sentence_end.group() == "?":
                    continue  # "do I live in Lisbon?" states nothing
                quote = body[m.start():end_char]
                start = len(body[: m.start()].encode("utf-8"))
                claims.append(Claim(actor, predicate, obj, template.format(s=actor, o=obj), quote, start,
                                    start + len(quote.encode("utf-8")), message["offset"]))
    return claims


# First-person words and what each becomes with the speaker's name in their place ("I'm" -> "Ana is").
_APOSTROPHE = "['’]"
_FIRST_PERSON = [
    (re.compile(r"\bI" + _APOSTROPHE + r"m\b|\bI\s+am\b"), "{s} is"),
    (re.compile(r"\bI" + _APOSTROPHE + r"ve\b|\bI\s+have\b"), "{s} has"),
    (re.compile(r"\bI" + _APOSTROPHE + r"d\b"), "{s} would"),
    (re.compile(r"\bI" + _APOSTROPHE + r"ll\b"), "{s} will"),
    (re.compile(r"\bI\b"), "{s}"),
    (re.compile(r"\b[Mm]y\b|\b[Mm]ine\b"), "{s}'s"),
    (re.compile(r"\b[Mm]yself\b|\b[Mm]e\b"), "{s}"),
]
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
MAX_KEYS = 10
MAX_KEY_CHARS = 300


def statement_keys(message: Message) -> list[str]:
    """Search keys for a message's memory (``remember_keys``): its first-person statements about its
    sender, each sentence that speaks in the first person with the sender's name in place of "I", "my"
    and "me" ("I've been painting my lake" from ana -> "ana has been painting ana's lake"), and the
    statements :func:`first_person` derives. Questions are not statements; at most ``MAX_KEYS`` keys,
    each at most ``MAX_KEY_CHARS`` characters."""
    body, actor = message["body"], message["actor"]
    keys = [c.statement for c in first_person([message])]
    for match in _SENTENCE.finditer(body):
        sentence = re.sub(r"\s+", " ", match.group()).strip()
        if sentence.endswith("?") or not any(p.search(sentence) for p, _ in _FIRST_PERSON):
            continue
        for pattern, template in _FIRST_PERSON:
            sentence = pattern.sub(template.format(s=actor).replace("\\", "\\\\"), sentence)
        keys.append(sentence[:MAX_KEY_CHARS].strip())
    return list(dict.fromkeys(k for k in keys if k))[:MAX_KEYS]


@dataclass
class DeriveStats:
    claimed: int = 0
    completed: int = 0
    failed: int = 0
    memories: int = 0
    errors: list[str] = field(default_factory=list)


class Deriver:
    """Processes the tenant's derivation queue.

    ``extract`` turns a task's messages into claims (default: :func:`first_person`); only claims about the
    task's sender are written. ``summarize`` turns a summary task's messages into text (default: none, and a
    summary task completes with nothing written). Each claim becomes a memory of the task's perspective: the
    global view (observer None, visible to the scope) or the observer's local view (audience: the observer),
    and, if the claim names a predicate, a fact of the same perspective with the quote as evidence.
    """

    def __init__(self, tenant: str, *, conninfo: str | None = None, extract: Extract = first_person,
                 summarize: Summarize | None = None, name: str | None = None,
                 purposes: Sequence[str] = ("converse", "personalize"), batch: int = 16,
                 task_types: Sequence[str] | None = None):
        self.tenant = names.check_tenant_name(tenant)
        self.conninfo = conninfo or db.tenant_conninfo(tenant, "worker")
        self.extract = extract
        self.summarize = summarize
        self.name = name or f"deriver@{socket.gethostname()}:{os.getpid()}"
        self.purposes = list(purposes)
        self.batch = batch
        self.task_types = list(task_types) if task_types else None
        self._conn: psycopg.Connection | None = None
        self._mem: Memory | None = None

    def _memory(self) -> Memory:
        if self._mem is None:
            self._conn = psycopg.connect(self.conninfo, autocommit=True)
            self._mem = Memory(self.tenant, conn=self._conn)
        return self._mem

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn, self._mem = None, None

    def __enter__(self) -> Deriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run_once(self, stats: DeriveStats | None = None) -> DeriveStats:
        """Claim one batch and process it; returns the stats (claimed == 0 when the queue had nothing ready)."""
        stats = stats or DeriveStats()
        mem = self._memory()
        tasks = mem.claim_tasks(self.name, limit=self.batch, task_types=self.task_types)
        stats.claimed += len(tasks)
        for task in tasks:
            self.process(task, stats)
        return stats

    def drain(self, max_rounds: int = 100000) -> DeriveStats:
        """Process until nothing is ready (tasks waiting for a retry or leased elsewhere stay)."""
        stats = DeriveStats()
        for _ in range(max_rounds):
            before = stats.claimed
            self.run_once(stats)
            if stats.claimed == before:
                break
        return stats

    def run_forever(self, poll_seconds: float = 5.0, stop: Callable[[], bool] = lambda: False) -> None:
        """Process tasks as they come: add_messages() notifies; ended leases and retries need the poll. A
        lost connection is retried with backoff (pgrecall.loop); a permanent error stops it."""
        def work(conn: psycopg.Connection[Any]) -> int:
            self._use(conn)
            claimed = 0
            while round_ := self.run_once().claimed:
                claimed += round_
                if stop():
                    break
            return claimed  # nothing claimed: a notification that woke this round was spurious

        loop.run(self.conninfo, self.tenant, "derive", work, poll_seconds=poll_seconds, stop=stop,
                 on_disconnect=self._forget_connection)

    def _use(self, conn: psycopg.Connection[Any]) -> None:
        """Work on the loop's connection (it opens and closes it)."""
        if self._conn is not conn:
            self._conn, self._mem = conn, Memory(self.tenant, conn=conn)

    def _forget_connection(self) -> None:
        self._conn, self._mem = None, None

    def process(self, task: Task, stats: DeriveStats) -> None:
        mem = self._memory()
        assert self._conn is not None
        try:
            with self._conn.transaction():
                result, written = self._derive(mem, task)
                mem.complete_task(task, result, worker=self.name)
            stats.completed += 1
            stats.memories += written
        except Exception as exc:  # given back to the queue, with the reason
            if self._conn is None or self._conn.broken:
                raise  # not the task's fault: its lease ends with the lost session, and the loop reconnects
            stats.failed += 1
            stats.errors.append(f"task {task.task_id}: {exc}")
            try:
                mem.fail_task(task, f"{type(exc).__name__}: {exc}", worker=self.name)
            except (errors.PgrecallError, psycopg.Error):
                pass  # the lease is gone (expired and re-claimed, or the task was erased)

    def _derive(self, mem: Memory, task: Task) -> tuple[dict[str, Any], int]:
        if task.task_type == "summary":
            return self._summary(mem, task)
        claims = [c for c in self.extract(task.messages) if c.subject == task.sender]
        if not claims:
            return {"observations": []}, 0
        items = [{"body": c.statement, "evidence": [c.offset], "purposes": self.purposes, "kind": "fact",
                  "confidence": c.confidence, "about": [task.sender, c.object]} for c in claims]
        written = mem.task_remember(task, items, worker=self.name)
        observations = []
        for claim, r in zip(claims, written):
            item: dict[str, Any] = {"text": claim.statement, "quote": claim.quote, "span": [claim.start, claim.end],
                                    "predicate": claim.predicate}
            if r.created:
                item["memory_id"] = r.memory_id
            if claim.predicate is not None:
                fact = mem.task_assert_fact(
                    task, claim.predicate, claim.object, statement=claim.statement,
                    evidence=[{"offset": claim.offset, "quote": claim.quote, "start": claim.start, "end": claim.end}],
                    confidence=claim.confidence, purposes=self.purposes, worker=self.name)
                item["fact_id"] = fact.fact_id
            observations.append(item)
        return {"observations": observations}, sum(r.created for r in written)

    def _summary(self, mem: Memory, task: Task) -> tuple[dict[str, Any], int]:
        text = self.summarize(task.messages) if self.summarize else None
        if not text:
            return {"summary": None}, 0
        [r] = mem.task_remember(task, [{"body": text, "evidence": [m["offset"] for m in task.messages],
                                        "purposes": self.purposes, "kind": "summary"}], worker=self.name)
        return {"summary": text, "memory_id": r.memory_id}, int(r.created)
