"""One list of error codes (sql/errors.sql, loaded into pgrecall.error_code), and everything held to it:
the codes the SQL sources raise, the Python classes of pgrecall.errors (and the built-ins they also are),
and the error table of docs/reference.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pgrecall import errors

ROOT = Path(__file__).resolve().parent.parent
BUILTINS = {"ValueError": ValueError, "LookupError": LookupError, "PermissionError": PermissionError,
            "RuntimeError": RuntimeError}


def error_codes(db) -> dict[str, dict]:
    return {row[0]: dict(zip(("code", "name", "meaning", "python_class", "builtin", "refines"), row))
            for row in db.execute("select code, name, meaning, python_class, builtin, refines from pgrecall.error_code")}


def test_every_code_the_sql_sources_raise_is_listed(db):
    listed = set(error_codes(db))
    raised = {}
    for folder in ("sql", "plpgsql", "migrations"):
        for path in (ROOT / folder).rglob("*.sql"):
            if path.name == "errors.sql":
                continue
            for code in re.findall(r"'(PR[0-9A-Z]{3})'", path.read_text()):
                raised.setdefault(code, path.name)
    assert {c: f for c, f in raised.items() if c not in listed} == {}
    assert "PR107" in raised and len(raised) > 30  # the scan found the sources


def test_each_code_has_its_python_class_and_each_class_its_code(db):
    codes = error_codes(db)
    classes = {cls.__name__: cls for cls in errors._all_subclasses(errors.PgrecallError)}
    wrong = {}
    for code, row in codes.items():
        cls = classes.get(row["python_class"])
        if cls is None or cls.sqlstate != code:
            wrong[code] = f"no class {row['python_class']} with sqlstate {code}"
        elif row["builtin"] and not issubclass(cls, BUILTINS[row["builtin"]]):
            wrong[code] = f"{cls.__name__} is not a {row['builtin']}"
        elif row["refines"] and not issubclass(cls, classes[codes[row["refines"]]["python_class"]]):
            wrong[code] = f"{cls.__name__} does not refine {row['refines']}"
        elif errors._BY_SQLSTATE.get(code) is not cls:
            wrong[code] = "the driver does not translate it"
    assert wrong == {}
    unlisted = {name: cls.sqlstate for name, cls in classes.items() if cls.sqlstate and cls.sqlstate not in codes}
    assert unlisted == {}


@pytest.mark.parametrize("builtin, example", [
    (ValueError, errors.InvalidArgument), (ValueError, errors.OutOfRange), (LookupError, errors.MemoryNotFound),
    (PermissionError, errors.NotPermitted), (RuntimeError, errors.RevisionConflict),
    (errors.ConcurrencyError, errors.LeaseLost)])
def test_a_caller_may_catch_the_builtin(builtin, example):
    with pytest.raises(builtin):
        raise example("x", hint="y")


def reference_table() -> dict[str, str]:
    text = (ROOT / "docs" / "reference.md").read_text()
    section = text[text.index("### Errors: SQLSTATE class PR"):text.index("### Reading the examples")]
    found = {}
    for row in section.split("\n"):
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) == 4 and re.fullmatch(r"`[0-9A-Z]{5}`", cells[0]):
            found[cells[0].strip("`")] = re.match(r"`(\w+)`", cells[3]).group(1)
    return found


def test_the_reference_error_table_is_the_list(db):
    assert reference_table() == {code: row["python_class"] for code, row in error_codes(db).items()}


def test_the_classes_with_a_sqlstate_are_generated_from_the_list(db):
    """errors.py's classes are what pgrecall.error_code says, region and all: make generate rewrites them."""
    from pgrecall.driver import _codegen

    assert _codegen.render_error_classes(db) == _codegen.errors_region(), (
        "python/pgrecall/errors.py's classes differ from sql/errors.sql: run make generate and commit it")


def test_a_code_added_to_the_list_becomes_a_class_that_refines_its_parent(db):
    from pgrecall.driver import _codegen

    db.execute("""insert into pgrecall.error_code (code, name, meaning, python_class, builtin, refines, explanation)
                  values ('PR198', 'made_up', 'a made-up case', 'MadeUp', 'ValueError', 'PR107', null),
                         ('PR199', 'made_up_race', 'a made-up race', 'MadeUpRace', 'RuntimeError', null,
                          'Someone made it up first: read again.')""")
    rendered = _codegen.render_error_classes(db)
    assert 'class MadeUp(InvalidArgument, sqlstate="PR198"):\n    """A made-up case."""' in rendered
    assert 'class MadeUpRace(ConcurrencyError, sqlstate="PR199"):\n    """Someone made it up first: read again."""' \
        in rendered
    assert rendered != _codegen.errors_region()
