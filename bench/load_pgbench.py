"""The load of ``make bench-load`` with the clients in C: pgbench runs the same operations on the same tenant
(issue #51 item 2), so that what is measured is the server's and not 32 Python threads sharing one GIL and the
same two cores.

    python -m bench.load_pgbench --mix 0,100,0 --no-remember     # appends alone, 32 clients, 20 s
    python -m bench.load_pgbench --mix 70,20,10 --pooler 2       # the mixed load through pgbouncer

bench/load.py's tenant and its 300 memories (``setup``); one pgbench script per operation, weighted by
``--mix``: a hybrid recall of one of bench/load.py's twelve questions with its precomputed vector (read from
a table of the bench's own, so no model time is counted), an append (and, unless ``--no-remember``, a
remember citing it, in the same script: its latency is the two together), a lexical message search. pgbench
logs every transaction (``--log``), so the percentiles are of every call, per script. Afterwards, as the
superuser: the scope's offsets run from 1 to its watermark without a gap, and the log holds every append
pgbench counted. pgbench stops a client at its first error; the errors are counted and reported.
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import psycopg

from . import load

HERE = Path(__file__).resolve().parent
T = load.TENANT

RECALL = f"""\\set q random(1, {len(load.QUERIES)})
select count(*) from {T}.recall('bot', '{{default}}', (select query from bench_load.question where id = :q),
    'converse', (select vector from bench_load.question where id = :q), 'hybrid', 10);
"""
APPEND = f"""\\set u random(0, {load.USERS - 1})
\\set n random(1, 1000000000)
select {T}.append_observation('bot', '{{default}}', 'default', 'client :client_id turn :n', 'user',
    p_actor => 'user:u') as said \\gset
"""
REMEMBER = f"""select count(*) from {T}.remember('bot', '{{default}}', 'default', 'user:u said turn :n',
    array[:said]::bigint[], '{{converse}}');
"""
SEARCH = f"""\\set q random(1, {len(load.QUERIES)})
select count(*) from {T}.search_messages('bot', '{{default}}', (select query from bench_load.question
    where id = :q), p_mode => 'lexical', p_limit => 10);
