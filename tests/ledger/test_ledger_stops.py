"""Ledger stops: missing_operation_key, operation_conflict and unknown_commit never run a write
blind."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from ledger.models import Operation
from tests.api.helpers import (
    NOTICE,
    NOTICE_KEY,
    assert_stop_is_sticky,
    assert_stopped,
    evidence,
    execute,
    new_task,
    report,
    request_tool,
    send_notice,
)

pytestmark = pytest.mark.django_db


def test_it_stops_a_write_without_an_operation_key(agent_api):
    task = new_task(agent_api)

    answer = request_tool(agent_api, task["id"], "send_email", NOTICE, "write")

    stop_report = assert_stopped(answer, "NEEDS_HUMAN", "missing_operation_key", "GUARD_LEDGER")
    assert stop_report["usage"]["tool_executions"] == 0
    assert stop_report["usage"]["tool_requests"] == 1
    assert not Operation.objects.exists()
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_stops_when_the_key_is_reused_for_other_input(agent_api):
    first = new_task(agent_api)
    execute(
        agent_api,
        first["id"],
        "send_email",
        NOTICE,
        "write",
        operation_key=NOTICE_KEY,
        result={"kind": "SUCCESS", "evidence": evidence(1, committed=True)},
    )
    task = new_task(agent_api)

    answer = request_tool(
        agent_api,
        task["id"],
        "send_email",
        {**NOTICE, "incident": 43},
        "write",
        operation_key=NOTICE_KEY,
    )

    stop_report = assert_stopped(answer, "NEEDS_HUMAN", "operation_conflict", "GUARD_LEDGER")
    assert stop_report["usage"]["tool_executions"] == 0
    operation = Operation.objects.get()
    assert operation.state == "COMMITTED"
    assert operation.args == NOTICE
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_marks_a_write_with_a_lost_response_unknown(agent_api):
    task = new_task(agent_api)
    asked = send_notice(agent_api, task["id"])

    answer = report(agent_api, task["id"], asked["tool_call"], "NO_RESULT", error="timeout")

    stop_report = assert_stopped(answer, "NEEDS_HUMAN", "unknown_commit", "GUARD_LEDGER")
    assert stop_report["operations"] == [{"key": NOTICE_KEY, "state": "UNKNOWN"}]
    assert stop_report["usage"]["tool_executions"] == 1
    assert NOTICE_KEY in stop_report["resume_condition"]
    assert Operation.objects.get().state == "UNKNOWN"
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_marks_a_write_whose_success_is_not_verified_unknown(agent_api):
    task = new_task(agent_api)
    asked = send_notice(agent_api, task["id"])

    answer = report(agent_api, task["id"], asked["tool_call"], "SUCCESS", data={"ok": True})

    assert_stopped(answer, "NEEDS_HUMAN", "unknown_commit", "GUARD_LEDGER")
    assert Operation.objects.get().state == "UNKNOWN"


def test_it_never_retries_an_unknown_write_from_another_task(agent_api):
    first = new_task(agent_api)
    asked = send_notice(agent_api, first["id"])
    report(agent_api, first["id"], asked["tool_call"], "NO_RESULT")
    task = new_task(agent_api)

    answer = send_notice(agent_api, task["id"])

    stop_report = assert_stopped(answer, "NEEDS_HUMAN", "unknown_commit", "GUARD_LEDGER")
    assert stop_report["usage"]["tool_executions"] == 0
    assert stop_report["operations"] == [{"key": NOTICE_KEY, "state": "UNKNOWN"}]
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_treats_an_expired_lease_as_unknown(agent_api):
    first = new_task(agent_api)
    send_notice(agent_api, first["id"])
    Operation.objects.update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    task = new_task(agent_api)

    answer = send_notice(agent_api, task["id"])

    assert_stopped(answer, "NEEDS_HUMAN", "unknown_commit", "GUARD_LEDGER")
    assert Operation.objects.get().state == "UNKNOWN"
    assert answer["report"]["usage"]["tool_executions"] == 0
    assert answer["report"]["operations"] == [{"key": NOTICE_KEY, "state": "UNKNOWN"}]
