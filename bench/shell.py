"""``make bench-shell`` (also part of ``make bench``): how long ``pgrecall recall`` takes from the shell, the
first call and the second, with the resident embedder and without it.

Each call is a process of its own, timed from outside as a shell times it (wall seconds), with the CPU
seconds it used (user + system, from its rusage): on a machine that other work keeps busy the wall time
grows with the load, the CPU time much less, and the load average is recorded at every phase. Phases:

- ``version``: ``pgrecall --version``, the interpreter and pgrecall's imports, nothing else;
- ``lexical``: ``recall --mode lexical``, every cost of a recall but the embedding;
- ``in-process``: ``PGRECALL_EMBEDDER=process``, each call loads the model (what every call did before
  the resident embedder);
- ``resident``: no resident embedder at the first call (it starts one and waits for its model); the
  second and later calls send the query to it.

Results: bench/results/latest-shell.md, the runs in bench/results/archive/.

    python -m bench.shell                  # 5 calls per phase
    python -m bench.shell --calls 10
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from . import corpus
from .harness import embedded_server, new_report, write_report

HERE = Path(__file__).resolve().parent
TENANT = "shellbench"
QUERY = "what does Ana like to eat for breakfast"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _command() -> list[str]:
    """`pgrecall` as a shell finds it: the console script beside this interpreter, else ``python -m``."""
    script = Path(sys.executable).with_name("pgrecall")
    return [str(script)] if script.exists() else [sys.executable, "-m", "pgrecall.cli"]


def _env(**extra: str) -> dict[str, str]:
    """A user's shell: bytecode written and read (an install has its .pyc), no embedder choice unless given."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PGRECALL_EMBEDDER")}
    return {**env, "PGRECALL_TENANT": TENANT, **extra}


