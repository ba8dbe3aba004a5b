"""Bad input: each gets our SQLSTATE's exception class, and nothing is written."""

import psycopg
import pytest

from conftest import table_counts
from pgrecall import errors


@pytest.fixture
def ctx(acme):
    off = acme.append("I like green tea", role="user", actor="ana")
    mid = acme.remember("Ana likes green tea", evidence=[off], purposes=["converse"]).memory_id
    return acme, off, mid


def cases(acme, off, mid):
    big = "x" * 20000
    huge = "y" * (1048576 + 1)
    return [
        ("unknown purpose", errors.InvalidPurpose,
         lambda: acme.remember("a note", evidence=[off], purposes=["gossip"])),
        ("unknown purpose in read", errors.InvalidPurpose, lambda: acme.read(mid, purpose="gossip")),
        ("null purpose in read", errors.InvalidPurpose, lambda: acme.read(mid, purpose=None)),
        ("empty purpose set", errors.InvalidPurpose, lambda: acme.remember("a note", evidence=[off], purposes=[])),
        ("null purpose set", errors.InvalidPurpose, lambda: acme.remember("a note", evidence=[off], purposes=None)),
        ("unknown scope", errors.ScopeNotAuthorised, lambda: acme.append("hi", role="user", scopes=["nowhere"])),
        ("unknown scope in read", errors.ScopeNotAuthorised,
         lambda: acme.read(mid, purpose="converse", scopes=["default", "nowhere"])),
        ("write outside the authorised set", errors.ScopeNotAuthorised,
         lambda: acme.append("hi", role="user", scope="other", scopes=["default"])),
        ("unknown peer", errors.UnknownPeer, lambda: acme.append("hi", role="user", principal="mallory")),
        ("unknown actor", errors.UnknownPeer, lambda: acme.append("hi", role="user", actor="mallory")),
        ("unknown audience", errors.UnknownPeer,
         lambda: acme.remember("a note", evidence=[off], purposes=["converse"], audience="mallory")),
        ("null role", errors.InvalidArgument, lambda: acme.append("hi", role=None)),
        ("role outside the set", errors.InvalidArgument, lambda: acme.append("hi", role="narrator")),
        ("bad observation kind", errors.InvalidArgument, lambda: acme.append("hi", role="user", kind="rumour")),
        ("bad lawful basis", errors.InvalidArgument, lambda: acme.append("hi", role="user", lawful_basis="because")),
        ("payload not an object", errors.InvalidArgument, lambda: acme.append("hi", role="user", payload=[1])),
        ("oversized observation", errors.InvalidArgument, lambda: acme.append(huge, role="user")),
        ("null observation body", errors.InvalidArgument, lambda: acme.append(None, role="user")),
        ("oversized memory", errors.InvalidArgument,
         lambda: acme.remember(big, evidence=[off], purposes=["converse"])),
        ("oversized correction", errors.InvalidArgument, lambda: acme.correct(mid, big, revision=1)),
        ("bad memory kind", errors.InvalidArgument,
         lambda: acme.remember("a note", evidence=[off], purposes=["converse"], kind="gossip")),
        ("confidence out of range", errors.InvalidArgument,
         lambda: acme.remember("a note", evidence=[off], purposes=["converse"], confidence=1.5)),
        ("unknown evidence offset", errors.ObservationNotFound,
         lambda: acme.remember("a note", evidence=[off, 999], purposes=["converse"])),
        ("zero memory id", errors.InvalidArgument, lambda: acme.read(0, purpose="converse")),
        ("negative memory id", errors.InvalidArgument, lambda: acme.correct(-5, "text", revision=1)),
        ("null memory id", errors.InvalidArgument, lambda: acme.forget(None, reason="why")),
        ("unknown memory id", errors.MemoryNotFound, lambda: acme.correct(424242, "text", revision=1)),
        ("null revision", errors.InvalidArgument, lambda: acme.correct(mid, "text", revision=None)),
        ("malformed source id", errors.InvalidArgument, lambda: acme.derive([mid, 0], "summary")),
        ("no sources", errors.InvalidArgument, lambda: acme.derive([], "summary")),
        ("empty derived body", errors.InvalidArgument, lambda: acme.derive([mid], " \n")),
        ("supersede without evidence", errors.InvalidArgument,
         lambda: acme.supersede(mid, "Ana likes black tea", revision=1, evidence=[])),
        ("bad peer kind", errors.InvalidArgument, lambda: acme.add_peer("zed", kind="robot")),
        ("peer name with whitespace", errors.InvalidArgument, lambda: acme.add_peer(" zed\n")),
        ("oversized title in a correction", errors.InvalidArgument,
         lambda: acme.correct(mid, "Ana likes green tea", revision=1, title="t" * 501)),
        ("oversized title in a supersession", errors.InvalidArgument,
         lambda: acme.supersede(mid, "Ana likes black tea", revision=1, evidence=[off], title="t" * 501)),
        ("bad scope name", errors.InvalidArgument, lambda: acme.add_scope("Not A Scope")),
    ]


CASE_NAMES = [c[0] for c in cases(None, None, None)]


@pytest.mark.parametrize("name", CASE_NAMES)
def test_bad_input_is_refused_with_our_sqlstate_and_writes_nothing(ctx, db, name):
    acme, off, mid = ctx
    _, error, call = next(c for c in cases(acme, off, mid) if c[0] == name)
    before = table_counts(db)
    with pytest.raises(error) as info:
        call()
    assert isinstance(info.value.__cause__, psycopg.Error)
    assert info.value.__cause__.sqlstate.startswith("PR")
    assert table_counts(db) == before
