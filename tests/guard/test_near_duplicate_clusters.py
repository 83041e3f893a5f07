"""Step 10 counts clusters, not pairs; cursors, pages, ids and versions are real differences."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.guard.fingerprint import canonical_json
from agents.guard.similarity import VectorSimilarity, lexical, positions_differ
from agents.guard.terms import (
    BLOCK,
    CONTINUE,
    EXECUTE,
    PARTIAL,
    STOP,
    SUCCESS,
    ToolResult,
    WindowEntry,
)
from agents.guard.tool import report_result, request_tool

from .factories import NOW, agent, call_of, ev, make_task, read, write


def ask(task, req):
    return request_tool(task, req, None, agent(), NOW)


def run(task, req, data=None):
    """Ask; when EXECUTE'd, report a result without progress, as a loop would."""
    out = ask(task, req)
    if out.decision == EXECUTE:
        report_result(task, call_of(req), ToolResult(kind=SUCCESS, data=data), NOW)
    return out


def test_a_call_that_drifts_every_round_is_caught_by_its_cluster():
    # No fingerprint repeats, so the old pair rule (most similar single fingerprint must
    # occur max_same_call times) never fired here.
    task = make_task(near_duplicate_threshold=0.6, max_stagnant=10)
    queries = ["refund policy", "policy for refunds", "refunds policy", "the refund policy"]
    decisions = [run(task, read(q=q)).decision for q in queries]
    assert decisions == [EXECUTE, EXECUTE, BLOCK, STOP]
    assert (task.state, task.reason) == (PARTIAL, "near_duplicate")


def test_the_nudge_names_the_similar_call_and_what_it_returned():
    task = make_task(near_duplicate_threshold=0.6, max_stagnant=10)
    run(task, read(q="refund policy"), data={"hits": ["refunds within 30 days"]})
    run(task, read(q="policy for refunds"), data={"hits": ["refunds within 30 days"]})
    out = ask(task, read(q="refunds policy"))
    message = out.observation["message"]
    assert out.decision == BLOCK
    assert "policy for refunds" in message
    assert "refunds within 30 days" in message


@pytest.mark.parametrize(
    "field, values",
    [
        ("page", [1, 2, 3, 4]),
        ("cursor", ["c1", "c2", "c3", "c4"]),
        ("offset", [0, 50, 100, 150]),
        ("invoice_id", ["in_1", "in_2", "in_3", "in_4"]),
        ("version", [1, 2, 3, 4]),
        ("pageToken", ["a", "b", "c", "d"]),
    ],
)
def test_pagination_and_walking_records_are_never_near_duplicates(field, values):
    task = make_task(near_duplicate_threshold=0.1, max_stagnant=10)
    for value in values:
        assert run(task, read(q="overdue invoices", **{field: value})).decision == EXECUTE


def test_a_nested_cursor_is_a_real_difference_too():
    a = canonical_json({"q": "x", "paging": {"after": "abc"}})
    b = canonical_json({"q": "x", "paging": {"after": "abd"}})
    assert positions_differ(a, b)
    assert lexical(a, b) == 0.0


def test_lexical_scores_rephrasings_high_and_different_searches_low():
    def score(a, b):
        return lexical(canonical_json({"q": a}), canonical_json({"q": b}))

    assert score("refund policy", "policy for refunds") >= 0.9
    assert score("overdue invoices for ACME corp", "overdue invoices for ACME corp.") == 1.0
    assert score("shipping rates to canada", "warranty for laptops") < 0.2
    assert 0.0 <= score("weather in paris", "weather in london") < 0.6


def test_lexical_is_symmetric_and_one_for_the_same_text():
    a, b = canonical_json({"q": "a b c", "limit": 10}), canonical_json({"q": "a b", "limit": 20})
    assert lexical(a, b) == lexical(b, a)
    assert lexical(a, a) == 1.0


def test_a_second_cluster_member_after_the_nudge_stops_even_if_closest_to_another_member():
    task = make_task(near_duplicate_threshold=0.6, max_stagnant=10)
    for q in ("refund policy", "policy for refunds"):
        run(task, read(q=q))
    assert ask(task, read(q="refunds policy")).decision == BLOCK
    assert ask(task, read(q="policy of refunds")).decision == STOP


