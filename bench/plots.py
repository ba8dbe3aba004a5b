"""The figures next to bench/results/latest.md, drawn from the archived runs (bench/results/archive/).

Each corpus size is plotted from the newest run that measured it, so that ``make bench`` (10k and
100k) and a separate ``--sizes 1000000`` run end up on one figure; the legend names each point's run.

    python -m bench.plots          # redraw from the archive
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .run import FORMAT, RESULTS

MODES = ("hybrid", "lexical", "dense")
COLOURS = {"hybrid": "tab:blue", "lexical": "tab:orange", "dense": "tab:green", "baseline": "black"}


def newest_per_size(archive: Path) -> dict[int, tuple[str, dict]]:
    """For each corpus size, (run stamp, that size's result) from the newest run of this format."""
    found: dict[int, tuple[str, dict]] = {}
    for path in sorted(archive.glob("bench-*.json")):
        report = json.loads(path.read_text())
        if report.get("format", 1) < FORMAT:
            continue
        for result in report["sizes"]:
            found[result["size"]] = (report["started"], result)  # sorted by stamp: later runs win
    return dict(sorted(found.items()))


def write_plots(out: Path = RESULTS) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = newest_per_size(out / "archive")
    if not runs:
        return []
    sizes = list(runs)
    written = []

    def label(n: int) -> str:
        derived = runs[n][1].get("derived_corpus")
        return f"{n:,}" + (f" (derived from {derived['base']:,})" if derived else "")

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    for mode in MODES:
        for stat, style in (("p50_ms", "-"), ("p95_ms", "--")):
            ax.plot(sizes, [runs[n][1]["recall"][mode][stat] for n in sizes], style, marker="o",
                    color=COLOURS[mode], label=f"pgrecall {mode} {stat[:3]}")
    for stat, style in (("p50_ms", "-"), ("p95_ms", "--")):
        ax.plot(sizes, [runs[n][1]["baseline"][stat] for n in sizes], style, marker="s", color=COLOURS["baseline"],
                label=f"bare RRF statement {stat[:3]}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("memories")
    ax.set_ylabel("ms per recall")
    ax.set_title("Recall latency by corpus size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    ax.annotate("runs: " + ", ".join(f"{label(n)} {runs[n][0][:16]}" for n in sizes), (0.01, 0.01),
                xycoords="figure fraction", fontsize=6)
    fig.tight_layout()
    written.append(out / "latest-latency.png")
    fig.savefig(written[-1])
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    for n in sizes:
        acc = runs[n][1].get("dense_accuracy")
        if not acc:
            continue
        sweep = [s for s in acc["sweep"] if s["recall_at_10"] is not None]
        ax.plot([s["p50_ms"] for s in sweep], [s["recall_at_10"] for s in sweep], marker="o",
                label=f"{label(n)} memories")
        for s in sweep:
            bold = s["ef_search"] == acc["tenant_ef_search"]
            ax.annotate(str(s["ef_search"]), (s["p50_ms"], s["recall_at_10"]), fontsize=7, xytext=(3, -9),
                        textcoords="offset points", fontweight="bold" if bold else "normal")
    ax.axhline(0.95, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("dense arm p50 ms (recall in dense mode)")
    ax.set_ylabel("recall@10 against exact search")
    ax.set_title("Dense arm: recall against latency by ef_search (bold: the tenant's setting)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    written.append(out / "latest-ef-sweep.png")
    fig.savefig(written[-1])
    plt.close(fig)
    return written


if __name__ == "__main__":
    for path in write_plots(Path(sys.argv[1]) if len(sys.argv) > 1 else RESULTS):
        print(path)
