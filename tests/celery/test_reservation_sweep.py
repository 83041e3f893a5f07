"""The reservation sweep: a model call whose usage never came is charged as reserved."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from agents.guard import terms
from agents.models import AgentDay, ModelCall
from agents.services import runner, sweeps
from tests.celery.helpers import db_snapshot

TIMEOUT = 600


@pytest.fixture
def gate(agent_row, price):
    """An allowed model call reserving 0.3 (100 prompt + 100 output tokens)."""

    def ask(task):
        _task, call, outcome = runner.model_call_gate(
            task_id=task.pk, agent=agent_row, model="m", est_prompt_tokens=100,
            max_output_tokens=100,
        )  # fmt: skip
        assert outcome.decision == terms.ALLOW
        return call

    return ask


def after_timeout():
    return timezone.now() + timedelta(seconds=TIMEOUT + 1)


def day_of(agent_row):
    return AgentDay.objects.get(agent=agent_row, day=timezone.now().date())


def test_an_unsettled_reservation_is_charged_as_reserved(make_task, gate, agent_row):
    task = make_task()
    call = gate(task)
    assert (task.__class__.objects.get(pk=task.pk).cost_reserved, call.reserved_cost) == (
        Decimal("0.3"), Decimal("0.3"),
    )  # fmt: skip

    result = sweeps.sweep_reservations(now=after_timeout(), timeout_seconds=TIMEOUT)

    assert result.claimed == [call.pk]
    task.refresh_from_db()
    call.refresh_from_db()
    assert call.expired and call.settled_at is None
    assert (task.cost_reserved, task.cost_spent) == (Decimal(0), Decimal("0.3"))
    day = day_of(agent_row)
    assert (day.reserved, day.spent) == (Decimal(0), Decimal("0.3"))
    assert task.events.filter(kind="reservation_expired").count() == 1


def test_a_recent_reservation_is_left_alone(make_task, gate):
    call = gate(make_task())

    assert sweeps.sweep_reservations(now=timezone.now(), timeout_seconds=TIMEOUT).claimed == []
    call.refresh_from_db()
    assert not call.expired


def test_a_settled_call_is_left_alone(make_task, gate, agent_row):
    task = make_task()
    call = gate(task)
    runner.model_call_usage(
        task_id=task.pk, agent=agent_row, model_call_id=call.pk, prompt_tokens=10,
        completion_tokens=10,
    )  # fmt: skip

    assert sweeps.sweep_reservations(now=after_timeout(), timeout_seconds=TIMEOUT).claimed == []


def test_running_it_twice_changes_nothing_the_second_time(make_task, gate):
    task = make_task()
    gate(task)
    gate(task)
    moment = after_timeout()
    assert len(sweeps.sweep_reservations(now=moment, timeout_seconds=TIMEOUT).claimed) == 2
    before = db_snapshot()

    assert sweeps.sweep_reservations(now=moment, timeout_seconds=TIMEOUT).claimed == []
    assert db_snapshot() == before


def test_a_late_usage_report_is_not_charged_twice(make_task, gate, agent_row):
    task = make_task()
    call = gate(task)
    sweeps.sweep_reservations(now=after_timeout(), timeout_seconds=TIMEOUT)

    # 200 + 200 tokens cost 0.6: only the 0.3 above the charged reservation is added.
    runner.model_call_usage(
        task_id=task.pk, agent=agent_row, model_call_id=call.pk, prompt_tokens=200,
        completion_tokens=200,
    )  # fmt: skip

    task.refresh_from_db()
    assert (task.cost_reserved, task.cost_spent) == (Decimal(0), Decimal("0.6"))
    day = day_of(agent_row)
    assert (day.reserved, day.spent) == (Decimal(0), Decimal("0.6"))


def test_the_timeout_comes_from_settings(make_task, gate, settings):
    settings.RESERVATION_TIMEOUT_SECONDS = 5
    gate(make_task())

    assert len(sweeps.sweep_reservations(now=timezone.now() + timedelta(seconds=6)).claimed) == 1
    assert ModelCall.objects.filter(expired=True).count() == 1
