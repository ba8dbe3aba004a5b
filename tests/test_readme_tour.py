"""README's command tour, pasted: the ```sh blocks of its "Command line" section, read from README.md
(not a copy), run in order by one bash, as a new user would paste them, in a fresh PGRECALL_HOME (so
with its own embedded server, started by the tour and stopped by it), from a folder that holds only
the checkout's .venv and examples/. Every command must exit 0; a failure names the line, its exit
code and what it printed.

Slow: the tour embeds with the real model (worker, recall, search, rebuild each load it)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MARK = "@@pgrecall-tour@@"


def tour_blocks(text: str) -> list[tuple[int, list[str]]]:
    """The ```sh blocks of the section "## Command line", up to its next heading: (line number, lines)."""
    lines = text.split("\n")
    start = lines.index("## Command line")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("#"))
    blocks, i = [], start
    while i < end:
        if lines[i] == "```sh":
            close = lines.index("```", i + 1)
            blocks.append((i + 2, lines[i + 1:close]))
            i = close
        i += 1
    return blocks


def commands(text: str) -> list[tuple[int, str]]:
    """Each command of the tour with its README line number (one command a line; comments are bash's)."""
    return [(first + n, line) for first, body in tour_blocks(text) for n, line in enumerate(body)
            if line.strip() and not line.lstrip().startswith("#")]


def script(steps: list[tuple[int, str]]) -> str:
    """One bash script: each command as written, then its exit code and a marker between the outputs."""
    out = []
    for n, (_, line) in enumerate(steps):
        out.append(f"echo {MARK} {n} start; echo {MARK} {n} start >&2")
        out.append(line)
        out.append(f"echo {MARK} {n} rc $? $(date +%s.%N); echo {MARK} {n} end >&2")
    return "\n".join(out) + "\n"


def test_the_tour_is_what_the_readme_says():
    steps = commands(README.read_text())
    text = " ".join(line for _, line in steps)
    # pastes as written: no alternatives spelled with |, which a shell reads as a pipe
    assert not any(re.search(r"\w\|\w", line.split("#")[0]) for _, line in steps), steps
    assert not any(" | " in line.split("#")[0] for _, line in steps)
    # it shows what the model has, through the commands that record it
    for shown in ("tenant create", "tenant settings acme --set", "import examples/sample_chat.jsonl", "remember",
                  "correct", "supersede", "derive", "forget", "session create", "session say", "session config",
                  "fact assert", "fact retract", "fact traverse", "facts", "document add", "scope passages",
                  "peer config", "recall", "search", "erase", "tenant drop", "server stop"):
        assert f"pgrecall {shown}" in text, shown
    assert (ROOT / "examples" / "sample_chat.jsonl").is_file() and (ROOT / "examples" / "sample_document.md").is_file()


def run_tour(steps: list[tuple[int, str]], work: Path, env: dict[str, str]) -> tuple[list[str], list[tuple]]:
    """Runs the steps in one bash in ``work``; returns the problems (a line that exited non-zero, or never ran)
    and each command's time in seconds with its README line."""
    (work / "tour.sh").write_text(script(steps))
    previous = time.time()
    proc = subprocess.run(["bash", "tour.sh"], cwd=work, env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=1800)
    outputs = re.split(rf"^{MARK} \d+ start\n", proc.stdout, flags=re.M)[1:]
    errors = re.split(rf"^{MARK} \d+ start\n", proc.stderr, flags=re.M)[1:]
    problems, timings = [], []
    for n, (line_no, line) in enumerate(steps):
        found = re.search(rf"^{MARK} {n} rc (\d+) ([\d.]+)$", outputs[n], flags=re.M) if n < len(outputs) else None
        if not found:
            problems.append(f"README.md:{line_no}: never ran to its end: {line}")
            continue
        rc, at = int(found.group(1)), float(found.group(2))
        timings.append((round(at - previous, 1), line_no))
        previous = at
        if rc != 0:
            said = outputs[n][:found.start()].strip()[-1500:]
            err = errors[n].split(f"{MARK} {n} end")[0].strip()[-1500:] if n < len(errors) else ""
            problems.append(f"README.md:{line_no}: exit {rc}: {line}\n  stdout: {said}\n  stderr: {err}")
    return problems, timings


def test_the_harness_names_a_command_that_fails_and_those_that_never_ran(tmp_path):
    steps = [(10, "echo one"), (11, "(exit 3)   # a comment"), (12, "true"), (13, "exit 4"), (14, "echo never")]
    problems, timings = run_tour(steps, tmp_path, dict(os.environ))
    assert [p.split("\n")[0] for p in problems] == ["README.md:11: exit 3: (exit 3)   # a comment",
                                                      "README.md:13: never ran to its end: exit 4",
                                                      "README.md:14: never ran to its end: echo never"]
    assert [line for _, line in timings] == [10, 11, 12]


@pytest.mark.slow
def test_the_readme_tour_pastes_and_every_command_exits_0(tmp_path):
    steps = commands(README.read_text())
    work = tmp_path / "clone"
    work.mkdir()
    (work / ".venv").symlink_to(ROOT / ".venv")
    (work / "examples").symlink_to(ROOT / "examples")
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("PGRECALL_") or k in ("VIRTUAL_ENV", "PYTHONHOME"))}
    env.update(PGRECALL_HOME=str(home), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               PYTHONPATH=os.pathsep.join([str(ROOT / "python"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    started = time.time()
    try:
        problems, timings = run_tour(steps, work, env)
    finally:  # leave no server behind, whatever the tour did
        subprocess.run([sys.executable, "-m", "pgrecall.cli", "server", "stop"], env=env, capture_output=True,
                       timeout=120)
    assert problems == [], "\n" + "\n".join(problems)
    assert len(timings) == len(steps) >= 40
    assert (work / "acme.sql").stat().st_size > 10_000  # `pgrecall sql --tenant acme > acme.sql` wrote the script
    print(f"the tour: {len(steps)} commands in {time.time() - started:.0f} s; slowest (s, README line): "
          f"{sorted(timings, reverse=True)[:6]}")
