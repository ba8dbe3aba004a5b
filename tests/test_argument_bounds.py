"""Every argument has a bound (issue #28, finding 6).

Every public function of a tenant that takes text (text, text[] or jsonb) is called with a 10 MB value in
each of those parameters, one at a time, the others valid. Each call must be refused with one of
pgrecall's own errors (SQLSTATE class PR), never a raw PostgreSQL error (54000 "index row size exceeds
the maximum", 22001, a timeout, ...), and no error field, and no line the server writes to its log, may
hold more than a bounded prefix of the value (500 characters: pgrecall's messages quote at most that much
of any argument).

The functions and their parameters come from the catalog, so a new function is covered the day it is
added; a new required parameter needs a valid value below (the test says which).
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg.types.json import Jsonb

pytestmark = pytest.mark.slow

TEN_MB = 10 * 1024 * 1024
FILL = "z"  # the 10 MB values are runs of it; the log and the error fields are searched for long runs
BOUND = 500  # how much of an argument may reach an error message (and so the server log)
TEXTUAL = ("text", "text[]", "jsonb")


def longest_run(text: str | None) -> int:
    return max((len(m) for m in re.findall(f"{FILL}+", text or "")), default=0)


@pytest.fixture
def world(acme, acme_worker):
    """What valid calls need: a turn, a memory about Rita, a session with ana in it."""
    off = acme.append("Rita is my sister and she likes tea", role="user", actor="ana")
    memory = acme.remember("Ana's sister is Rita", evidence=[off], purposes=["converse"], about=["Rita"]).memory_id
    session = acme.create_session("tea")
    acme.add_session_peers(session, ["ana"])
    return {"offset": off, "memory": memory, "session": session}


def valid_arguments(world) -> dict[str, object]:
    """A valid value for each parameter name (some differ by type, see by_type())."""
    off, memory, session = world["offset"], world["memory"], world["session"]
    return {
        "p_principal": "bot", "p_scopes": ["default"], "p_scope": "default", "p_body": "Ana likes coffee",
        "p_source_role": "user", "p_said": "Ana likes coffee", "p_actor": "ana", "p_name": "zqnew", "p_entity": "Rita", "p_alias": "Ritinha",
        "p_log": "ana-log", "p_query": "tea", "p_purposes": ["converse"], "p_reason": "asked to",
        "p_key": "rrf_k", "p_value": Jsonb(60), "p_subject": "Rita", "p_predicate": "likes", "p_object": "tea",
        "p_seeds": ["Rita"], "p_peer": "ana", "p_target": "ana", "p_worker": "w1", "p_error": "it failed",
        "p_model": "all-MiniLM-L6-v2", "p_policy": "all", "p_keep": "Rita", "p_absorb": "Ana",
        "p_decision": "keep_both", "p_selector": Jsonb({"data_subject": "nobody"}),
        "p_items": Jsonb([{"body": "Ana likes coffee", "evidence": [off], "purposes": ["converse"]}]),
        "p_rows": Jsonb([{"body": "hello", "source_role": "user", "actor": "ana"}]),
        "p_messages": Jsonb([{"actor": "ana", "body": "hello"}]), "p_peers": Jsonb(["ana"]),
        "p_metadata": Jsonb({}), "p_config": Jsonb({}), "p_defaults": Jsonb({}), "p_result": Jsonb({}),
        "p_payload": Jsonb({}), "p_embeddings": ["[" + ",".join(["0.1"] * 384) + "]"],
        "p_memory_id": memory, "p_memory_ids": [memory], "p_sources": [memory], "p_a": memory, "p_b": memory,
        "p_session": session, "p_session_id": session, "p_offset": off, "p_expected_revision": 1,
        "p_generations": [1], "p_input_version": 2, "p_limit": 5, "p_hops": 1, "p_fact_id": 1, "p_task_id": 1,
        "p_lease_token": uuid.uuid4(), "p_pinned": True, "p_timeout_ms": 10, "p_passage_ids": [1],
        "p_revision_a": 1, "p_revision_b": 1, "p_purpose": "converse", "p_request_id": 1,
        "p_namespace": ["memories"], "p_user": "ana", "p_keys": ["Ana lives in Porto"], "p_revision": 1,
    }


def by_type(name: str, typ: str, valid: dict[str, object], world) -> object:
    """The valid value of a parameter whose meaning depends on its type (p_evidence: offsets or quotes)."""
    if name == "p_evidence":
        return [world["offset"]] if typ == "bigint[]" else Jsonb([{"offset": world["offset"], "quote": "Rita"}])
    if name == "p_peers" and typ == "text[]":
        return ["ana"]
    if name in valid:
        return valid[name]
    raise AssertionError(f"tests/test_argument_bounds.py: give required parameter {name} ({typ}) a valid value")


def huge(name: str, typ: str, valid_value: object) -> object:
    """The same parameter, 10 MB: a text, an array of one such text, or the valid JSON with its first string
    replaced (or, for a JSON with no string, a 10 MB string)."""
    big = FILL * TEN_MB
    if typ == "text":
        return big
    if typ == "text[]":
        return [big]
    value = valid_value.obj if isinstance(valid_value, Jsonb) else None

    def swap(v, done):
        if isinstance(v, str) and not done[0]:
            done[0] = True
            return big
        if isinstance(v, list):
            return [swap(x, done) for x in v]
        if isinstance(v, dict):
            return {k: swap(x, done) for k, x in v.items()}
        return v

    done = [False]
    swapped = swap(value, done)
    if not done[0]:
        swapped = {"key": big} if isinstance(value, dict) or value is None else big
    return Jsonb(swapped)


def tenant_functions(db):
    """(name, duty, [(parameter, type, has_default)]) of every public function of acme."""
    out = []
    rows = db.execute("""
        select p.proname, d.duties[1], p.pronargs, p.pronargdefaults,
               array(select format_type(t, null) from unnest(p.proargtypes::oid[]) with ordinality u(t, n) order by n),
               p.proargnames[1:p.pronargs]
          from pg_proc p join pgrecall.function_duty d on d.function_name = p.proname
         where p.pronamespace = 'acme'::regnamespace and p.prokind = 'f' and left(p.proname, 1) <> '_'
         order by 1""").fetchall()
    for name, duty, nargs, ndefaults, types, argnames in rows:
        params = [(argnames[i], types[i], i >= nargs - ndefaults) for i in range(nargs)]
        out.append((name, duty, params))
    return out


def server_log(pg_server) -> Path | None:
    """The test server's log file, when it is one this process can read (the embedded test server)."""
    try:
        with psycopg.connect(pg_server.superuser_dsn, autocommit=True) as su:
            data = Path(su.execute("show data_directory").fetchone()[0])
    except psycopg.Error:
        return None
    log = data / "log"
    return log if log.is_file() else None


