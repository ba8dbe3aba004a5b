"""Fuzz: every public tenant function, called as a role of its duty with edge values (NULLs, empty and huge
arrays, 1 MB texts, NaN and infinities, vectors of the wrong size, malformed selectors and JSON, extreme
numbers and dates). Every error must be ours (SQLSTATE class PR), none internal (class XX), and the
connection must survive each call. The driver's public methods get the same treatment in
test_driver_fuzz below: only pgrecall errors.

The functions and their parameters come from the catalog, so a new function is fuzzed without a line
here. Bounded: a fixed number of examples per function (PGRECALL_FUZZ_EXAMPLES, default 30), and a
statement timeout; the call counts and the SQLSTATE histogram are printed (pytest -s shows them).
"""

from __future__ import annotations

import math
import os
import uuid
from collections import Counter
from datetime import UTC, datetime

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql
from psycopg.types.json import Jsonb

EXAMPLES = int(os.environ.get("PGRECALL_FUZZ_EXAMPLES", "30"))
MB = "é" * (1 << 19)  # 1 MiB of UTF-8

# SQLSTATEs that are not ours but are a documented, correct answer to the input (docs/reference.md):
# none at present. A function of another duty would be 42501, but each is called as a role of its duty.
ALLOWED: set[str] = set()

NAMES = ["bot", "ana", "default", "", " ", "mallory", "ANA", "a\u202eb", "x" * 300, MB, "'; drop table peer; --"]
JSONS = [
    {}, [], None, [{}], "null", 7, "text", [1, 2], {"peer": "ana"}, {"scope": "default"},
    {"data_subject": 7}, {"observation": {"scope": "default", "offset": 1e300}},
    {"observation": {"scope": "default", "offset": 1}}, {"expired_before": "infinity"}, {"a": 1, "b": 2},
    [{"offset": 1e300, "quote": "x"}], [{"offset": 1, "quote": "green tea", "start": -1, "end": 2**70}],
    [{"offset": 1, "quote": "green tea"}], [{"body": "hi", "source_role": "user", "occurred_at": "infinity"}],
    [{"body": "hi", "source_role": "user", "occurred_at": "294276-12-31"}],
    [{"body": "x", "evidence": [1e300], "purposes": ["converse"], "confidence": 5e-324}],
    [{"body": "x", "evidence": [1], "purposes": ["converse"], "confidence": "NaN"}],
    [{"subject": "Ana", "predicate": "likes", "object": "tea", "evidence": [{"offset": 1, "quote": "tea"}],
      "valid_from": "-infinity", "confidence": 1e-320}],
    [{"actor": "ana", "body": "hi", "occurred_at": "4713-01-01 BC"}],
    ["ana", {"peer": "ben", "observe_others": "yes"}], {"observe_others": 1, "observed_globally": "x"},
    {"observations": [{"text": "", "memory_id": 1e300}]}, [{"k": MB}], [[[[[[[[[[[]]]]]]]]]]],
    [{"body": "b"}] * 5000,
]
TIMES = [None, datetime(2026, 1, 1, tzinfo=UTC), "infinity", "-infinity", "4713-01-01 BC", "294276-12-31",
         "0001-01-01 00:00:00+14", "9999-12-31 23:59:59-12"]
VEC = [0.05] * 384
VALUES: dict[str, list] = {
    "text": NAMES + ["converse", "hybrid", "lexical", "log", "embeddings", "human", "lives_in", "likes",
                     "all-MiniLM-L6-v2", "merge", "distinct", "representation", "task", None],
    "text[]": [["default"], None, [], [None], ["nowhere"], ["default", "other"], ["converse"], [MB],
               ["converse"] * 10000, ["representation", "summary"], ["[1,2,3]"], ["[NaN]"], ["garbage"],
               [str(VEC).replace(" ", "")], [str(VEC[:383]).replace(" ", "")]],
    "bigint": [1, 2, None, 0, -1, 2**63 - 1, -(2**63), 3, 7],
    "integer": [1, 10, None, 0, -1, 2**31 - 1, -(2**31), 384],
    "double precision": [0.5, None, math.nan, math.inf, -math.inf, 5e-324, -0.0, 1e308, 1.0, 0.0],
    "boolean": [True, False, None],
    "jsonb": JSONS,
    "timestamp with time zone": TIMES,
    "uuid": [uuid.UUID(int=0), uuid.uuid4(), None],
    "bigint[]": [[1], None, [], [0], [None], [2**63 - 1], [-1], list(range(1, 10001)), [1, 1, 2]],
    "double precision[]": [VEC, None, [], VEC[:383], VEC + [0.1], [math.nan] * 384, [math.inf] * 384,
                           [None] * 384, [1e308] * 384, [0.0] * 384, [0.1] * 100000],
    "integer[]": [[1], None, [], [0], [-1], [2**31 - 1]],
}
# Vectors given as pgvector's halfvec: a value the type refuses (not a literal, NaN, beyond half precision) is
# refused as the argument is cast, before any function runs, as a malformed timestamp is; what reaches the
# function is any count of numbers, or none.
_LITERAL = str(VEC).replace(" ", "")
VALUES["halfvec"] = [_LITERAL, "[1,2,3]", str(VEC[:383]).replace(" ", ""), str(VEC * 2).replace(" ", ""), None]
VALUES["halfvec[]"] = [[_LITERAL], None, [], [None], ["[1,2,3]"], [_LITERAL, None], [_LITERAL] * 1000,
                       [str(VEC[:383]).replace(" ", "")]]