def test_without_a_threshold_a_drifting_loop_is_not_a_near_duplicate():
    task = make_task(max_stagnant=10)
    for q in ["refund policy", "policy for refunds", "refunds policy", "the refund policy"]:
        assert run(task, read(q=q)).decision == EXECUTE


def test_the_window_entry_keeps_a_short_quote_of_the_result():
    task = make_task()
    run(task, read(q="x"), data={"text": "y" * 1000})
    entry = task.window[-1]
    assert entry.result.startswith('{"text":"yyy') and len(entry.result) <= 160
    assert WindowEntry.from_dict(entry.to_dict()) == entry


json_scalars = st.one_of(st.text(max_size=12), st.integers(), st.booleans(), st.none())
json_args = st.dictionaries(
    st.text(max_size=8), st.one_of(json_scalars, st.lists(json_scalars, max_size=3)), max_size=4
)


@settings(max_examples=200)
@given(a=json_args, b=json_args)
def test_lexical_is_a_symmetric_score_between_zero_and_one(a, b):
    ta, tb = canonical_json(a), canonical_json(b)
    assert 0.0 <= lexical(ta, tb) <= 1.0
    assert lexical(ta, tb) == lexical(tb, ta)


@settings(max_examples=200)
@given(args=json_args, field=st.sampled_from(["page", "cursor", "offset", "id", "user_id"]),
       first=json_scalars, second=json_scalars)  # fmt: skip
def test_a_differing_position_field_is_never_similar(args, field, first, second):
    if first == second or field in args:
        return
    a = canonical_json({**args, field: first})
    b = canonical_json({**args, field: second})
    if a != b:
        assert lexical(a, b) == 0.0


@pytest.mark.parametrize(
    "tool, field, values",
    [
        ("get_order", "order_number", [101, 102, 103, 104]),
        ("revenue", "year", [2021, 2022, 2023, 2024]),
    ],
)
def test_calls_whose_args_hold_no_words_are_not_alike_for_want_of_words(tool, field, values):
    # Numbers and flags are compared whole, as tokens: get_order(101) and get_order(102) share
    # none. Two empty trigram sets are no evidence of likeness; they used to score 1.0 and hand
    # every such pair 0.5, the documented recommended threshold.
    a, b = canonical_json({field: values[0]}), canonical_json({field: values[1]})
    assert lexical(a, b) == 0.0
    task = make_task(near_duplicate_threshold=0.5, max_stagnant=10)
    for value in values:
        assert run(task, read(tool=tool, **{field: value})).decision == EXECUTE


@pytest.mark.parametrize(
    "broken",
    [[float("nan")] * 3, [float("inf"), 0.0, 0.0], [1.0, 0.0]],
    ids=["nan", "inf", "short"],
)
def test_a_vector_that_cannot_be_compared_scores_lexically(broken):
    a, b = canonical_json({"q": "shipping rates"}), canonical_json({"q": "warranty for laptops"})
    score = VectorSimilarity({"fa": broken, "fb": [1.0, 0.0, 0.0]})
    assert score("fa", a, "fb", b) == lexical(a, b)


def test_a_reminder_per_invoice_is_not_a_near_duplicate_at_the_recommended_threshold():
    # One write per invoice, each under its own operation key and committed: the invoice is
    # the business identity, the template and channel are the same on purpose. Nothing the
    # verifier counts as progress moved (a reminder changes no revision).
    task = make_task(near_duplicate_threshold=0.5, max_stagnant=10)
    for n in (1001, 1002, 1003, 1004):
        req = write("send_reminder", key=f"remind-INV-{n}", invoice=f"INV-{n}",
                    template="overdue_v2", channel="email")  # fmt: skip
        out = ask(task, req)
        assert out.decision == EXECUTE, n
        committed = ToolResult(kind=SUCCESS, evidence=ev(0, committed=True))
        assert report_result(task, call_of(req), committed, NOW).decision == CONTINUE
