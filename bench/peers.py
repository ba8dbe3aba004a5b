"""What a user pays: the side-by-side scenarios of ../shared/bench-peers, run against this checkout.

    python -m bench.peers [--scenarios 10k,10kx50,100k] [--reps 2] [--peers DIR]
    make bench-peers BENCH_ARGS="--scenarios 10k,10kx50"

The side-by-side bench (kept outside this repository; its README says what it measures) drives pgrecall
through its public path: the driver appends one turn and remembers one memory citing it per item, and
pgrecall's own worker stores the vectors, all timed from the client. Beside it, the bare pgvector + FTS +
RRF statement (filtered by a user column when there are users). make bench measures the server's side;
this measures what an application sees, whole database included.

The bench's folder is copied into bench/cache/peers/ (git-ignored; its cache of MiniLM vectors stays there
between runs, about 4 minutes for 10k texts and 8 for 100k the first time) and run with this checkout's
python/ first on the path, with the two adapters this project can be compared on without installing the
peers (baseline_pg and pgrecall). While pgrecall's database still holds the run, every table of the tenant
and the control schema is measured (heap, indexes, TOAST, rows): the byte table of issue #31.

Writes bench/results/peers/latest.md (and each scenario's JSON beside it, named by the checkout's commit).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "peers"
WORK = Path(os.environ.get("PGRECALL_BENCH_CACHE", ROOT / "bench" / "cache")) / "peers"
DEFAULT_PEERS = next((p for p in (ROOT.parent / "shared" / "bench-peers", ROOT.parent.parent / "shared" / "bench-peers")
                      if p.exists()), ROOT.parent / "shared" / "bench-peers")
SCENARIOS = {"10k": (10_000, 1), "10kx50": (10_000, 50), "100k": (100_000, 1)}


def scenario(name: str) -> tuple[int, int]:
    """'10k' -> (10000, 1), '10kx50' -> (10000, 50): the issue's three, or any other size for a quick look."""
    m = re.fullmatch(r"(\d+)k(?:x(\d+))?", name)
    if not m:
        sys.exit(f"bench.peers: a scenario is SIZEk or SIZEkxUSERS (e.g. {', '.join(SCENARIOS)}), not {name!r}")
    return int(m.group(1)) * 1000, int(m.group(2) or 1)
ADAPTERS = "baseline_pg,pgrecall"

# Issue #31's targets, each as (what, pgrecall / bare must satisfy). Everything-eligible p50 is <= 1.2x at
# 10k and below the bare statement at 100k; per user <= 2x.
def targets(n: int, users: int) -> list[tuple[str, str, float, str]]:
    p50 = ("per-user recall p50", "p50_vs_baseline", 2.0, "<=") if users > 1 else (
        ("recall p50", "p50_vs_baseline", 1.2, "<=") if n < 100_000 else ("recall p50", "p50_vs_baseline", 1.0, "<"))
    return [("disk", "size_vs_baseline", 1.5, "<="), ("ingest", "ingest_rate_vs_baseline", 0.8, ">="), p50]

# Run inside the bench's own folder (a child process, so its embedded server and imports are its own):
# pgrecall's adapter is extended to write the tenant's byte table before the bench tears it down.
INSIDE = r'''
import json, os, sys
sys.path.insert(0, os.getcwd())
import adapters, bench

class Measured(adapters.Pgrecall):
    def notes(self):
        rows = self.admin.execute("""
            select coalesce(pg_partition_root(c.oid), c.oid)::regclass::text,
                   sum(pg_relation_size(c.oid)), sum(pg_indexes_size(c.oid)),
                   sum(pg_total_relation_size(c.oid) - pg_relation_size(c.oid) - pg_indexes_size(c.oid)),
                   sum(greatest(c.reltuples, 0))::bigint, count(*)
              from pg_class c join pg_namespace n on n.oid = c.relnamespace
             where n.nspname in (%s, 'pgrecall') and c.relkind in ('r', 'm')
             group by 1 order by sum(pg_total_relation_size(c.oid)) desc""", (self.TENANT,)).fetchall()
        with open(os.environ["PGRECALL_PEERS_RELATIONS"], "w") as f:
            json.dump([dict(zip(("relation", "heap", "indexes", "toast", "rows", "parts"), r)) for r in rows], f,
                      default=int)
        return super().notes()

adapters.ADAPTERS["pgrecall"] = Measured
sys.argv = ["bench.py"] + sys.argv[1:]
bench.main()
'''


def prepare(peers: Path) -> Path:
    """The bench's files copied into the work folder (its vector cache kept), refreshed from the source."""
    if not (peers / "bench.py").exists():
        sys.exit(f"bench.peers: no side-by-side bench at {peers} (pass --peers DIR: a copy of ../shared/bench-peers)")
    WORK.mkdir(parents=True, exist_ok=True)
    for src in peers.iterdir():
        if src.is_file():
            shutil.copy2(src, WORK / src.name)
    return WORK


def commit() -> str:
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "migrations", "plpgsql", "python"],
                           capture_output=True, text=True).stdout.strip()
    return (out.stdout.strip() or "unknown") + ("+changes" if dirty else "")


