"""Without Chromium the review screen's browser tests skip, and the run says so loudly at its end, with the
command that installs it (conftest.pytest_terminal_summary), instead of one skip line among hundreds."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # a pytest of its own, with its own embedded server
def test_a_run_without_chromium_ends_saying_how_to_get_it(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PGRECALL_CHROMIUM"] = str(tmp_path / "no-such-chromium")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", "-rs",
                           "tests/test_review_browser.py::test_a_second_reviewer_who_decides_the_same_pair_is_told"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "1 skipped" in proc.stdout
    summary = proc.stdout.split("the review screen was NOT tested", 1)
    assert len(summary) == 2, proc.stdout[-3000:]
    assert "1 browser test of the review screen skipped: no Chromium on PATH." in summary[1]
    assert "apt-get install -y chromium" in summary[1]
