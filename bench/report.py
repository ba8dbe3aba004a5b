"""The Markdown of a ``make bench`` run (bench/results/latest.md), from its JSON report."""

from __future__ import annotations

MODES = ("hybrid", "lexical", "dense")
TARGETS = {  # size -> (hybrid p50 ms, hybrid p95 ms)
    100_000: (10, 25),
    1_000_000: (20, 50),
}
MiB = 2 ** 20



def _warmup(sizes: list) -> str:
    """How the timed queries were warmed up (runs before the field was kept: 10 queries)."""
    first = sizes[0]["recall"]["hybrid"] if sizes else {}
    warmup, queries = first.get("warmup", 10), first.get("queries", 0)
    if warmup and warmup >= queries:
        return "one untimed pass over the same queries (no mode pays for pages another left cold)"
    return f"{warmup} warm-up queries"

def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def _pct(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def markdown(report: dict) -> str:
    sizes = report["sizes"]
    lines = [f"# pgrecall bench, {report['started']}", "",
             f"Machine: {report['machine']}. Command: `{report['command']}`. "
             f"Wall time {report.get('wall_seconds', 0) / 60:.0f} min. Server: "
             + ", ".join(f"{k} {v}" for k, v in report.get("server_settings", {}).items()) + ".",
             "", "Load average (1, 5, 15 min) at the start and end of each size, a noisy machine shows here: "
             + "; ".join(f"{r['size']:,}: {_load(r.get('loadavg_start'))} -> {_load(r.get('loadavg_end'))}"
                         for r in sizes)
             + ".", "",
             "![latency by corpus size](latest-latency.png) ![dense arm: recall against latency](latest-ef-sweep.png)",
             "", "## Recall latency", "",
             f"{sizes[0]['recall']['hybrid']['queries'] if sizes else 0} queries per mode as the agent (80% of "
             "memories eligible), after " + _warmup(sizes) + ". The bare "
             "baseline is one table (GIN + HNSW) and one RRF statement of a lexical `ts_rank_cd` arm and a "
             "pgvector arm, at the tenant's HNSW search breadth.", "",
             "| size | mode | p50 ms | p95 ms | baseline p50 / p95 ms | hybrid / baseline (p50, p95) |",
             "|---|---|---|---|---|---|"]
    for r in sizes:
        for mode in MODES:
            lat = r["recall"][mode]
            lines.append(
                f"| {r['size']:,} | {mode} | {lat['p50_ms']:.2f} | {lat['p95_ms']:.2f} "
                f"| {r['baseline']['p50_ms']:.2f} / {r['baseline']['p95_ms']:.2f} "
                f"| {r['hybrid_vs_baseline_p50']:.2f}x, {r['hybrid_vs_baseline_p95']:.2f}x |")

    lines += ["", "## The dense arm against exact search", "",
              "The dense arm's top 10 (recall in `dense` mode: HNSW with iterative scan under the agent's "
              "eligibility filter) against the exact cosine top 10 over the same eligible memories "
              "(floor 0.30), by HNSW search breadth `ef_search`; the tenant's setting is in bold.", "",
              "| size | eligible | ef_search | recall@10 | p50 ms | p95 ms |", "|---|---|---|---|---|---|"]
    for r in sizes:
        d = r["dense_accuracy"]
        for s in d["sweep"]:
            ef = f"**{s['ef_search']}**" if s["ef_search"] == d["tenant_ef_search"] else str(s["ef_search"])
            lines.append(f"| {r['size']:,} | {d['eligible']:,} | {ef} | {_pct(s['recall_at_10'])} "
                         f"| {s['p50_ms']:.2f} | {s['p95_ms']:.2f} |")

    lines += ["", "## Many principals", "",
              "Every memory's audience is one of 50 users (`id mod 50`); 200 of them, spread over the corpus, "
              "belong instead to a narrow principal. Each user recalls only their own ("
              + (f"{sizes[0]['per_principal']['users']['pgrecall_hybrid']['queries']} queries cycling over the users"
                 if sizes and sizes[0].get("per_principal") else "the queries cycle over the users")
              + "); the narrow principal asks the same queries. The bare statement is the baseline's, with "
              "`user_id = $1` in both arms (a btree on user_id, pgvector's iterative scan on). Dense recall@10: "
              "each side's dense top 10 against the exact top 10 of what that principal may see.", "",
              "| size | principal | visible | dense path | pgrecall hybrid p50 / p95 ms | bare filtered p50 / p95 ms "
              "| ratio (p50, p95) | dense recall@10 pgrecall / bare |", "|---|---|---|---|---|---|---|---|"]
    for r in sizes:
        p = r.get("per_principal")
        if not p:
            continue
        for label, visible in (("users", f"~{p['visible_per_user_median']:,} each"),
                               ("narrow", f"{p['visible_to_narrow']:,}")):
            s = p[label]
            lines.append(f"| {r['size']:,} | {'one of 50 users' if label == 'users' else 'narrow'} | {visible} "
                         f"| {s['dense_method']} "
                         f"| {s['pgrecall_hybrid']['p50_ms']:.2f} / {s['pgrecall_hybrid']['p95_ms']:.2f} "
                         f"| {s['bare_filtered']['p50_ms']:.2f} / {s['bare_filtered']['p95_ms']:.2f} "
                         f"| {s['hybrid_vs_bare_p50']:.2f}x, {s['hybrid_vs_bare_p95']:.2f}x "
                         f"| {_pct(s['pgrecall_dense_recall_at_10'])} / {_pct(s['bare_dense_recall_at_10'])} |")

    lines += ["", "## Ingest, indexes, disk, memory", "",
              "Public path: append_observations + remember_many (500 a call, a transaction each), then the "
              "embeddings stored through claim_embedding_jobs / complete_embedding_jobs (two workers), then "
              "(from 50k) the HNSW index built once. Bare: batched INSERTs of the same rows and vectors into one "
              "table with its GIN and user indexes (500 a transaction), HNSW likewise. Each path's memories/s "
              "counts everything up to a searchable index.", "",
              "| size | ingest memories/s | embeddings stored/s | HNSW build s | public path memories/s "
              "| bare inserts/s | bare HNSW build s | bare path memories/s | term stats s | vacuum s | wall min |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sizes:
        e, b, v = r["embedding_store"], r["baseline"], r["ingest_vs_bare"]
        lines.append(f"| {r['size']:,} | {r['ingest']['per_second']:.0f} | {e['per_second']:.0f} "
                     f"| {_num(e.get('index_built_after_load_seconds'))} | {v['pgrecall_per_second']:.0f} "
                     f"| {b['inserts_per_second']:.0f}{'*' if b.get('copied_rows') else ''} "
                     f"| {_num(b.get('hnsw_build_seconds'))} | {v['bare_per_second']:.0f} "
                     f"| {r['term_stats_refresh_seconds']:.1f} | {r['vacuum_seconds']:.0f} "
                     f"| {r['wall_seconds'] / 60:.1f} |")
    if any(r["baseline"].get("copied_rows") for r in sizes):
        timed = min(r["baseline"]["timed_rows"] for r in sizes if r["baseline"].get("copied_rows"))
        lines += ["", f"\\* measured on the first {timed:,} rows; the rest were copied from the tenant in one "
                  "statement (the bare path's memories/s assumes the measured rate for every row)."]
    for r in sizes:
        s = r["sizes"]
        memories = r["ingest"]["created"]
        bare = s["bare_table"]
        lines += ["", f"On disk at {r['size']:,} ({memories:,} memories after duplicates): the tenant "
                  f"{s['tenant_bytes'] / MiB:,.0f} MiB, {s['tenant_bytes'] / memories:,.0f} bytes a memory; the bare "
                  f"table {bare['bytes'] / MiB:,.0f} MiB, {bare['bytes'] / max(1, bare['rows']):,.0f} bytes a row. "
                  "Each table with its indexes and TOAST (passages are stored without their vectors here: the "
                  "bench does not run the model on them):", "",
                  "| table | MiB | bytes / memory | rows | what it is for |", "|---|---|---|---|---|"]
        for t in s["tables"]:
            if t["bytes"] > 64 * 1024:
                lines.append(f"| {t['table']} | {t['bytes'] / MiB:,.1f} | {t['bytes'] / memories:,.0f} | {t['rows']:,} "
                             f"| {(t['purpose'] or '').replace('|', '/')} |")
        lines += ["", "Indexes (MiB): "
                  + ", ".join(f"{i['index']} {i['bytes'] / MiB:,.1f}" for i in s["indexes"]) + "."]
    mem = report.get("server_memory")
    if mem:
        lines += ["", "Peak server memory (proportional set size of the postmaster and all its children, sampled "
                  "every 2 s; shared buffers count once): "
                  + "; ".join(f"{phase} {b / MiB:,.0f} MiB" for phase, b in mem["peak_bytes_by_phase"].items()) + "."]

    derived = [r for r in sizes if r.get("derived_corpus")]
    if derived:
        lines += ["", "## Derived corpus", ""]
        for r in derived:
            d = r["derived_corpus"]
            lines.append(
                f"- {r['size']:,}: {d['base']:,} memories embedded by the model, {d['derived']:,} derived "
                f"(bench/derive.py), weight {d['weight']:.2f} fitted on {d['calibration_sample']} derived texts the "
                f"model embedded: a derived vector has cosine {d['cosine_to_model']:.3f} to the model's embedding of "
                f"its text; cosine to the source {d['cosine_to_source_derived']:.3f} (model "
                f"{d['cosine_to_source_model']:.3f}); nearest base memory is the source for "
                f"{d['nearest_base_is_source_derived']:.0%} (model {d['nearest_base_is_source_model']:.0%}); cosine of "
                f"the nearest base memory {d['nearest_base_cosine_derived']:.3f} (model "
                f"{d['nearest_base_cosine_model']:.3f}), mean of the ten nearest {d['ten_nearest_cosine_derived']:.3f} "
                f"(model {d['ten_nearest_cosine_model']:.3f}). Derivation took {d.get('seconds', 0):.0f} s.")

    lines += ["", "## Erasing one data subject (0.1% of the rows)", ""]
    for r in sizes:
        e = r["erase_one_subject"]
        lines.append(f"- {r['size']:,}: {e['seconds'] * 1000:.0f} ms for {e['observations']} observations and "
                     f"{e['rows_erased'].get('memory', 0)} memories; residual zero: {e['residual_zero']}")

    w = report.get("worker")
    if w:
        s = w["single_call_ingest"]
        lines += ["", "## The single-call path and the worker", "",
                  f"An agent's live path: append_observation then remember, two autocommit calls per memory "
                  f"({s['memories']:,} memories): {s['per_second']:.0f} memories/s; append_observation p50 "
                  f"{s['append_observation']['p50_ms']:.2f} ms, p95 {s['append_observation']['p95_ms']:.2f} ms; "
                  f"remember p50 {s['remember']['p50_ms']:.2f} ms, p95 {s['remember']['p95_ms']:.2f} ms.", ""]
        for label, key in (("the two calls", "writes"), ("then the worker embedding it (memory and passage)",
                                                          "embedding_writes")):
            a = s.get(key)
            if not a:
                continue
            lines += [f"What {label} write per memory: {a['rows_per_memory']:.1f} rows (inserted, updated or "
                      f"deleted), "
                      f"{a['bytes_per_memory']:,.0f} bytes on disk with indexes, "
                      f"{a['wal_bytes_per_memory']:,.0f} bytes of "
                      "WAL (the whole server's WAL over the phase; full-page images after a checkpoint included).", "",
                      "| table | inserted / updated / deleted per memory | bytes / memory | what it is for |",
                      "|---|---|---|---|"]
            for t in a["tables"]:
                lines.append(f"| {t['table']} | {t['inserted_per_memory']:.2f} / {t['updated_per_memory']:.2f} / "
                             f"{t['deleted_per_memory']:.2f} | {t['bytes_per_memory']:,.0f} "
                             f"| {(t['purpose'] or '').replace('|', '/')} |")
            lines.append("")
        lines += [f"Worker: {w['worker_per_second']:.0f} jobs/s end to end ({w['texts']} memories and "
                  f"{w.get('passages', 0)} passages, batches of 64) vs the raw model embedding the same texts in "
                  f"the same batches, {w['raw_model_per_second']:.0f} jobs/s: {w['ratio']:.0%}."]
        if "ratio_to_inputs_only" in w:
            lines += ["", f"Under input version {w['input_version']} a memory job embeds two texts: its input and "
                      f"the memory's own text, which duplicate proposals compare ({w['own_texts']} of "
                      f"{w['texts']} differ from their input). Against the raw model embedding the inputs only "
                      f"({w['raw_inputs_only_per_second']:.0f} jobs/s) the worker is at "
                      f"{w['ratio_to_inputs_only']:.0%}. Of the worker's {w['worker_seconds']:.1f} s end to end, "
                      f"{w['model_seconds_in_worker']:.1f} s are the model's (both texts); the rest is its claims, "
                      "stores and hand-offs, which overlap the model's work."]

    lines += ["", "## Targets", ""]
    for r in sizes:
        if r["size"] in TARGETS:
            p50, p95 = TARGETS[r["size"]]
            lat = r["recall"]["hybrid"]
            lines.append(f"- {r['size']:,}: hybrid p50 {lat['p50_ms']:.1f} <= {p50} ms: {_met(lat['p50_ms'] <= p50)}; "
                         f"p95 {lat['p95_ms']:.1f} <= {p95} ms: {_met(lat['p95_ms'] <= p95)}; ratio "
                         f"{r['hybrid_vs_baseline_p50']:.2f} <= 1.5: {_met(r['hybrid_vs_baseline_p50'] <= 1.5)}")
        lines.append(f"- {r['size']:,}: ingest {r['ingest']['per_second']:.0f} >= 2000/s: "
                     f"{_met(r['ingest']['per_second'] >= 2000)}")
        acc = r["dense_accuracy"]["recall_at_10"]
        lines.append(f"- {r['size']:,}: dense arm recall@10 against exact {_pct(acc)} >= 0.95: "
                     f"{_met(acc is not None and acc >= 0.95)}")
        p = r.get("per_principal")
        if p:
            n = p["narrow"]
            lines.append(f"- {r['size']:,}: narrow principal ({p['visible_to_narrow']} visible) "
                         f"{n['hybrid_vs_bare_p50']:.2f}x the bare filtered statement (p50) <= 2x: "
                         f"{_met(n['hybrid_vs_bare_p50'] <= 2)}")
    if w:
        lines.append(f"- worker {w['ratio']:.0%} of raw model >= 90%: {_met(w['ratio'] >= 0.9)}")
        s = w["single_call_ingest"]
        for call in ("append_observation", "remember"):
            lat = s[call]
            lines.append(f"- {call} (autocommit) p50 {lat['p50_ms']:.2f} <= 3 ms: {_met(lat['p50_ms'] <= 3)}; "
                         f"p95 {lat['p95_ms']:.2f} <= 8 ms: {_met(lat['p95_ms'] <= 8)}")

    if report.get("shell"):
        from . import shell

        lines.append(shell.target(report["shell"]))
        lines += ["", "## pgrecall recall from the shell", "", *shell.section(report["shell"])]

    lines += ["", "## Cache", "", "Model embeddings read from or written to bench/cache/ (git-ignored):", ""]
    for r in sizes:
        for c in r.get("cache", []):
            lines.append(f"- {r['size']:,}: {c['file']}: " + ("reused" if c["reused"] else
                                                              f"embedded now in {c.get('seconds', 0):.0f} s"))
    return "\n".join(lines) + "\n"


def _num(x) -> str:
    return "-" if x is None else f"{x:.0f}"


def _load(values) -> str:
    return "?" if not values else "/".join(f"{v:.1f}" for v in values)
