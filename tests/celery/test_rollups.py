"""Daily rollups: usage and breaker trips per day, agent and task type, rebuilt idempotently."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from agents.guard import terms
from agents.jobs import rollup_daily
from agents.models import DailyRollup, LimitProfile, ModelCall
from agents.services import runner, sweeps
from agents.services.rollups import rollup_day


@pytest.fixture
def busy_day(make_task, start_write, past_lease, agent_row, price):
    """Two tasks of the default profile and one of 'reports': calls, writes and two stops."""
    reports = LimitProfile.objects.create(name="reports", lease_seconds=60)
    agent_row.allowed_profiles.add(reports)
    first, second = make_task(goal="First"), make_task(goal="Second")
    third = make_task(goal="Third", profile="reports")
    for task, tokens in ((first, 100), (first, 50), (third, 10)):
        _t, call, _o = runner.model_call_gate(task_id=task.pk, agent=agent_row, model="m")
        runner.model_call_usage(task_id=task.pk, agent=agent_row, model_call_id=call.pk,
                                prompt_tokens=tokens, completion_tokens=tokens)  # fmt: skip
    start_write(first, key="k1")
    start_write(third, key="k2")
    sweeps.sweep_leases(now=past_lease)  # first and third: NEEDS_HUMAN, GUARD_LEDGER
    sweeps.sweep_deadlines(now=second.deadline_at + timedelta(seconds=1))  # GUARD_TIME_LIMIT
    return first, second, third


def rows():
    return {
        (r.agent.name, r.profile): (r.model_calls, r.tool_executions, r.tokens, r.cost, r.trips)
        for r in DailyRollup.objects.select_related("agent")
    }


def test_a_day_is_summed_per_agent_and_task_type(busy_day):
    assert rollup_day(day=timezone.now().date()) == 2

    assert rows() == {
        # 150 + 100 prompt and completion tokens at 1000/2000 per million: 0.45 + 0.3
        ("agent-a", "default"): (2, 1, 300, Decimal("0.45"),
                                 {"GUARD_LEDGER": 1, "GUARD_TIME_LIMIT": 1}),
        ("agent-a", "reports"): (1, 1, 20, Decimal("0.03"), {"GUARD_LEDGER": 1}),
    }  # fmt: skip


def test_rebuilding_a_day_changes_nothing(busy_day):
    today = timezone.now().date()
    rollup_day(day=today)
    fields = ("pk", "model_calls", "tool_executions", "tokens", "cost", "trips")
    before = list(DailyRollup.objects.order_by("pk").values(*fields))

    rollup_day(day=today)

    assert list(DailyRollup.objects.order_by("pk").values(*fields)) == before


def test_activity_counts_on_the_day_it_happened(busy_day):
    yesterday = timezone.now() - timedelta(days=1)
    ModelCall.objects.update(created_at=yesterday)

    rollup_day(day=yesterday.date())
    rollup_day(day=timezone.now().date())

    by_day = {(r.day, r.profile): r.model_calls for r in DailyRollup.objects.all()}
    assert by_day[(yesterday.date(), "default")] == 2
    assert by_day[(timezone.now().date(), "default")] == 0


def test_a_reservation_charged_as_reserved_counts_as_spent(make_task, agent_row, price):
    task = make_task()
    runner.model_call_gate(task_id=task.pk, agent=agent_row, model="m", est_prompt_tokens=100,
                           max_output_tokens=100)  # fmt: skip
    sweeps.sweep_reservations(now=timezone.now() + timedelta(hours=1), timeout_seconds=60)

    rollup_day(day=timezone.now().date())

    assert DailyRollup.objects.get().cost == Decimal("0.3")


def test_a_day_without_activity_loses_its_old_rows(busy_day):
    today = timezone.now().date()
    rollup_day(day=today)
    for task in busy_day:
        task.operations.all().delete()
        task.delete()

    assert rollup_day(day=today) == 0
    assert not DailyRollup.objects.exists()


def test_the_job_rebuilds_today_and_yesterday(busy_day):
    assert rollup_daily.apply().get() == 2
    assert rollup_daily.apply(kwargs={"day": timezone.now().date().isoformat()}).get() == 2


def test_the_command_rebuilds_the_days_asked_for(busy_day):
    out = StringIO()
    today = timezone.now().date()

    call_command("rollup_daily", "--date", today.isoformat(), "--days", "2", stdout=out)

    assert out.getvalue().splitlines() == [
        f"{today - timedelta(days=1)}: 0 row(s)", f"{today}: 2 row(s)",
    ]  # fmt: skip
    assert DailyRollup.objects.count() == 2


@pytest.mark.django_db
def test_the_command_refuses_days_before_the_first_date_in_one_line():
    with pytest.raises(CommandError, match="--days"):
        call_command("rollup_daily", "--date", "0001-01-01", "--days", "2", stdout=StringIO())

    assert not DailyRollup.objects.exists()


def test_completing_is_not_a_trip(make_task, agent_row):
    task = make_task()
    runner.task_finish(task_id=task.pk, agent=agent_row, evidence={"revision": 1, "done": True})
    task.refresh_from_db()
    assert task.state == terms.COMPLETED

    rollup_day(day=timezone.now().date())

    assert not DailyRollup.objects.filter(trips__has_key="GUARD_BAD_INPUT").exists()
    assert all(not r.trips for r in DailyRollup.objects.all())


PARALLEL_COSTS = (
    "parallel_setup_cost",
    "parallel_tuple_cost",
    "min_parallel_table_scan_size",
    "min_parallel_index_scan_size",
)


@pytest.mark.postgres
@pytest.mark.usefixtures("on_postgres")
def test_a_days_rollup_plans_no_parallel_workers(busy_day):
    """A day's few thousand calls, found through the BRIN indexes, were planned with two
    workers on a year of history (their start cost more than the query): the rollup's reads
    run with parallel workers off. Parallel plans are made cheap here, so a read that would
    take workers does."""
    from django.db import connection

    from tests.api.plans import plans_of

    def parallel_nodes(plan: dict) -> list[str]:
        found = [plan["Node Type"]] if plan["Node Type"].startswith("Gather") else []
        for child in plan.get("Plans", []):
            found += parallel_nodes(child)
        return found

    with connection.cursor() as cursor:
        for setting in PARALLEL_COSTS:
            cursor.execute(f"SET LOCAL {setting} = 0")
    plans = plans_of(lambda: rollup_day(day=timezone.now().date()))

    assert plans
    assert [node for plan in plans for node in parallel_nodes(plan)] == []
    assert rows()  # and the day was still summed
