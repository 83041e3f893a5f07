"""The lease sweep: an IN_FLIGHT write whose agent went silent becomes UNKNOWN, and its task
waits for a human."""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest
from django.utils import timezone

from agents.guard import terms
from agents.models import Event, Phase
from agents.services import runner, sweeps
from agents.services.operator import task_stop
from ledger.models import Operation
from tests.celery.helpers import db_snapshot


def test_an_expired_write_becomes_unknown_and_its_task_needs_a_human(
    make_task, start_write, past_lease
):
    task = make_task()
    operation = start_write(task)

    result = sweeps.sweep_leases(now=past_lease)

    assert result.as_dict() == {"claimed": 1, "stopped": 1}
    operation.refresh_from_db()
    task.refresh_from_db()
    assert operation.state == terms.UNKNOWN
    assert (task.state, task.reason) == (terms.NEEDS_HUMAN, "unknown_commit")
    assert task.report["operations"] == [{"key": "invoice-42", "state": terms.UNKNOWN}]
    assert task.ended_at == past_lease
    phase = Phase.objects.get(task=task, number=1)
    assert (phase.end_state, phase.end_reason) == (terms.NEEDS_HUMAN, "unknown_commit")
    kinds = list(task.events.values_list("kind", "actor"))
    assert ("lease_expired", "system:lease_sweep") in kinds
    assert ("task_stopped", "system:lease_sweep") in kinds


def test_running_it_twice_changes_nothing_the_second_time(make_task, start_write, past_lease):
    start_write(make_task())
    sweeps.sweep_leases(now=past_lease)
    before = db_snapshot()

    again = sweeps.sweep_leases(now=past_lease + timedelta(seconds=30))

    assert again.as_dict() == {"claimed": 0, "stopped": 0}
    assert db_snapshot() == before


def test_a_live_lease_is_left_alone(make_task, start_write):
    task = make_task()
    operation = start_write(task)

    assert sweeps.sweep_leases(now=timezone.now() + timedelta(seconds=30)).claimed == []
    operation.refresh_from_db()
    task.refresh_from_db()
    assert (operation.state, task.state) == (terms.IN_FLIGHT, terms.RUNNING)


def test_a_result_that_arrived_first_wins(make_task, start_write, agent_row, past_lease):
    task = make_task()
    operation = start_write(task)
    runner.tool_call_result(
        task_id=task.pk, agent=agent_row, tool_call_id=operation.tool_call.pk,
        result=terms.ToolResult(kind=terms.SUCCESS, data={"sent": True},
                            evidence={"revision": 1, "done": False, "committed": True}),
    )  # fmt: skip

    assert sweeps.sweep_leases(now=past_lease).claimed == []
    operation.refresh_from_db()
    assert operation.state == terms.OP_COMMITTED


def test_a_stopped_task_keeps_its_stop_but_the_operation_becomes_unknown(
    make_task, start_write, past_lease
):
    task = make_task()
    operation = start_write(task)
    task_stop(task_id=task.pk, reason="enough", actor="user:olivia")

    result = sweeps.sweep_leases(now=past_lease)

    assert result.as_dict() == {"claimed": 1, "stopped": 0}
    operation.refresh_from_db()
    task.refresh_from_db()
    assert operation.state == terms.UNKNOWN
    assert (task.state, task.reason) == (terms.STOPPED, "operator_stop")


def test_each_expired_operation_of_many_tasks_is_swept(make_task, start_write, past_lease):
    tasks = [make_task(goal=f"Goal {i}") for i in range(3)]
    for i, task in enumerate(tasks):
        start_write(task, key=f"invoice-{i}")

    assert len(sweeps.sweep_leases(now=past_lease).stopped) == 3
    assert set(Operation.objects.values_list("state", flat=True)) == {terms.UNKNOWN}


def test_the_sweep_starts_a_new_reconcile_episode(make_task, start_write, past_lease):
    operation = start_write(make_task())
    Operation.objects.filter(pk=operation.pk).update(reconcile_checks=3)

    sweeps.sweep_leases(now=past_lease)

    operation.refresh_from_db()
    assert operation.reconcile_checks == 0


@pytest.mark.django_db(transaction=True)
def test_the_stop_enqueues_one_notification_after_commit(make_task, start_write, past_lease):
    task = make_task()
    start_write(task)
    with mock.patch("agents.jobs.notify_needs_human.delay") as delay:
        sweeps.sweep_leases(now=past_lease)

    delay.assert_called_once_with(str(task.pk), 1, "needs_human")