def timed(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    """One call of `pgrecall ARGS`: its wall and CPU seconds (it must succeed)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(_command() + args, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"pgrecall {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "stdout_head": done.stdout.splitlines()[:1]}


def phase(name: str, args: list[str], env: dict[str, str], calls: int) -> dict[str, Any]:
    load_start = os.getloadavg()
    runs = [timed(args, env) for _ in range(calls)]
    walls = [r["wall_s"] for r in runs]
    result = {"phase": name, "args": args, "runs": runs, "first_wall_s": walls[0],
              "second_wall_s": walls[1] if len(walls) > 1 else None,
              "later_median_wall_s": statistics.median(walls[1:]) if len(walls) > 1 else None,
              "later_median_cpu_s": statistics.median(r["cpu_s"] for r in runs[1:]) if len(runs) > 1 else None,
              "loadavg_start": load_start, "loadavg_end": os.getloadavg()}
    log(f"{name}: first {walls[0]:.2f} s, then {', '.join(f'{w:.2f}' for w in walls[1:])} s")
    return result


def _setup(memories: int) -> None:
    """The tenant, one scope, peer ana, and ``memories`` memories each citing a turn of its own."""
    import psycopg
    from psycopg.types.json import Jsonb

    from pgrecall import db, install

    with db.connect_admin(autocommit=True) as conn:
        install.install(conn, [TENANT])
    with psycopg.connect(db.tenant_conninfo(TENANT, "app"), autocommit=False) as conn:
        conn.execute(f"select {TENANT}.add_scope('default')")
        conn.execute(f"select {TENANT}.add_peer('ana', 'human')")
        texts = corpus.memories(memories)
        for start in range(0, len(texts), 500):
            chunk = texts[start:start + 500]
            offsets = [r[1] for r in conn.execute(
                f"select * from {TENANT}.append_observations('ana', array['default'], 'default', %s)",
                (Jsonb([{"body": t, "source_role": "user", "actor": "ana"} for t in chunk]),))]
            items = [{"body": t, "evidence": [o], "purposes": ["converse"]} for t, o in zip(chunk, offsets)]
            conn.execute(f"select * from {TENANT}.remember_many('ana', array['default'], 'default', %s)",
                         (Jsonb(items),))
            conn.commit()


def measure(calls: int = 5, memories: int = 1000) -> dict[str, Any]:
    """The four phases on a new embedded server with ``memories`` embedded memories."""
    from pgrecall import resident

    with embedded_server("pgrsh-") as _info:
        home = Path(os.environ["PGRECALL_HOME"])
        try:
            log(f"{memories} memories, embedded by a worker that loads its own model")
            _setup(memories)
            timed(["worker", "--once"], _env(PGRECALL_EMBEDDER="process"))
            recall = ["recall", "--as", "ana", QUERY]
            timed(["--version"], _env())  # writes the .pyc files, as an install has them
            phases = [phase("version", ["--version"], _env(), calls),
                      phase("lexical", [*recall, "--mode", "lexical"], _env(), calls),
                      phase("in-process", recall, _env(PGRECALL_EMBEDDER="process"), min(calls, 3))]
            resident.stop(home)  # none runs at the first call
            phases.append(phase("resident", recall, _env(), calls))
            phases[-1]["resident_status"] = {k: v for k, v in resident.status(home).items()
                                             if k in ("pid", "load_seconds", "requests", "texts")}
            dense = [r["stdout_head"] for r in phases[-1]["runs"]]
            if not all("dense arm on" in " ".join(h) for h in dense):
                raise RuntimeError(f"a resident recall answered without the dense arm: {dense}")
        finally:
            resident.stop(home)
    return {"calls": calls, "memories": memories, "query": QUERY, "command": " ".join(_command()),
            "phases": phases}


def markdown(report: dict[str, Any]) -> str:
    return "\n".join([f"# pgrecall recall from the shell, {report['started']}", "",
                      f"Machine: {report['machine']}. Command: `{report['command']}`.", "",
                      *section(report["shell"]), "", target(report["shell"])]) + "\n"


def target(shell: dict[str, Any]) -> str:
    """The target line: the second recall from the shell in under a second."""
    second = {p["phase"]: p for p in shell["phases"]}["resident"]["second_wall_s"]
    return f"- second `pgrecall recall` from the shell {second:.2f} s < 1 s: {'met' if second < 1 else 'NOT met'}"


def section(shell: dict[str, Any]) -> list[str]:
    """The table of phases, with what they are."""
    by = {p["phase"]: p for p in shell["phases"]}
    lines = [f"Each call is a new process (`{shell['command']} recall --as ana \"{shell['query']}\"` on "
             f"{shell['memories']:,} embedded memories), timed from outside; CPU is the process's user + system "
             "seconds (the resident embedder's own few milliseconds per query are not in it).", "",
             "| phase | first call s | second call s | later calls, median s | CPU per later call s | "
             "load average at start -> end |", "|---|---|---|---|---|---|"]
    for p in shell["phases"]:
        later = f"{p['later_median_wall_s']:.2f}" if p["later_median_wall_s"] is not None else "-"
        cpu = f"{p['later_median_cpu_s']:.2f}" if p["later_median_cpu_s"] is not None else "-"
        second = f"{p['second_wall_s']:.2f}" if p["second_wall_s"] is not None else "-"
        lines.append(f"| {p['phase']} | {p['first_wall_s']:.2f} | {second} | {later} | {cpu} | "
                     f"{_load(p['loadavg_start'])} -> {_load(p['loadavg_end'])} |")
    res = by.get("resident", {}).get("resident_status", {})
    lines += ["", "`version`: `pgrecall --version` (interpreter and imports). `lexical`: `--mode lexical`, no "
              "embedding. `in-process`: `PGRECALL_EMBEDDER=process`, every call loads the model. `resident`: "
              "the first call starts the resident embedder and waits for its model, the later ones send it the "
              f"query (it loaded in {res.get('load_seconds', 0):.1f} s and answered {res.get('requests', 0)} "
              "requests)."]
    return lines


def _load(values: Any) -> str:
    return "/".join(f"{v:.1f}" for v in values) if values else "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.shell")
    parser.add_argument("--calls", type=int, default=5, help="calls per phase (at least 2; in-process: at most 3)")
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--out", default=str(HERE / "results"))
    args = parser.parse_args(argv)
    if args.calls < 2:
        parser.error("--calls must be at least 2: the first and the second call")
    if shutil.which("pgrecall") is None and not Path(sys.executable).with_name("pgrecall").exists():
        log("no pgrecall console script; timing python -m pgrecall.cli instead")
    report = new_report("python -m bench.shell {args}", argv)
    report["shell"] = measure(args.calls, args.memories)
    md = markdown(report)
    write_report(Path(args.out), "shell", report, md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