def run_scenario(work: Path, n: int, users: int, reps: int, tag: str) -> dict:
    relations = work / "results" / f"relations-n{n}-u{users}.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), PGRECALL_PEERS_RELATIONS=str(relations),
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    cmd = [sys.executable, "-c", INSIDE, "--n", str(n), "--users", str(users), "--adapters", ADAPTERS,
           "--reps", str(reps), "--tag", tag, "--out", str(work / "results"),
           "--pgdata", str(work / f"pgdata-{os.getpid()}")]
    load0 = os.getloadavg()
    started = time.time()
    subprocess.run(cmd, cwd=work, env=env, check=True)
    report = json.loads((work / "results" / f"n{n}_u{users}_{tag}.json").read_text())
    report["relations"] = json.loads(relations.read_text()) if relations.exists() else []
    report["wall_s"] = time.time() - started
    report["load"] = [load0, os.getloadavg()]
    return report


def ratio_cell(value: float, limit: float, op: str) -> str:
    ok = {"<=": value <= limit, "<": value < limit, ">=": value >= limit}[op]
    return f"{value:.2f}x ({op} {limit:g}: {'met' if ok else 'NOT met'})"


def render(reports: dict[str, dict], tree: str) -> str:
    lines = [f"# What a user pays: ../shared/bench-peers against this checkout ({tree})", "",
             f"`python -m bench.peers` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; adapters "
             f"{ADAPTERS}; client-side times, model cost excluded (cached MiniLM vectors). Compare the ratios "
             "within one scenario: the two sides' batches and search passes are interleaved in one run.", ""]
    for name, rep in reports.items():
        meta, res = rep["meta"], rep["results"]
        bare, ours = res["baseline_pg"], res["pgrecall"]
        k = meta["k"]
        lines += [f"## {name}: {meta['n']:,} memories, {meta['users']} user(s)", "",
                  f"Load average at the start and end: {rep['load'][0][0]:.1f} -> {rep['load'][1][0]:.1f}; "
                  f"wall {rep['wall_s'] / 60:.1f} min; exact-cosine recall@{k} (numpy) "
                  f"{meta['exact_cosine_recall']:.3f}.", "",
                  f"| side | ingest items/s | search p50 ms | p95 ms | recall@{k} | MB on disk |",
                  "|---|---:|---:|---:|---:|---:|"]
        for side, r in (("bare statement", bare), ("pgrecall", ours)):
            lines.append(f"| {side} | {r['ingest_items_per_s']:.0f} | {r['search_p50_ms']:.2f} | "
                         f"{r['search_p95_ms']:.2f} | {r[f'recall@{k}']:.3f} | {r['db_bytes'] / 2**20:.1f} |")
        lines += ["", "| target (pgrecall / bare) | measured |", "|---|---|"]
        for what, key, limit, op in targets(meta["n"], meta["users"]):
            lines.append(f"| {what} | {ratio_cell(ours[key], limit, op)} |")
        recall_ok = ours[f"recall@{k}"] >= bare[f"recall@{k}"]
        lines.append(f"| recall@{k} >= bare | {ours[f'recall@{k}']:.3f} vs {bare[f'recall@{k}']:.3f}"
                     f" ({'met' if recall_ok else 'NOT met'}) |")
        if rep["relations"]:
            items = meta["n"]
            lines += ["", f"Where pgrecall's bytes go (tenant and control schema, each table with its partitions; "
                      f"bytes per memory = total / {items:,}):", "",
                      "| table | heap MB | indexes MB | TOAST and maps MB | total MB | bytes / memory | rows |",
                      "|---|---:|---:|---:|---:|---:|---:|"]
            for r in rep["relations"]:
                total = r["heap"] + r["indexes"] + r["toast"]
                if total < 64 * 1024:
                    continue
                lines.append(f"| {r['relation']} | {r['heap'] / 2**20:.1f} | {r['indexes'] / 2**20:.1f} | "
                             f"{r['toast'] / 2**20:.1f} | {total / 2**20:.1f} | {total / items:,.0f} | {r['rows']:,} |")
        lines += ["", f"pgrecall's own account: {ours.get('notes', '')}", ""]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", default="10k,10kx50,100k", help="comma-separated SIZEk or SIZEkxUSERS")
    ap.add_argument("--reps", type=int, default=2, help="timed search passes per side")
    ap.add_argument("--peers", type=Path, default=DEFAULT_PEERS, help="the side-by-side bench's folder")
    args = ap.parse_args(argv)
    wanted = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    sizes = {name: scenario(name) for name in wanted}
    work = prepare(args.peers)
    tree = commit()
    tag = "pgrecall-" + tree.replace("+", "-")
    reports = {}
    for name in wanted:
        n, users = sizes[name]
        print(f"[bench.peers] {name}: {n} memories, {users} user(s)", file=sys.stderr, flush=True)
        reports[name] = run_scenario(work, n, users, args.reps, tag)
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"n{n}_u{users}_{tag}.json").write_text(json.dumps(reports[name], indent=1, default=float))
    # latest.md holds every scenario measured on this tree (a 100k run after the 10k ones adds to them).
    for path in sorted(RESULTS.glob(f"n*_u*_{tag}.json")):
        kept = json.loads(path.read_text())
        name = f"{kept['meta']['n'] // 1000}k" + (f"x{kept['meta']['users']}" if kept["meta"]["users"] > 1 else "")
        reports.setdefault(name, kept)
    reports = dict(sorted(reports.items(), key=lambda kv: (kv[1]["meta"]["n"], kv[1]["meta"]["users"])))
    text = render(reports, tree)
    (RESULTS / "latest.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
