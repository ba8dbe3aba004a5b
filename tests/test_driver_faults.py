"""Issue #47: the driver caught TypeError, KeyError and AttributeError around building AND running a call, so a
fault of its own while reading rows back reached the caller as InvalidArgument, blaming their arguments. Only
the building of a call is the caller's now."""

from __future__ import annotations

import pytest

from pgrecall import errors
from pgrecall.driver import _calls


def test_a_fault_while_reading_rows_back_is_raised_as_it_is(acme, monkeypatch):
    said = acme.append("I live in Lisbon", role="user", actor="ana")
    memory_id = acme.remember("Ana lives in Lisbon", evidence=[said], purposes=["converse"]).memory_id

    def misread(*args, **kwargs):
        raise KeyError("a column the driver does not know")

    monkeypatch.setattr(_calls, "_build", misread)
    with pytest.raises(KeyError, match="a column the driver does not know") as raised:
        acme.read(memory_id, purpose="converse")
    assert not isinstance(raised.value, errors.PgrecallError)


def test_an_argument_the_call_cannot_be_built_from_is_still_the_callers(acme):
    with pytest.raises(errors.InvalidArgument, match="remember"):
        acme.remember("Ana lives in Lisbon", evidence=5, purposes=["converse"])


def test_a_value_the_embedding_step_trips_over_is_still_the_callers(acme):
    """Found by test_fuzz once the catch was narrowed: a query that is not a text reaches the model in a later
    step of the program (an Offload step), whose TypeError is the caller's value, not the driver's fault."""
    for method in (acme.recall, acme.search_messages):
        with pytest.raises(errors.InvalidArgument, match="invalid argument: TypeError"):
            method({"k": "\x00"}, limit=5)