def test_the_sweep_writes_one_audit_event_per_operation(make_task, start_write, past_lease):
    task = make_task()
    start_write(task)
    sweeps.sweep_leases(now=past_lease)
    sweeps.sweep_leases(now=past_lease)

    assert Event.objects.filter(task=task, kind="lease_expired").count() == 1
    assert Event.objects.filter(task=task, kind="task_stopped").count() == 1


def test_a_claimer_whose_lease_another_task_found_over_needs_a_human_too(
    make_task, start_write, agent_row, past_lease
):
    claimer, other = make_task(goal="First try"), make_task(goal="Second try")
    operation = start_write(claimer)
    with mock.patch("agents.services.runner.timezone.now", return_value=past_lease):
        _t, _call, outcome = runner.tool_call_request(
            task_id=other.pk, agent=agent_row, tool="send_invoice",
            args={"invoice": "invoice-42"}, effect=terms.WRITE, operation_key="invoice-42",
        )  # fmt: skip
    assert (outcome.decision, outcome.reason) == (terms.STOP, "unknown_commit")
    operation.refresh_from_db()
    claimer.refresh_from_db()
    assert (operation.state, claimer.state) == (terms.UNKNOWN, terms.RUNNING)

    result = sweeps.sweep_leases(now=past_lease)

    assert result.as_dict() == {"claimed": 0, "stopped": 1}
    claimer.refresh_from_db()
    assert (claimer.state, claimer.reason) == (terms.NEEDS_HUMAN, "unknown_commit")
    assert sweeps.sweep_leases(now=past_lease).as_dict() == {"claimed": 0, "stopped": 0}


def test_a_lease_expires_once_whoever_finds_it_over(make_task, start_write, agent_row, past_lease):
    """The guard (another task's request) and the sweep expire a lease through one service:
    one `lease_expired` event, of one shape, and a new reconcile episode either way."""
    claimer, other = make_task(goal="First try"), make_task(goal="Second try")
    by_guard = start_write(claimer)
    Operation.objects.filter(pk=by_guard.pk).update(reconcile_checks=2)
    with mock.patch("agents.services.runner.timezone.now", return_value=past_lease):
        runner.tool_call_request(
            task_id=other.pk, agent=agent_row, tool="send_invoice",
            args={"invoice": "invoice-42"}, effect=terms.WRITE, operation_key="invoice-42",
        )  # fmt: skip
    sweeps.sweep_leases(now=past_lease)
    by_sweep = start_write(make_task(goal="Third try"), key="invoice-43")
    sweeps.sweep_leases(now=past_lease)

    events = Event.objects.filter(kind="lease_expired").order_by("id")
    assert [(e.operation_id, e.task_id, e.actor) for e in events] == [
        (by_guard.pk, other.pk, "system:guard"),
        (by_sweep.pk, by_sweep.task_id, "system:lease_sweep"),
    ]
    assert {tuple(sorted(e.detail)) for e in events} == {
        ("lease_expires_at", "operation_key", "tool")
    }
    assert {e.code for e in events} == {"GUARD_LEDGER"}
    assert list(Operation.objects.values_list("state", "reconcile_checks")) == [
        (terms.UNKNOWN, 0), (terms.UNKNOWN, 0)
    ]  # fmt: skip


def test_a_claimer_that_reported_is_not_stopped_by_an_unknown_row(
    make_task, start_write, agent_row, past_lease
):
    task = make_task()
    operation = start_write(task)
    runner.tool_call_result(
        task_id=task.pk, agent=agent_row, tool_call_id=operation.tool_call.pk,
        result=terms.ToolResult(kind=terms.SUCCESS, data={"sent": False},
                            evidence={"revision": 1, "done": False, "committed": False}),
    )  # fmt: skip
    task.refresh_from_db()
    assert task.state == terms.RUNNING
    Operation.objects.filter(pk=operation.pk).update(
        state=terms.UNKNOWN, lease_expires_at=past_lease
    )

    assert sweeps.sweep_leases(now=past_lease).stopped == []


def test_an_expired_write_still_unknown_after_a_verdict_stops_its_task_all_the_same(
    make_task, start_write
):
    # An operator records "still unknown" on a write whose lease ran out before the sweep
    # came: nobody knows whether it committed, so its task needs a human as if the sweep had
    # been first, and the sweep must still find it.
    from ledger.services import operation_reconcile

    task = make_task()
    operation = start_write(task)
    Operation.objects.filter(pk=operation.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    operation_reconcile(
        operation_id=operation.pk, verdict=terms.UNKNOWN, note="asking the mail provider",
        actor="user:olivia",
    )  # fmt: skip

    sweeps.sweep_leases()

    operation.refresh_from_db()
    task.refresh_from_db()
    assert operation.state == terms.UNKNOWN
    assert (task.state, task.reason) == (terms.NEEDS_HUMAN, "unknown_commit")
