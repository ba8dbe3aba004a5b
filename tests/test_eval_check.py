"""The adoption rule of issue #30 as eval/locomo.py checks it, on small handmade runs (no server, no model)."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path

_spec = importlib.util.spec_from_file_location("locomo_eval", Path(__file__).resolve().parent.parent / "eval" / "locomo.py")
locomo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(locomo)


def _cell(r5, r10, ndcg, n=10):
    return {"n": n, "recall@5": r5, "recall@10": r10, "ndcg@10": ndcg}


def _report():
    run = {"overall": _cell(0.6, 0.7, 0.5, 30),
           "by_conversation": {"conv-a": _cell(0.6, 0.7, 0.5), "conv-b": _cell(0.5, 0.6, 0.4)},
           "by_category": {"single-hop": _cell(0.7, 0.8, 0.6), "multi-hop": _cell(0.3, 0.4, 0.2)}}
    return {"main": {"settings": {"embedding_input_version": 2},
                     "runs": {"hybrid/v2": run, "lexical/v2": copy.deepcopy(run)}}}


def _verdicts(before, after):
    cells = locomo.cell_check(before["main"]["runs"]["hybrid/v2"], after["main"]["runs"]["hybrid/v2"])
    return {c["cell"]: c["passed"] for c in cells}


def test_an_unchanged_run_passes_every_cell():
    assert _verdicts(_report(), _report()) == {"conv-a": True, "conv-b": True, "single-hop": True, "multi-hop": True}


def test_one_cell_dropping_one_metric_fails_that_cell_alone_even_when_the_overall_figure_rises():
    after = _report()
    run = after["main"]["runs"]["hybrid/v2"]
    run["overall"] = _cell(0.7, 0.8, 0.6, 30)
    run["by_conversation"]["conv-a"] = _cell(0.9, 0.9, 0.9)
    run["by_category"]["multi-hop"]["recall@10"] = 0.3999  # one stored unit lower
    assert _verdicts(_report(), after) == {"conv-a": True, "conv-b": True, "single-hop": True, "multi-hop": False}
    lines, ok = locomo.check_lines(_report(), after, "base", "cand")
    assert not ok
    assert "| multi-hop | +0.0000 | -0.0001 | +0.0000 | FAIL |" in lines
    assert lines[-1] == "do not adopt: FAIL in multi-hop"


def test_a_conversation_missing_from_the_candidate_fails():
    after = _report()
    del after["main"]["runs"]["hybrid/v2"]["by_conversation"]["conv-b"]
    assert _verdicts(_report(), after)["conv-b"] is False


def test_only_the_hybrid_run_at_the_tenants_input_version_is_checked():
    after = _report()
    after["main"]["runs"]["lexical/v2"]["by_category"]["single-hop"] = _cell(0.0, 0.0, 0.0)
    lines, ok = locomo.check_lines(_report(), after, "base", "cand")
    assert ok and lines[0].endswith("hybrid/v2") and lines[-1] == "adopt: every cell PASSES"


def test_compare_prints_the_rule_and_the_verdicts(tmp_path):
    before, after = _report(), _report()
    after["main"]["runs"]["hybrid/v2"]["by_conversation"]["conv-b"]["ndcg@10"] = 0.35
    (tmp_path / "a.json").write_text(json.dumps(before))
    (tmp_path / "b.json").write_text(json.dumps(after))
    text = locomo.compare(tmp_path / "a.json", tmp_path / "b.json")
    assert locomo.RULE in text
    assert "| conv-b | +0.0000 | +0.0000 | -0.0500 | FAIL |" in text
    assert "| conv-a | +0.0000 | +0.0000 | +0.0000 | PASS |" in text


def test_a_steps_line_in_make_eval_is_checked_against_the_default_hybrid_run():
    report = _report()
    step = copy.deepcopy(report["main"]["runs"]["hybrid/v2"])
    step["by_conversation"]["conv-b"]["recall@5"] = 0.4
    step["setting"] = {"recall_people_arm": True}
    report["main"]["steps"] = {"hybrid+people/v2": step}
    lines = locomo.step_check_lines(report)
    assert any(line.startswith("  conv-b ") and line.endswith("FAIL") for line in lines)
    assert any(line.startswith("  conv-a ") and line.endswith("PASS") for line in lines)
    assert lines[-1] == "  do not adopt: FAIL in conv-b"


def test_categories_of_your_own_are_scored_and_checked_like_locomos():
    # docs/operations.md: eval/locomo.py reads any conversations in its data's shape; a category_name
    # outside LoCoMo's five is a category too, scored after them, and the check covers it
    rows = [{"category": c, "conversation": "chat1", **{m: v for m in locomo.METRICS}}
            for c, v in (("billing", 1.0), ("multi-hop", 0.5), ("billing", 0.0), ("account", 1.0))]
    got = locomo.aggregate(rows)
    assert list(got["by_category"]) == ["multi-hop", "account", "billing"]
    assert got["by_category"]["billing"]["recall@5"] == 0.5
    assert list(got["by_conversation_category"]) == ["chat1/multi-hop", "chat1/account", "chat1/billing"]
    worse = copy.deepcopy(got)
    worse["by_category"]["billing"]["recall@5"] = 0.25
    assert {c["cell"]: c["passed"] for c in locomo.cell_check(got, worse)} == {
        "chat1": True, "multi-hop": True, "account": True, "billing": False}


def test_a_turns_time_keeps_the_zone_it_names_and_is_utc_without_one():
    from datetime import UTC, datetime

    assert locomo.turn_time({"session_datetime_iso": "2023-05-08T13:56:00"}) == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert locomo.turn_time({"session_datetime_iso": "2023-05-08T13:56:00+02:00"}) == datetime(
        2023, 5, 8, 11, 56, tzinfo=UTC)