"""
OPERATIONS = ("recall", "append", "search")


def pgbench_binary() -> str:
    from pgrecall import server

    return str(server.psql_binary().parent / "pgbench")


def questions(superuser_uri: str, app_role: str) -> None:
    """bench/load.py's questions and their vectors in a table of the bench's own that the app role may read."""
    from pgrecall.embedder import get_embedder

    vectors = get_embedder().encode_array(load.QUERIES)
    with psycopg.connect(superuser_uri, autocommit=True) as conn:
        conn.execute("create schema if not exists bench_load")
        conn.execute("create table if not exists bench_load.question (id int primary key, query text, "
                     "vector double precision[])")
        for i, (q, v) in enumerate(zip(load.QUERIES, vectors, strict=True), 1):
            conn.execute("insert into bench_load.question values (%s, %s, %s)", (i, q, [float(x) for x in v]))
        conn.execute(f"grant usage on schema bench_load to {app_role}")
        conn.execute(f"grant select on bench_load.question to {app_role}")


def pgbench(uri: str, clients: int, seconds: int, scripts: list[tuple[str, Path, int]],
            workdir: Path) -> subprocess.Popen[str]:
    cmd = [pgbench_binary(), "--no-vacuum", "--client", str(clients), "--jobs", str(min(2, clients)),
           "--time", str(seconds), "--log", "--log-prefix", str(workdir / "tx"), "--protocol", "simple"]
    for _, path, weight in scripts:
        cmd += ["--file", f"{path}@{weight}"]
    return subprocess.Popen([*cmd, uri], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run(app_uri: str, clients: int, seconds: int, mix: tuple[int, int, int], remember: bool,
        workdir: Path, write_uri: str | None = None) -> dict[str, Any]:
    """pgbench on ``app_uri``; with ``write_uri``, the appends' share of the clients (by ``mix``) is a second
    pgbench on it, at the same time, and the rest reads on ``app_uri``."""
    scripts = []
    for op, weight in zip(OPERATIONS, mix, strict=True):
        if weight:
            path = workdir / f"{op}.sql"
            path.write_text({"recall": RECALL, "append": APPEND + (REMEMBER if remember else ""),
                             "search": SEARCH}[op])
            scripts.append((op, path, weight))
    runs: list[tuple[list[tuple[str, Path, int]], Path]] = []
    procs: list[subprocess.Popen[str]] = []
    before = os.getloadavg()
    if write_uri:
        writers = max(1, round(clients * mix[1] / sum(mix)))
        reads = [s for s in scripts if s[0] != "append"]
        writes = [s for s in scripts if s[0] == "append"]
        for part, n, uri in ((reads, clients - writers, app_uri), (writes, writers, write_uri)):
            folder = workdir / ("writes" if part is writes else "reads")
            folder.mkdir()
            runs.append((part, folder))
            procs.append(pgbench(uri, n, seconds, part, folder))
    else:
        runs.append((scripts, workdir))
        procs.append(pgbench(app_uri, clients, seconds, scripts, workdir))
    outputs = [p.communicate(timeout=seconds + 300) for p in procs]
    after = os.getloadavg()
    latencies: dict[str, list[float]] = {op: [] for op, _, _ in scripts}
    for part, folder in runs:
        for log in glob.glob(str(folder / "tx.*")):
            for line in Path(log).read_text().splitlines():
                # client_id transaction_no time script_no time_epoch time_us [schedule_lag]
                fields = line.split()
                if fields[2] in ("failed", "skipped"):
                    continue
                latencies[part[int(fields[3])][0]].append(int(fields[2]) / 1e6)
    ops = load.summarise(latencies, seconds)
    return {"ops": ops, "pgbench_rc": max(p.returncode for p in procs),
            "pgbench_stderr": "".join(err for _, err in outputs)[-2000:],
            "pgbench_summary": "".join(out for out, _ in outputs), "load_average": {"before": before, "after": after},
            "appends_counted": len(latencies.get("append", []))}


def logged(superuser_uri: str) -> int:
    with psycopg.connect(superuser_uri, autocommit=True) as conn:
        return int(conn.execute(f"select count(*) from {T}.observation").fetchone()[0])


def loss_check(superuser_uri: str, appends_counted: int, logged_before: int) -> dict[str, Any]:
    with psycopg.connect(superuser_uri, autocommit=True) as conn:
        offsets = [r[0] for r in conn.execute(f"select log_offset from {T}.observation where scope = 'default' "
                                              "order by log_offset").fetchall()]
        watermark = conn.execute(f"select log_watermark from {T}.scope where name = 'default'").fetchone()[0]
    return {"watermark": watermark, "offsets_contiguous": offsets == list(range(1, watermark + 1)),
            "logged_during_run": len(offsets) - logged_before, "appends_counted": appends_counted}


def main(argv: list[str] | None = None) -> int:
    from .harness import embedded_server, new_report, write_report

    parser = argparse.ArgumentParser(prog="python -m bench.load_pgbench")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--mix", default="70,20,10", help="recall,append(+remember),message search (weights)")
    parser.add_argument("--no-remember", dest="remember", action="store_false")
    parser.add_argument("--pooler", type=int, default=0, metavar="N",
                        help="through pgbouncer in transaction mode with N server connections")
    parser.add_argument("--write-pooler", type=int, default=0, metavar="M",
                        help="with --pooler: the append clients' share (by --mix) a second pgbench through a pool of "
                             "their own with M server connections, beside the readers")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    mix = tuple(int(x) for x in args.mix.split(","))
    assert len(mix) == 3, "--mix takes three weights"
    if args.write_pooler and not args.pooler:
        parser.error("--write-pooler goes with --pooler")
    role = f"pgrecall_{T}_app"
    with embedded_server("pgrecall-bench-pgbench-", {"max_connections": str(max(100, args.clients + 20))}) as info, \
            tempfile.TemporaryDirectory(prefix="pgbench-") as tmp, ExitStack() as stack:
        superuser, app = info.uri(), info.uri(user=role)
        load.setup(superuser, app)
        questions(superuser, role)
        logged_before = logged(superuser)
        writes = None
        if args.pooler:
            from pgrecall import server

            from .pooler import pgbouncer

            app = stack.enter_context(pgbouncer(info.socket_dir, info.port, server.DATABASE, role,
                                                pool_size=args.pooler, max_clients=args.clients + 20))
            if args.write_pooler:
                writes = stack.enter_context(pgbouncer(info.socket_dir, info.port, server.DATABASE, role,
                                                       pool_size=args.write_pooler, max_clients=args.clients + 20))
        result = run(app, args.clients, args.seconds, mix, args.remember, Path(tmp),  # type: ignore[arg-type]
                     writes)
        result["loss"] = loss_check(superuser, result["appends_counted"], logged_before)
    report = new_report("python -m bench.load_pgbench {args}", argv, **result)
    loss = result["loss"]
    md = [f"# Many agents on one tenant, pgbench as the clients ({report['started']})", "",
          f"Machine: {report['machine']}. Command: `{report['command']}`. {args.clients} pgbench clients "
          f"(2 threads) for {args.seconds} s"
          f"{f' through pgbouncer (transaction mode, {args.pooler} server connections)' if args.pooler else ''}"
          + (f"; the append clients (their share by the mix) a second pgbench through a pool of their own "
             f"({args.write_pooler})" if args.write_pooler else "")
          + f", mix recall / append{' + remember' if args.remember else ' (alone)'} / message search = {args.mix}; "
          f"load average {result['load_average']['before'][0]:.1f} before, "
          f"{result['load_average']['after'][0]:.1f} after.", "",
          "| operation | count | per s | p50 ms | p95 ms | p99 ms | max ms |", "|---|---:|---:|---:|---:|---:|---:|"]
    for op, r in result["ops"].items():
        name = "append + remember" if op == "append" and args.remember else op
        md.append(f"| {name} | {r['count']} | {r['per_s']:.1f} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | "
                  f"{r['p99_ms']:.1f} | {r['max_ms']:.1f} |")
    md += ["", f"pgbench exit code {result['pgbench_rc']}"
               + (f"; it said: `{result['pgbench_stderr'].strip().splitlines()[-1]}`"
                  if result["pgbench_rc"] and result["pgbench_stderr"].strip() else "") + ".",
           f"Loss check: pgbench counted {loss['appends_counted']} appends, the log gained "
           f"{loss['logged_during_run']}; offsets 1..{loss['watermark']} "
           f"{'contiguous' if loss['offsets_contiguous'] else 'WITH GAPS'}."]
    write_report(args.out, "load-pgbench", report, "\n".join(md) + "\n")
    print("\n".join(md))
    # a script cut off by the clock may have appended without being counted: more logged is not a loss
    lost = loss["logged_during_run"] < loss["appends_counted"]
    return 0 if result["pgbench_rc"] == 0 and loss["offsets_contiguous"] and not lost else 1


if __name__ == "__main__":
    raise SystemExit(main())