def test_every_text_argument_has_a_bound_and_never_reaches_the_log_whole(acme, world, db, conninfo, pg_server):
    valid = valid_arguments(world)
    log = server_log(pg_server)
    log_start = log.stat().st_size if log else 0
    conns = {duty: conninfo.connect(user=f"pgrecall_acme_{duty}") for duty in ("app", "worker", "admin")}
    for conn in conns.values():
        conn.execute("set statement_timeout = '60s'")
    failures, calls = [], 0
    try:
        for name, duty, params in tenant_functions(db):
            textual = [(p, t) for p, t, _ in params if t in TEXTUAL]
            for target, target_type in textual:
                args = {}
                for p, t, has_default in params:
                    if p == target:
                        args[p] = huge(p, t, by_type(p, t, valid, world) if p in valid or p in ("p_evidence", "p_peers")
                                       else None)
                    elif not has_default:
                        args[p] = by_type(p, t, valid, world)
                call = "select * from acme.{}({})".format(
                    name, ", ".join(f"{p} => %({p})s::{dict((q, t) for q, t, _ in params)[p]}" for p in args))
                conn = conns[duty]
                calls += 1
                try:
                    with conn.transaction():
                        conn.execute(call, args)
                        raise psycopg.Rollback()
                    failures.append((name, target, "accepted a 10 MB value"))
                except psycopg.Error as exc:
                    state = exc.sqlstate or ""
                    fields = {f: getattr(exc.diag, f) for f in ("message_primary", "message_detail", "message_hint",
                                                                "context")}
                    spilled = {f: longest_run(v) for f, v in fields.items() if longest_run(v) > BOUND}
                    if not state.startswith("PR"):
                        failures.append((name, target, f"{state}: {(exc.diag.message_primary or '')[:200]}"))
                    elif spilled:
                        failures.append((name, target, f"{state} quotes {spilled} characters of the value"))
    finally:
        for conn in conns.values():
            conn.close()
    assert calls > 100
    assert failures == [], "\n".join(map(str, failures))
    if log is not None:
        with open(log, "rb") as f:
            f.seek(log_start)
            written = f.read().decode("utf-8", "replace")
        assert longest_run(written) <= BOUND, [line[:300] for line in written.splitlines()
                                               if longest_run(line) > BOUND][:5]


def test_a_long_setting_key_is_refused_without_echoing_it(acme, acme_admin):
    """set_setting wrote a 10 MB key back, whole, into its message and so into the server log."""
    with pytest.raises(ValueError) as raised:
        acme_admin.set_setting(FILL * TEN_MB, 1)
    assert len(str(raised.value)) < 2 * BOUND

