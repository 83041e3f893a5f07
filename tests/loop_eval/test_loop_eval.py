"""loop_eval: the shipped labelled traces, the recommended threshold, the command's output."""

from __future__ import annotations

import io

from django.core.management import call_command

from agents import loop_eval

FAST_KINDS = ("rephrase", "nudge")


def test_the_shipped_set_holds_each_kind_of_loop_and_of_legitimate_work():
    kinds = {(t.label, t.kind) for t in loop_eval.load_traces()}
    for kind in ("rephrase", "nudge", "ab_drift"):
        assert ("loop", kind) in kinds
    for kind in ("pagination", "changing_search", "polling", "retry"):
        assert ("legit", kind) in kinds


def test_without_a_threshold_the_exact_rules_stop_no_drifting_loop():
    exact = loop_eval.evaluate(loop_eval.load_traces(), thresholds=())[0]
    assert exact.detector == "exact" and exact.tp == 0 and exact.fp == 0


def test_the_recommended_lexical_threshold_stops_every_rephrase_and_nudge_by_the_fourth_call():
    best = loop_eval.recommend(loop_eval.evaluate(loop_eval.load_traces()))
    assert best is not None and best.detector == "lexical"
    for replay in best.replays:
        if replay.trace.label == "loop" and replay.trace.kind in FAST_KINDS:
            assert replay.stopped and replay.stop_step <= 4, replay.trace.name
        if replay.trace.label == "legit":
            assert not replay.stopped and not replay.blocks, replay.trace.name


def test_the_command_prints_the_table_and_the_threshold_and_writes_the_chart(tmp_path):
    out = io.StringIO()
    chart = tmp_path / "pr.svg"

    call_command("loop_eval", "--chart", str(chart), stdout=out)

    text = out.getvalue()
    assert "detector  threshold precision  recall" in text
    assert "recommended near_duplicate_threshold (lexical): " in text
    assert chart.read_text().startswith("<svg") and "recommended" in chart.read_text()
