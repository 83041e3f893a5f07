"""loop_eval: the labelled set and its split, each provider's threshold, the command's output."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from agents import loop_eval, semantic
from agents.guard.fingerprint import canonical_json
from agents.loop_eval import make_set

TUNING = loop_eval.load_traces(loop_eval.TUNING_DIR)
HELDOUT = loop_eval.load_traces(loop_eval.HELDOUT_DIR)


def test_the_set_holds_150_traces_of_each_kind_split_in_two_fixed_parts():
    assert len(TUNING) + len(HELDOUT) >= 150
    for part in (TUNING, HELDOUT):
        kinds = {(t.label, t.kind) for t in part}
        for kind in ("rephrase", "renamed", "nudge", "typos", "ab_drift"):
            assert ("loop", kind) in kinds
        for kind in ("pagination", "per_item", "changing_search", "polling", "retry"):
            assert ("legit", kind) in kinds
    names = [t.name for t in TUNING + HELDOUT]
    assert len(names) == len(set(names))


def test_no_held_out_trace_shares_a_call_with_a_tuning_trace():
    def calls(traces):
        return {(c["tool"], canonical_json(c.get("args") or {})) for t in traces for c in t.calls}

    # Polls of a job and a retried fetch repeat by design; their jobs and items still differ.
    assert not calls(TUNING) & calls(HELDOUT)


def test_the_generated_part_is_the_one_make_set_writes():
    for part, traces in make_set.split().items():
        shipped = json.loads((loop_eval.TRACES_DIR / part / "generated.json").read_text())
        assert shipped == traces


def test_without_a_threshold_the_exact_rules_stop_no_rephrasing_and_no_legitimate_work():
    exact = loop_eval.evaluate(TUNING + HELDOUT, thresholds=())[0]
    assert exact.detector == "exact" and exact.fp == 0
    assert not any(r.stopped for r in exact.replays if r.trace.kind == "rephrase")


def test_the_recommended_lexical_threshold_stops_no_legitimate_tuning_trace():
    best = loop_eval.recommend(loop_eval.evaluate(TUNING, provider_names=("lexical",)))
    assert best is not None and best.detector == "lexical"
    for replay in best.replays:
        if replay.trace.label == "legit":
            assert not replay.stopped and not replay.blocks, replay.trace.name
    assert best.tp > 0


needs_extra = pytest.mark.skipif(not semantic.available(), reason="needs loopwarden[semantic]")


@needs_extra
def test_on_held_out_the_meaning_provider_catches_more_loops_at_equal_or_better_precision():
    tuned, judged = loop_eval.evaluate(TUNING), loop_eval.evaluate(HELDOUT)
    rows = {}
    for provider in ("lexical", "semantic"):
        chosen = loop_eval.recommend(tuned, provider)
        assert chosen is not None, provider
        rows[provider] = loop_eval.row_at(judged, provider, chosen.threshold)
    assert rows["semantic"].tp > rows["lexical"].tp
    assert rows["semantic"].precision >= rows["lexical"].precision
    assert loop_eval.best_provider(list(rows.values())) is rows["semantic"]


@needs_extra
def test_the_meaning_provider_catches_rephrasings_that_share_no_word():
    chosen = loop_eval.recommend(loop_eval.evaluate(TUNING), "semantic")
    assert chosen is not None
    rephrased = [t for t in HELDOUT if t.kind == "rephrase"]
    lexical = loop_eval.score("lexical", chosen.threshold, rephrased)
    meaning = loop_eval.score(
        "semantic", chosen.threshold, rephrased,
        {t.name: loop_eval.trace_vectors(t) for t in rephrased},
    )  # fmt: skip
    assert meaning.tp > lexical.tp


def test_the_command_prints_the_held_out_table_and_each_providers_threshold(tmp_path):
    out = io.StringIO()
    chart = tmp_path / "pr.svg"

    call_command("loop_eval", "--chart", str(chart), stdout=out)

    text = out.getvalue()
    assert f"tuning {len(TUNING)} (" in text and f"held-out {len(HELDOUT)} (" in text
    assert "held-out part" in text
    assert "detector  threshold precision  recall" in text
    for provider in loop_eval.providers():
        assert f"recommended near_duplicate_threshold ({provider}): " in text
        assert f"\n{provider:<9}      0.50 " in text
    assert "recommended provider: " in text
    assert chart.read_text().startswith("<svg") and "recommended" in chart.read_text()


def test_the_command_replays_a_folder_of_ones_own_as_one_set(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    loops = [t for t in TUNING if t.name == "refund-policy-rephrased"]
    (folder / "a.json").write_text(json.dumps([vars(t) for t in loops]))
    out = io.StringIO()

    call_command("loop_eval", "--traces", str(folder), "--chart", str(tmp_path / "c.svg"),
                 stdout=out)  # fmt: skip

    assert f"1 traces from {folder}: 1 (1 loops, 0 legitimate)" in out.getvalue()


@pytest.mark.parametrize(
    "content",
    ["{not json", '[{"name": "x"}]', '[{"name": "x", "label": "Loop", "calls": []}]'],
    ids=["not_json", "no_label", "unknown_label"],
)
def test_a_trace_file_it_cannot_use_is_named_in_one_line(tmp_path, content):
    (tmp_path / "good.json").write_text('[{"name": "a", "label": "loop", "calls": []}]')
    (tmp_path / "mine.json").write_text(content)

    with pytest.raises(CommandError, match="mine.json"):
        call_command("loop_eval", "--traces", str(tmp_path), stdout=io.StringIO())
