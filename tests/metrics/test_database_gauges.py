"""Gauges read from the database at each scrape: tasks by state, operations waiting for a
verdict, money spent and reserved today."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from unittest import mock

import pytest
from django.db import DatabaseError
from django.utils import timezone

from agents.metrics import DatabaseCollector
from agents.models import ModelPrice
from ledger.models import Operation
from tests.api.helpers import gate, new_task, report, send_notice, settle

pytestmark = pytest.mark.django_db


def test_tasks_are_counted_by_state_with_every_state_present(agent_api, operator_api, scrape):
    running = [new_task(agent_api)["id"] for _ in range(3)]
    operator_api.post(f"tasks/{running[0]}/stop", {"reason": "enough"})

    seen = scrape()

    assert seen.value("loopwarden_tasks", state="RUNNING") == 2
    assert seen.value("loopwarden_tasks", state="STOPPED") == 1
    for state in ("COMPLETED", "PARTIAL", "FAILED", "NEEDS_HUMAN"):
        assert ("loopwarden_tasks", frozenset({("state", state)})) in seen.samples
        assert seen.value("loopwarden_tasks", state=state) == 0
    assert seen.value("loopwarden_database_up") == 1


def test_unknown_operations_and_expired_claims_wait_for_a_verdict(agent_api, scrape):
    assert scrape().value("loopwarden_operations_waiting") == 0
    unknown = new_task(agent_api)["id"]
    asked = send_notice(agent_api, unknown)
    report(agent_api, unknown, asked["tool_call"], "NO_RESULT")  # the write's fate is UNKNOWN
    expired = new_task(agent_api)["id"]
    agent_api.post(f"tasks/{expired}/tool-calls", {"tool": "pay", "args": {}, "effect": "write",
                                                   "operation_key": "pay-1"})  # fmt: skip
    live = new_task(agent_api)["id"]
    agent_api.post(f"tasks/{live}/tool-calls", {"tool": "pay", "args": {}, "effect": "write",
                                                "operation_key": "pay-2"})  # fmt: skip
    Operation.objects.filter(operation_key="pay-1").update(
        lease_expires_at=timezone.now() - timedelta(seconds=1),
        claimed_at=timezone.now() - timedelta(minutes=10),
    )

    seen = scrape()

    assert seen.value("loopwarden_operations_waiting") == 2
    assert 600 <= seen.value("loopwarden_operations_waiting_oldest_seconds") < 700


def test_spend_today_shows_what_was_spent_and_what_is_still_reserved(agent_api, scrape):
    ModelPrice.objects.create(
        model="*", input_per_million=Decimal("1000"), output_per_million=Decimal("2000")
    )
    task = new_task(agent_api)["id"]
    settled = gate(agent_api, task, model="m", est_prompt_tokens=100, max_output_tokens=100)
    settle(agent_api, task, settled["model_call"], prompt_tokens=100, completion_tokens=100)
    gate(agent_api, task, model="m", est_prompt_tokens=100, max_output_tokens=50)

    seen = scrape()

    assert seen.value("loopwarden_spend_today", kind="spent") == pytest.approx(0.3)
    assert seen.value("loopwarden_spend_today", kind="reserved") == pytest.approx(0.2)


def test_a_database_that_does_not_answer_still_gives_a_scrape_that_says_so(scrape):
    with mock.patch.object(
        DatabaseCollector, "_from_database", side_effect=DatabaseError("connection refused")
    ):
        seen = scrape()

    assert seen.value("loopwarden_database_up") == 0
    assert "loopwarden_tasks" not in seen.names()
