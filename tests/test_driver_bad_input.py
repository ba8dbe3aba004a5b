"""Bad input to the driver's public methods raises pgrecall errors (which are also the fitting built-ins),
never Python's or psycopg's own; nothing is written. tests/test_fuzz.py tries every method; these are the
cases issue 13 reported."""

import math

import pytest

from conftest import table_counts
from pgrecall import errors


def cases(acme):
    return [
        ("append_many given a str", errors.InvalidArgument, lambda: acme.append_many("hello")),
        ("append_many given None", errors.InvalidArgument, lambda: acme.append_many(None)),
        ("assert_facts given a str", errors.InvalidArgument, lambda: acme.assert_facts("Ana likes tea")),
        ("add_messages given None", errors.InvalidArgument, lambda: acme.add_messages(1, None)),
        ("a set inside JSON", errors.InvalidArgument,
         lambda: acme.append("hi", role="user", payload={"tags": {"a", "b"}})),
        ("NaN inside JSON", errors.InvalidArgument, lambda: acme.append("hi", role="user", payload={"x": math.nan})),
        ("a NUL in a text", errors.InvalidArgument, lambda: acme.append("a\x00b", role="user")),
        ("wait_for(timeout=nan)", errors.OutOfRange, lambda: acme.wait_for(1, timeout=math.nan)),
        ("wait_for(timeout=inf)", errors.OutOfRange, lambda: acme.wait_for(1, timeout=math.inf)),
        ("wait_for(timeout=-1)", errors.OutOfRange, lambda: acme.wait_for(1, timeout=-1)),
        ("read(2**63)", errors.OutOfRange, lambda: acme.read(2**63, purpose="converse")),
        ("read(-2**63 - 1)", errors.OutOfRange, lambda: acme.read(-(2**63) - 1, purpose="converse")),
        ("read(1.5)", errors.InvalidArgument, lambda: acme.read(1.5, purpose="converse")),
        ("recall limit beyond integer", errors.OutOfRange, lambda: acme.recall("tea", limit=2**40)),
        ("an occurred_at of year 1 in UTC+14", errors.InvalidTime,
         lambda: acme.append_many([{"body": "hi", "source_role": "user", "occurred_at": "0001-01-01T00:00:00+14:00"}])),
    ]


@pytest.mark.parametrize("index", range(15))
def test_bad_input_raises_a_pgrecall_error_and_writes_nothing(acme, db, index):
    what, expected, call = cases(acme)[index]
    before = table_counts(db)
    with pytest.raises(expected) as info:
        call()
    assert isinstance(info.value, errors.PgrecallError), what
    assert isinstance(info.value, ValueError), what  # catchable as the built-in too
    assert table_counts(db) == before, what
    assert acme.settings()  # the handle still works