VALUES["public.halfvec"], VALUES["public.halfvec[]"] = VALUES["halfvec"], VALUES["halfvec[]"]


# A value that passes each parameter's checks, so that a call gets past the principal and the scopes to
# the parameter under test: each parameter takes its valid value three times in four.
VALID: dict[str, object] = {
    "p_principal": "bot", "p_scopes": ["default"], "p_scope": "default", "p_purpose": "converse", "p_peer": "ana",
    "p_actor": "ana", "p_worker": "fuzz", "p_source_role": "user", "p_body": "Ana likes green tea",
    "p_query": "green tea", "p_purposes": ["converse"], "p_evidence": [1], "p_subject": "Ana", "p_predicate": "likes",
    "p_object": "tea", "p_reason": "a reason", "p_memory_id": 1, "p_offset": 1, "p_limit": 5, "p_kind": None,
    "p_name": "fuzzed", "p_session": 1, "p_session_id": None, "p_expected_revision": 1, "p_sources": [1],
    "p_mode": None, "p_selector": {"data_subject": "nobody"}, "p_log": "ana", "p_target": None,
    "p_items": [{"body": "fuzz", "evidence": [1], "purposes": ["converse"]}],
    "p_rows": [{"body": "hi", "source_role": "user"}], "p_messages": [{"actor": "ana", "body": "hi"}],
    "p_seeds": ["Ana"], "p_hops": 1, "p_model": "all-MiniLM-L6-v2", "p_input_version": 2,
}


def signatures(conn, schema: str) -> list[tuple[str, list[tuple[str, str]], int]]:
    """(function, [(parameter, type)], number of parameters with defaults) for each public function."""
    rows = conn.execute("""
        select p.proname::text,
               coalesce(array(select format_type(t, null) from unnest(p.proargtypes::oid[]) t), '{}'),
               coalesce(p.proargnames[1:p.pronargs], '{}'), p.pronargdefaults
          from pg_proc p
         where p.pronamespace = %s::regnamespace and left(p.proname, 1) <> '_' and p.prokind = 'f'
           and p.prorettype <> 'trigger'::regtype
         order by 1""", (schema,)).fetchall()
    return [(name, list(zip(names, types)), defaults) for name, types, names, defaults in rows]


def bind(value, type_name: str):
    if type_name == "jsonb":
        return None if value is None else Jsonb(value)
    return value


class Tally:
    def __init__(self):
        self.calls: Counter = Counter()
        self.states: Counter = Counter()
        self.bad: list[str] = []

    def report(self, title: str) -> str:
        lines = [f"{title}: {sum(self.calls.values())} calls over {len(self.calls)} functions",
                 "SQLSTATE histogram: " + ", ".join(f"{k}={v}" for k, v in sorted(self.states.items()))]
        return "\n".join(lines)


def call_once(conn, schema: str, name: str, params, defaults: int, choice, tally: Tally) -> None:
    required = len(params) - defaults
    given_params = params[:required + choice(st.integers(0, defaults))]
    args = []
    values = []
    for pname, ptype in given_params:
        args.append(sql.SQL("{} => %s::{}").format(sql.Identifier(pname), sql.SQL(ptype)))
        if pname in VALID and choice(st.integers(0, 3)) > 0:
            value = VALID[pname]
        else:
            value = choice(st.sampled_from(VALUES[ptype]))
        values.append(bind(value, ptype))
    statement = sql.SQL("select * from {}.{}({})").format(sql.Identifier(schema), sql.Identifier(name),
                                                        sql.SQL(", ").join(args))
    state = "ok"
    try:
        with conn.transaction():
            conn.execute(statement, values)
    except psycopg.errors.QueryCanceled:
        state = "57014"
    except psycopg.Error as exc:
        state = exc.sqlstate or f"client:{type(exc).__name__}"
    tally.calls[name] += 1
    tally.states[state] += 1
    if state != "ok" and not state.startswith("PR") and state not in ALLOWED:
        shown = [(p, (repr(v)[:60] if not isinstance(v, Jsonb) else repr(v.obj)[:60])) for (p, _), v in
                 zip(given_params, values)]
        tally.bad.append(f"{name}{shown}: {state}")
    # the connection survives every call
    assert conn.execute("select 1").fetchone() == (1,), f"{name}: the connection did not survive"


def seed(acme) -> None:
    off = acme.append("I like green tea and I live in Lisbon", role="user", actor="ana")
    acme.remember("Ana likes green tea", evidence=[off], purposes=["converse"])
    acme.append("Ben says hello", role="user", actor="ben")


def role_of(duties: list[str]) -> str:
    return "app" if "app" in duties else duties[0]


