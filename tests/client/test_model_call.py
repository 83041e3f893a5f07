"""`TaskSession.model_call` against a live server: gate before, usage after, even on error."""

from __future__ import annotations

import pytest
from loopwarden_client import TaskStopped

from agents.guard import terms
from agents.models import ModelCall


def test_the_call_is_gated_and_its_usage_reported_on_exit(lw):
    session = lw.session(lw.create_task("plan")["id"])
    with session.model_call(model="m", est_prompt_tokens=200, max_output_tokens=50) as call:
        assert call.round == 1
        call.usage(180, 40, tool_calls=[{"name": "search", "args": {"q": "x"}}])
    assert call.answer == {"decision": terms.CONTINUE}
    assert session.last_model_call == call.model_call
    row = ModelCall.objects.get(pk=call.model_call)
    assert (row.prompt_tokens, row.completion_tokens) == (180, 40)
    assert row.tool_calls == [{"name": "search", "args": {"q": "x"}}]
    session.tool("search", {"q": "x"}, lambda args: {"hits": []})
    assert session.get()["usage"]["tokens"] == 220
    assert lw.trace(session.task_id)["calls"][1]["model_call"] == call.model_call


def test_usage_is_reported_even_when_the_body_fails(lw):
    session = lw.session(lw.create_task("parse")["id"])
    with pytest.raises(ValueError, match="unparsable"), session.model_call(model="m") as call:
        call.usage(10, 2)
        raise ValueError("unparsable model output")
    row = ModelCall.objects.get(pk=call.model_call)
    assert (row.prompt_tokens, row.completion_tokens) == (10, 2)
    assert row.settled_at is not None


def test_a_call_left_without_usage_keeps_its_reservation_and_warns(lw):
    session = lw.session(lw.create_task("forgetful")["id"])
    with (
        pytest.warns(UserWarning, match="left without usage") as warned,
        session.model_call() as call,
    ):
        pass
    assert ModelCall.objects.get(pk=call.model_call).settled_at is None
    # The warning points at the caller's `with`, not at the client's internals.
    assert {w.filename for w in warned if "left without usage" in str(w.message)} == {__file__}


def test_a_spent_budget_raises_before_the_paid_call(lw):
    session = lw.session(lw.create_task("one call", limits={"max_model_calls": 1})["id"])
    with session.model_call() as call:
        call.usage(1, 1)
    with pytest.raises(TaskStopped) as caught, session.model_call():
        pytest.fail("the body of a stopped call must not run")
    assert (caught.value.state, caught.value.reason) == (terms.PARTIAL, "model_budget")
    assert caught.value.report["remaining"]["model_calls"] == 0


def test_the_same_plan_three_times_stops_at_the_third_usage_report(lw):
    session = lw.session(lw.create_task("stuck planner")["id"])
    plan = [{"name": "search", "args": {"q": "refund policy"}}]
    for _ in range(2):
        with session.model_call() as call:
            call.usage(10, 5, tool_calls=plan)
    with pytest.raises(TaskStopped) as caught, session.model_call() as call:
        call.usage(10, 5, tool_calls=plan)
    assert (caught.value.state, caught.value.reason) == (terms.PARTIAL, "repeated_output")
    assert ModelCall.objects.get(pk=call.model_call).prompt_tokens == 10  # recorded anyway
