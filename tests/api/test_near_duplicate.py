"""near_duplicate: args change a little every time (off unless a threshold is set)."""

from __future__ import annotations

import pytest

from agents.models import ToolPolicy

from .helpers import assert_stop_is_sticky, assert_stopped, execute, new_task, request_tool

pytestmark = pytest.mark.django_db


def loop_with_small_changes(api, task_id):
    execute(api, task_id, "search", {"q": "overdue invoices for ACME corp"})
    execute(api, task_id, "search", {"q": "overdue invoices for ACME corp"})
    return request_tool(api, task_id, "search", {"q": "overdue invoices for ACME corp."})


def test_it_blocks_then_stops_near_identical_calls_with_a_task_threshold(agent_api):
    task = new_task(agent_api, limits={"near_duplicate_threshold": 0.8})

    blocked = loop_with_small_changes(agent_api, task["id"])
    assert blocked["decision"] == "BLOCK"
    assert blocked["reason"] == "near_duplicate"
    assert blocked["observation"]["code"] == "DUPLICATE_TOOL_CALL_BLOCKED"

    answer = request_tool(
        agent_api, task["id"], "search", {"q": "overdue invoices for the ACME corp"}
    )

    stop_report = assert_stopped(answer, "PARTIAL", "near_duplicate", "GUARD_LOOP_DETECTED")
    assert stop_report["usage"]["tool_executions"] == 2
    assert stop_report["usage"]["tool_requests"] == 4
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_uses_the_threshold_of_the_tool_policy(agent_api):
    ToolPolicy.objects.create(tool="search", near_duplicate_threshold=0.8)
    task = new_task(agent_api)

    blocked = loop_with_small_changes(agent_api, task["id"])

    assert blocked["decision"] == "BLOCK"
    assert blocked["reason"] == "near_duplicate"


def test_it_executes_near_identical_calls_without_a_threshold(agent_api):
    task = new_task(agent_api)

    answer = loop_with_small_changes(agent_api, task["id"])

    assert answer["decision"] == "EXECUTE"


def queries_for_third_call(api, limits):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    task = new_task(api, limits=limits)
    execute(api, task["id"], "search", {"q": "refund policy"})
    execute(api, task["id"], "search", {"q": "policy for refunds"})
    with CaptureQueriesContext(connection) as captured:
        request_tool(api, task["id"], "search", {"q": "shipping rates"})
    return len(captured.captured_queries)


def test_the_near_duplicate_check_adds_no_sql_statement_to_the_decision(agent_api):
    ToolPolicy.objects.create(tool="search")  # the lexical provider, the default
    without = queries_for_third_call(agent_api, {})
    with_threshold = queries_for_third_call(agent_api, {"near_duplicate_threshold": 0.95})

    assert with_threshold == without
