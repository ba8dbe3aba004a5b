"""README's test counts are the ones pytest collects: `make test` (the tests not marked slow) and
`make test-all` (every test). Slow: it collects the whole suite twice (about 30 s each on a loaded machine)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def collected(*args: str) -> int:
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    last = proc.stdout.strip().splitlines()[-1]
    found = re.match(r"(\d+)(?:/\d+)? tests? collected", last)
    assert found, proc.stdout[-2000:] + proc.stderr[-2000:]
    return int(found.group(1))


@pytest.mark.slow
def test_the_readme_counts_the_tests_pytest_collects():
    said = re.search(r"`make test` runs (\d+) tests and `make test-all` (\d+)", (ROOT / "README.md").read_text())
    assert said, "README.md no longer says how many tests make test and make test-all run"
    fast, every = collected("-m", "not slow"), collected()
    assert (int(said.group(1)), int(said.group(2))) == (fast, every), \
        f"README.md: say `make test` runs {fast} tests and `make test-all` {every}"
