"""No SQL function over 100 lines, no Python function over 80 (#32 item 3): a DBA reads a function in one
screen. A static check of the source files; the allow-list names what is still long, with its length
today, and may only shrink: an entry that has grown fails, and so does one that is short enough now."""

from __future__ import annotations

from function_length import all_python, all_sql

SQL_LIMIT = 100
PYTHON_LIMIT = 80

# Still long, each with its length today. Shrink it, never grow it.
SQL_STILL_LONG: dict[tuple[str, str], int] = {}
PYTHON_STILL_LONG: dict[tuple[str, str], int] = {}


def _over(rows, limit, still_long):
    found = {(path, name): length for path, name, _line, length in rows if length > limit}
    too_long = {key: n for key, n in found.items() if n > still_long.get(key, limit)}
    settled = sorted(key for key in still_long if found.get(key, 0) < still_long[key])
    return too_long, settled


def test_no_sql_function_is_over_a_hundred_lines():
    too_long, settled = _over(all_sql(), SQL_LIMIT, SQL_STILL_LONG)
    assert too_long == {}, f"SQL functions over {SQL_LIMIT} lines (split them into steps): {too_long}"
    assert settled == [], f"shorter now: lower or remove their SQL_STILL_LONG entries: {settled}"


def test_no_python_function_is_over_eighty_lines():
    too_long, settled = _over(all_python(), PYTHON_LIMIT, PYTHON_STILL_LONG)
    assert too_long == {}, f"Python functions over {PYTHON_LIMIT} lines: {too_long}"
    assert settled == [], f"shorter now: lower or remove their PYTHON_STILL_LONG entries: {settled}"


def test_the_measure_sees_every_function_file():
    sql, python = all_sql(), all_python()
    assert len(sql) > 200 and len(python) > 300
    assert {"_erase", "erase", "install_tenant"} <= {name for _path, name, _line, _n in sql}