@pytest.mark.slow
def test_every_public_tenant_function_answers_edge_values_with_our_errors(acme, db, conninfo):
    seed(acme)
    duties = dict(db.execute("select function_name, duties from pgrecall.function_duty").fetchall())
    tally = Tally()
    conns = {}
    try:
        for role in ("app", "worker", "admin"):
            conns[role] = conninfo.connect(user=f"pgrecall_acme_{role}", autocommit=True)
            conns[role].execute("set statement_timeout = '20s'")
        functions = signatures(db, "acme")
        assert len(functions) > 50
        for name, params, defaults in functions:
            fuzz_function(conns[role_of(duties[name])], name, params, defaults, tally)
    finally:
        for conn in conns.values():
            conn.close()
    print("\n" + tally.report("SQL fuzz"))
    assert not [s for s in tally.states if s.startswith("XX")]
    assert tally.bad == []


def fuzz_function(conn, name, params, defaults, tally) -> None:
    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def fuzz(data):
        call_once(conn, "acme", name, params, defaults, data.draw, tally)

    fuzz()


# -- the driver ----------------------------------------------------------------------------------------------

# Values a caller might pass by mistake, whatever the parameter: wrong types, NULs, extremes.
ANYTHING = [None, "", "x", "\x00", MB, 0, -1, 2**31, 2**63, -(2**63) - 1, 2**64, math.nan, math.inf, -math.inf,
            1e-320, True, [], [None], ["a"], "not a list", {"a": {1, 2}}, {1, 2}, {"a": math.nan}, {"k": "\x00"},
            b"bytes", object(), datetime.max.replace(tzinfo=UTC), datetime.min, [[1] * 10], {"a": 1},
            (1, 2), [{"body": {1}}], [1.5]]
# Valid values by parameter name, so that a call reaches the parameter under test.
DRIVER_VALID: dict[str, object] = {
    "principal": "bot", "scopes": ["default"], "scope": "default", "purpose": "converse", "text": "Ana likes tea",
    "role": "user", "actor": "ana", "memory_id": 1, "offset": 1, "revision": 1, "evidence": [1],
    "purposes": ["converse"], "query": "tea", "reason": "a reason", "subject": "Ana", "predicate": "likes",
    "object_": "tea", "name": "fuzzed", "kind": None, "peer": "ana", "limit": 5, "selector": {"data_subject": "x"},
    "timeout": 0.01, "body": "Ana likes tea", "sources": [1], "rows": [{"body": "hi", "source_role": "user"}],
    "items": [{"body": "fuzz", "evidence": [1], "purposes": ["converse"]}], "key": "rrf_k", "value": 60,
}
# Methods not fuzzed, and why: close() ends the handle; chat() calls the user's language model.
NOT_FUZZED = {"close", "chat"}


def driver_methods(mem) -> list[str]:
    import inspect

    return [name for name in dir(type(mem)) if not name.startswith("_") and name not in NOT_FUZZED
            and callable(getattr(mem, name)) and not inspect.isclass(getattr(mem, name))]


@pytest.mark.slow
def test_every_public_driver_method_raises_only_pgrecall_errors(acme, acme_worker, acme_admin):
    import inspect

    seed(acme)
    handles = {"app": acme, "worker": acme_worker, "admin": acme_admin}
    calls: Counter = Counter()
    outcomes: Counter = Counter()
    bad: list[str] = []
    for role, mem in handles.items():
        for name in driver_methods(mem):
            method = getattr(mem, name)
            params = [p for p in inspect.signature(method).parameters.values()
                      if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
            fuzz_method(mem, role, name, method, params, calls, outcomes, bad)
    print(f"\ndriver fuzz: {sum(calls.values())} calls over {len(calls)} methods")
    print("outcomes: " + ", ".join(f"{k}={v}" for k, v in sorted(outcomes.items())))
    assert bad == [], "\n".join(bad[:40])


def fuzz_method(mem, role, name, method, params, calls, outcomes, bad) -> None:
    from pgrecall import errors

    @settings(max_examples=max(EXAMPLES // 5, 4), deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def fuzz(data):
        kwargs = {}
        for p in params:
            if p.default is not p.empty and data.draw(st.integers(0, 2)) == 0:
                continue  # leave it out: its default
            if p.name in DRIVER_VALID and data.draw(st.integers(0, 3)) > 0:
                kwargs[p.name] = DRIVER_VALID[p.name]
            else:
                kwargs[p.name] = data.draw(st.sampled_from(ANYTHING))
        positional = [kwargs.pop(p.name) for p in params if p.kind == p.POSITIONAL_ONLY and p.name in kwargs]
        outcome = "ok"
        try:
            method(*positional, **kwargs)
        except errors.PgrecallError as exc:
            outcome = type(exc).__name__
        except Exception as exc:
            outcome = f"raw {type(exc).__name__}"
            bad.append(f"{role} {name}({shown(kwargs)}): {type(exc).__name__}: {str(exc)[:120]}")
        calls[name] += 1
        outcomes[outcome] += 1
        mem.settings()  # the handle (and its connection) survives every call

    fuzz()


def shown(kwargs: dict) -> str:
    return ", ".join(f"{k}={repr(v)[:40]}" for k, v in kwargs.items())
