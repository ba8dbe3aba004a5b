"""Issue #47 item 1: a result dataclass is written once. A row the catalog describes is generated under its public
name (driver/_surface.py PUBLIC_ROWS); a hand-written dataclass with a generated row's field names is listed in
REFINED with what it adds."""

from __future__ import annotations

import dataclasses
import importlib
import inspect

import pgrecall
from pgrecall.driver import _generated, _operation, _Operations, _surface

AREAS = ["admin", "dialectic", "duplicates", "embeddings", "graph", "memories", "recall", "sessions"]


def _dataclasses(module):
    return {name: obj for name, obj in vars(module).items()
            if inspect.isclass(obj) and dataclasses.is_dataclass(obj) and obj.__module__ == module.__name__}


def _fields(cls):
    return tuple(f.name for f in dataclasses.fields(cls))


def test_no_hand_written_dataclass_twins_a_generated_row():
    generated = {_fields(cls) for cls in _dataclasses(_generated).values()}
    twins = set()
    for area in AREAS:
        module = importlib.import_module(f"pgrecall.driver.{area}")
        twins |= {f"{area}.{name}" for name, cls in _dataclasses(module).items() if _fields(cls) in generated}
    unlisted = twins - set(_surface.REFINED)
    assert not unlisted, f"the generated row under its public name (_surface.PUBLIC_ROWS), or say why: {unlisted}"
    assert set(_surface.REFINED) <= twins, f"listed in _surface.REFINED, no longer a twin: {set(_surface.REFINED) - twins}"
    assert all(_surface.REFINED.values())


def test_the_public_rows_are_generated_and_exported_under_their_names():
    for row, public in _surface.PUBLIC_ROWS.items():
        cls = getattr(_generated, public.name)
        assert not hasattr(_generated, row), row
        assert cls.__name__ == public.name
        assert set(public.not_null) <= set(_fields(cls)), public
        for field in dataclasses.fields(cls):
            assert ("None" not in str(field.type)) == (field.name in public.not_null) or str(field.type) == "Any"
        if public.name in pgrecall.driver.__all__:
            assert getattr(pgrecall, public.name, cls) is cls
            assert getattr(pgrecall.driver, public.name) is cls


def test_a_generated_row_reads_as_its_public_class(acme):
    scopes = acme.list_scopes()
    assert scopes and all(type(s) is pgrecall.driver.Scope is _generated.Scope for s in scopes)
    assert type(acme.schema_info()) is pgrecall.driver.SchemaInfo


def test_every_hand_written_builder_is_listed_with_its_reason():
    hand_written = {name for name, op in vars(_Operations).items()
                    if isinstance(op, _operation) and op.build.__module__ != _generated.__name__}
    assert hand_written - set(_surface.HANDWRITTEN) == set(), "list it in driver/_surface.py HANDWRITTEN, or use the generated builder"
    assert set(_surface.HANDWRITTEN) - hand_written == set(), "listed in driver/_surface.py HANDWRITTEN, no longer hand-written"
    assert all(_surface.HANDWRITTEN.values())


def test_every_shape_is_the_generated_method_with_that_shape():
    """A method _surface.SHAPES lists is the generated builder, written as the shape says: those arguments by
    position too, those by name only, the scope left to the handle, one row rather than a list, read into the
    refined dataclass."""
    kinds = inspect.Parameter
    for name, shape in _surface.SHAPES.items():
        op = vars(_Operations)[name]
        assert isinstance(op, _operation) and op.build is getattr(_generated, name), name
        assert shape.reason, name
        parameters = op.signature.parameters
        assert all(parameters[p].kind is kinds.POSITIONAL_OR_KEYWORD for p in shape.positional), name
        assert all(parameters[p].kind is kinds.KEYWORD_ONLY and parameters[p].default is kinds.empty
                   for p in shape.keyword_only), name
        assert not shape.handle_scope or parameters["scope"].default is None, name
        assert not shape.one_row or not str(op.signature.return_annotation).startswith("Call[list["), name
        assert not shape.row or shape.row in str(op.signature.return_annotation), name  # _module.Class


def test_a_generated_method_shows_the_functions_defaults(acme):
    """The defaults a caller sees are the SQL function's (the catalog's), and leaving one out is the same call."""
    assert inspect.signature(acme.add_peer).parameters["kind"].default == "human"
    assert inspect.signature(acme.representation).parameters["limit"].default == 100
    assert inspect.signature(acme.rebuild_embeddings).parameters["everything"].default is False
    acme.add_peer("Rosa")
    assert acme.add_peer("Rosa", "human") == acme.add_peer("Rosa")
    assert acme.freshness() == acme.freshness(acme.scopes[0])
