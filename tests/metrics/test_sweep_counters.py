"""Each run of a Celery sweep job counts itself and the rows it changed; the decisions a sweep
takes count under the sweep's kind, untimed (no request waited for them)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from agents import jobs
from agents.models import AgentDay, ModelCall, ModelPrice, Task
from ledger.models import Operation
from tests.api.helpers import gate, new_task, send_notice

pytestmark = pytest.mark.django_db

RUNS, ROWS = "loopwarden_sweep_runs_total", "loopwarden_sweep_rows_total"
DECISIONS, STOPS = "loopwarden_decisions_total", "loopwarden_stops_total"


def moved(before, after, name: str, **labels: str) -> float:
    return after.value(name, **labels) - before.value(name, **labels)


def an_hour_ago():
    return timezone.now() - timedelta(hours=1)


def test_the_lease_sweep_counts_its_run_the_operation_it_claimed_and_the_task_it_stopped(
    agent_api, scrape
):
    task = new_task(agent_api)["id"]
    assert send_notice(agent_api, task)["decision"] == "EXECUTE"
    Operation.objects.update(lease_expires_at=an_hour_ago())
    before = scrape()

    assert jobs.sweep_leases() == {"claimed": 1, "stopped": 1}
    assert jobs.sweep_leases() == {"claimed": 0, "stopped": 0}

    after = scrape()
    assert moved(before, after, RUNS, sweep="lease") == 2
    assert moved(before, after, ROWS, sweep="lease", result="claimed") == 1
    assert moved(before, after, ROWS, sweep="lease", result="stopped") == 1
    assert moved(before, after, DECISIONS, kind="lease_sweep", decision="STOP",
                 reason="unknown_commit") == 1  # fmt: skip
    assert moved(before, after, STOPS, reason="unknown_commit", code="GUARD_LEDGER") == 1
    assert moved(before, after, "loopwarden_decision_seconds_count", kind="lease_sweep") == 0


def test_the_deadline_sweep_counts_the_tasks_it_stopped(agent_api, scrape):
    first, second = new_task(agent_api)["id"], new_task(agent_api)["id"]
    Task.objects.filter(pk__in=[first, second]).update(deadline_at=an_hour_ago())
    before = scrape()

    assert jobs.sweep_deadlines() == {"claimed": 2, "stopped": 2}

    after = scrape()
    assert moved(before, after, RUNS, sweep="deadline") == 1
    assert moved(before, after, ROWS, sweep="deadline", result="claimed") == 2
    assert moved(before, after, ROWS, sweep="deadline", result="stopped") == 2
    assert moved(before, after, DECISIONS, kind="deadline_sweep", decision="STOP",
                 reason="deadline") == 2  # fmt: skip
    assert moved(before, after, STOPS, reason="deadline", code="GUARD_TIME_LIMIT") == 2


def test_the_reservation_sweep_counts_the_calls_it_charged(agent_api, scrape, settings):
    ModelPrice.objects.create(
        model="*", input_per_million=Decimal("1000"), output_per_million=Decimal("2000")
    )
    task = new_task(agent_api)["id"]
    gate(agent_api, task, model="m", est_prompt_tokens=100, max_output_tokens=100)
    gate(agent_api, task, model="m", est_prompt_tokens=100, max_output_tokens=100)
    # The calls are made a day old, so the test reads the same at any hour. Moving only
    # `created_at` back across midnight (as a fixed few seconds did in a run at 00:0x UTC) left
    # the reservation on a day the sweep then settles nothing on: the day's money moves with the
    # calls, as it sits on the day of the call.
    made = timezone.now() - timedelta(days=1, seconds=settings.RESERVATION_TIMEOUT_SECONDS)
    ModelCall.objects.update(created_at=made)
    AgentDay.objects.update(day=made.date())
    before = scrape()

    assert jobs.sweep_reservations() == {"claimed": 2, "stopped": 0}
    day = AgentDay.objects.get()
    assert (day.day, day.reserved, day.spent) == (made.date(), 0, Decimal("0.6"))

    after = scrape()
    assert moved(before, after, RUNS, sweep="reservation") == 1
    assert moved(before, after, ROWS, sweep="reservation", result="claimed") == 2
    assert moved(before, after, ROWS, sweep="reservation", result="stopped") == 0
