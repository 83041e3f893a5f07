"""short_cycle: A -> B -> A -> B with no state change."""

from __future__ import annotations

import pytest

from agents.models import LimitProfile
from tests.conftest import allow_profiles

from .helpers import assert_stop_is_sticky, assert_stopped, execute, new_task, request_tool

pytestmark = pytest.mark.django_db

ORDER = ("get_order", {"id": 1})
CUSTOMER = ("get_customer", {"id": 7})
INVOICE = ("get_invoice", {"id": 3})


def test_it_stops_an_alternation_before_the_fourth_execution(agent_api, patient_profile):
    task = new_task(agent_api, profile="patient")
    execute(agent_api, task["id"], *ORDER)
    execute(agent_api, task["id"], *CUSTOMER)
    execute(agent_api, task["id"], *ORDER)

    answer = request_tool(agent_api, task["id"], *CUSTOMER)

    stop_report = assert_stopped(answer, "PARTIAL", "short_cycle", "GUARD_LOOP_DETECTED")
    assert stop_report["usage"]["tool_executions"] == 3
    assert stop_report["usage"]["tool_requests"] == 4
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_stops_a_cycle_of_period_three(agent_api, patient_profile):
    task = new_task(agent_api, profile="patient")
    for call in (ORDER, CUSTOMER, INVOICE, ORDER, CUSTOMER):
        execute(agent_api, task["id"], *call)

    answer = request_tool(agent_api, task["id"], *INVOICE)

    stop_report = assert_stopped(answer, "PARTIAL", "short_cycle", "GUARD_LOOP_DETECTED")
    assert stop_report["usage"]["tool_executions"] == 5


def test_it_ignores_cycles_longer_than_max_cycle_period(agent_api, db):
    LimitProfile.objects.create(name="short-sighted", max_stagnant=10, max_cycle_period=2)
    allow_profiles("agent-a", "short-sighted")
    task = new_task(agent_api, profile="short-sighted")
    for call in (ORDER, CUSTOMER, INVOICE, ORDER, CUSTOMER):
        execute(agent_api, task["id"], *call)

    answer = request_tool(agent_api, task["id"], *INVOICE)

    assert answer["decision"] == "EXECUTE"


def test_it_stops_an_alternation_whose_results_never_arrive_at_the_fourth_request(
    agent_api, patient_profile
):
    task = new_task(agent_api, profile="patient")
    for call in (ORDER, CUSTOMER, ORDER):
        assert request_tool(agent_api, task["id"], *call)["decision"] == "EXECUTE"

    answer = request_tool(agent_api, task["id"], *CUSTOMER)

    stop_report = assert_stopped(answer, "PARTIAL", "short_cycle", "GUARD_LOOP_DETECTED")
    assert stop_report["usage"]["tool_requests"] == 4
