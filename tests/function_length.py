"""How long each function is, read from the source files: SQL functions in plpgsql/ and sql/,
Python functions in python/. Used by test_function_length.py and by the closing note's figures
(``python tests/function_length.py`` prints the longest of each language)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

_CREATE = re.compile(r"^\s*create\s+(?:or\s+replace\s+)?(?:function|procedure)\s+([\w.]+)\s*\(",
                     re.IGNORECASE | re.MULTILINE)
_DOLLAR = re.compile(r"\$[A-Za-z_]*\$")


def sql_functions(path: Path) -> list[tuple[str, int, int]]:
    """(name, first line, line count) of each function in a SQL file: from its CREATE line to the
    line that closes its dollar-quoted body."""
    text = path.read_text(encoding="utf-8")
    found = []
    for match in _CREATE.finditer(text):
        opener = _DOLLAR.search(text, match.end())
        if opener is None:
            continue
        closer = text.find(opener.group(0), opener.end())
        if closer < 0:
            continue
        first = text.count("\n", 0, match.start()) + 1
        last = text.count("\n", 0, closer) + 1
        name = match.group(1).split(".")[-1]
        found.append((name, first, last - first + 1))
    return found


def python_functions(path: Path) -> list[tuple[str, int, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            found.append((node.name, start, (node.end_lineno or node.lineno) - start + 1))
    return found


def all_sql() -> list[tuple[str, str, int, int]]:
    files = sorted((REPO / "plpgsql").rglob("*.sql")) + sorted(
        p for p in (REPO / "sql").glob("*.sql") if p.name != "install.sql")  # generated from the others
    return [(str(p.relative_to(REPO)), *f) for p in files for f in sql_functions(p)]


def all_python() -> list[tuple[str, str, int, int]]:
    files = sorted((REPO / "python").rglob("*.py"))
    return [(str(p.relative_to(REPO)), *f) for p in files for f in python_functions(p)]


if __name__ == "__main__":
    top = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    for label, rows in (("SQL", all_sql()), ("Python", all_python())):
        print(f"{label}: {len(rows)} functions; the longest:")
        for path, name, line, length in sorted(rows, key=lambda r: -r[3])[:top]:
            print(f"  {length:4d}  {name}  ({path}:{line})")
