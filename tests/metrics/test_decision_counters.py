"""Every decision moves loopwarden_decisions_total by one, under its kind, decision and
reason; a decision that stops a task also moves loopwarden_stops_total; a decision served
in a request is timed in loopwarden_decision_seconds."""

from __future__ import annotations

import logging

import pytest

from tests.api.helpers import evidence, execute, finish, gate, new_task, request_tool, settle

pytestmark = pytest.mark.django_db

DECISIONS = "loopwarden_decisions_total"
STOPS = "loopwarden_stops_total"
TRIPS = "loopwarden_trips_total"


def moved(before, after, name: str, **labels: str) -> float:
    return after.value(name, **labels) - before.value(name, **labels)


def test_each_kind_of_request_counts_its_decision(agent_api, scrape):
    task = new_task(agent_api)["id"]
    before = scrape()

    call = gate(agent_api, task)["model_call"]
    settle(agent_api, task, call)
    execute(agent_api, task, "search", {"q": "invoice 42"},
            result={"kind": "SUCCESS", "evidence": evidence(1)})  # fmt: skip
    finish(agent_api, task, evidence=evidence(1, done=True))

    after = scrape()
    assert moved(before, after, DECISIONS, kind="model_call", decision="ALLOW", reason="") == 1
    assert moved(before, after, DECISIONS, kind="usage", decision="CONTINUE", reason="") == 1
    assert moved(before, after, DECISIONS, kind="tool_call", decision="EXECUTE", reason="") == 1
    assert moved(before, after, DECISIONS, kind="tool_result", decision="CONTINUE", reason="") == 1
    assert moved(before, after, DECISIONS, kind="finish", decision="STOP", reason="goal_met") == 1
    assert after.total(DECISIONS) - before.total(DECISIONS) == 5
    # Completing is a stop without a code; the burst-of-trips alert leaves it out.
    assert moved(before, after, STOPS, reason="goal_met", code="") == 1
    assert after.total(STOPS) - before.total(STOPS) == 1


def test_a_trip_counts_its_block_then_its_stop_by_reason_and_code(agent_api, scrape):
    task = new_task(agent_api)["id"]
    execute(agent_api, task, "search", {"q": "invoice 42"})
    execute(agent_api, task, "search", {"q": "invoice 42"})
    before = scrape()

    assert request_tool(agent_api, task, "search", {"q": "invoice 42"})["decision"] == "BLOCK"
    assert request_tool(agent_api, task, "search", {"q": "invoice 42"})["decision"] == "STOP"

    after = scrape()
    assert moved(before, after, DECISIONS, kind="tool_call", decision="BLOCK",
                 reason="same_call") == 1  # fmt: skip
    assert moved(before, after, DECISIONS, kind="tool_call", decision="STOP",
                 reason="same_call") == 1  # fmt: skip
    assert moved(before, after, STOPS, reason="same_call", code="GUARD_LOOP_DETECTED") == 1
    assert after.total(STOPS) - before.total(STOPS) == 1


def test_the_stored_stop_answered_again_is_a_decision_but_not_a_new_stop(agent_api, scrape):
    task = new_task(agent_api)["id"]
    assert agent_api.post(f"tasks/{task}/stop", {}).status_code == 200
    before = scrape()

    assert agent_api.post(f"tasks/{task}/model-calls", {}).body["decision"] == "STOP"
    assert agent_api.post(f"tasks/{task}/stop", {}).status_code == 200

    after = scrape()
    assert moved(before, after, DECISIONS, kind="model_call", decision="STOP",
                 reason="agent_stop") == 1  # fmt: skip
    assert moved(before, after, DECISIONS, kind="stop", decision="STOP", reason="agent_stop") == 1
    assert after.total(STOPS) == before.total(STOPS)


def test_an_operator_stop_counts_under_its_own_reason(agent_api, operator_api, scrape):
    task = new_task(agent_api)["id"]
    before = scrape()

    assert operator_api.post(f"tasks/{task}/stop", {"reason": "runaway"}).status_code == 200

    after = scrape()
    assert moved(before, after, STOPS, reason="operator_stop", code="GUARD_STOPPED") == 1


def test_decisions_are_counted_when_the_decision_log_is_off(agent_api, scrape):
    decisions_log = logging.getLogger("loopwarden.decisions")
    level = decisions_log.level
    decisions_log.setLevel(logging.WARNING)
    try:
        task = new_task(agent_api)["id"]
        before = scrape()
        gate(agent_api, task)
        after = scrape()
    finally:
        decisions_log.setLevel(level)

    assert moved(before, after, DECISIONS, kind="model_call", decision="ALLOW", reason="") == 1


def test_a_decision_served_in_a_request_is_timed_under_its_kind(agent_api, scrape):
    task = new_task(agent_api)["id"]
    before = scrape()

    gate(agent_api, task)
    gate(agent_api, task)

    after = scrape()
    seconds = "loopwarden_decision_seconds"
    assert moved(before, after, f"{seconds}_count", kind="model_call") == 2
    assert moved(before, after, f"{seconds}_sum", kind="model_call") > 0
    assert moved(before, after, f"{seconds}_bucket", kind="model_call", le="+Inf") == 2
    assert moved(before, after, f"{seconds}_count", kind="tool_call") == 0


def test_only_the_guards_stops_count_as_trips(agent_api, operator_api, scrape):
    unverified, stopped, looping = (new_task(agent_api)["id"] for _ in range(3))
    execute(agent_api, looping, "search", {"q": "invoice 42"})
    execute(agent_api, looping, "search", {"q": "invoice 42"})
    before = scrape()

    finish(agent_api, unverified)  # goal_unverified: no code, not a trip
    operator_api.post(f"tasks/{stopped}/stop", {"reason": "enough"})  # GUARD_STOPPED
    request_tool(agent_api, looping, "search", {"q": "invoice 42"})  # BLOCK
    request_tool(agent_api, looping, "search", {"q": "invoice 42"})  # STOP same_call

    after = scrape()
    assert moved(before, after, STOPS, reason="goal_unverified", code="") == 1
    assert moved(before, after, STOPS, reason="operator_stop", code="GUARD_STOPPED") == 1
    assert moved(before, after, TRIPS, code="GUARD_LOOP_DETECTED") == 1
    assert after.total(TRIPS) - before.total(TRIPS) == 1
    assert after.value("loopwarden_trips_today", code="GUARD_LOOP_DETECTED") == 1
    assert after.value("loopwarden_trips_today", code="GUARD_BAD_INPUT") == 0
