"""Retention (docs/DESIGN.md section 8): the trace of tasks that ended long ago is removed; the
ledger, the audit log, stop reports, counters, phases and daily rollups stay, and an old task
can still be reconciled and resumed."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from agents.models import (
    DailyRollup,
    Event,
    LimitProfile,
    ModelCall,
    Phase,
    RequestAnswer,
    SeenHash,
    Task,
    ToolCall,
)
from agents.services import retention, rollups, sweeps
from ledger.models import Operation, Reconciliation
from ledger.services import operation_reconcile
from loopwarden.celery import beat_schedule

from .helpers import (
    NOTICE_KEY,
    evidence,
    execute,
    gate,
    get_task,
    new_task,
    request_tool,
    send_notice,
    settle,
)

pytestmark = pytest.mark.django_db

DAYS = 30
LATER = timedelta(days=DAYS + 1)  # a prune run this much later finds today's ended tasks old


def prune(**options):
    return retention.trace_prune(days=DAYS, now=timezone.now() + LATER, **options)


def trace_of(task_id) -> dict[str, int]:
    return {
        "model_calls": ModelCall.objects.filter(task_id=task_id).count(),
        "tool_calls": ToolCall.objects.filter(task_id=task_id).count(),
        "seen_hashes": SeenHash.objects.filter(task_id=task_id).count(),
        "request_answers": RequestAnswer.objects.filter(task_id=task_id).count(),
        "events": Event.objects.filter(task_id=task_id).count(),
    }


def kept_of(task_id) -> dict:
    """Everything retention keeps about a task."""
    task = Task.objects.filter(pk=task_id).values().get()
    task.pop("trace_pruned_at")
    return {
        "task": task,
        "phases": list(Phase.objects.filter(task_id=task_id).order_by("number").values()),
        "audit": list(
            Event.objects.filter(task_id=task_id, actor__startswith="user:").order_by("pk").values()
        ),
        "stops": list(
            Event.objects.filter(task_id=task_id, kind="task_stopped").order_by("pk").values()
        ),
        "operations": list(Operation.objects.order_by("pk").values()),
        "reconciliations": list(Reconciliation.objects.order_by("pk").values()),
        "rollups": list(DailyRollup.objects.order_by("pk").values()),
    }


@pytest.fixture
def busy_task(agent_api, operator_api, agent):
    """A novelty task with every kind of trace row: model calls, tool calls (a write that
    committed), a seen hash, a request id's answer, guard events; stopped by an operator."""
    profile, _ = LimitProfile.objects.update_or_create(
        name="novelty", defaults={"progress_mode": "novelty", "max_stagnant": 5}
    )
    agent[1].default_profile = profile
    agent[1].save()
    task_id = new_task(agent_api)["id"]
    settle(agent_api, task_id, gate(agent_api, task_id, request_id="g1")["model_call"])
    execute(agent_api, task_id, "fetch", {"page": 1}, result={"kind": "SUCCESS", "data_hash": "h1"})
    call = send_notice(agent_api, task_id)
    committed = {"kind": "SUCCESS", "evidence": evidence(1, committed=True)}
    answer = agent_api.post(f"tasks/{task_id}/tool-calls/{call['tool_call']}/result", committed)
    assert answer.body["decision"] == "CONTINUE", answer.body
    for _ in range(3):  # the same read again and again: a guard trigger event
        request_tool(agent_api, task_id, "fetch", {"page": 1})
    assert operator_api.post(f"tasks/{task_id}/stop", {"reason": "enough"}).status_code == 200
    rollups.rollup_day(day=timezone.now().date())
    return task_id


def test_it_removes_the_trace_of_a_task_that_ended_before_the_cutoff(busy_task):
    before = trace_of(busy_task)
    assert all(before.values()), before
    assert Event.objects.filter(task_id=busy_task, actor__startswith="agent:").exists()

    result = prune()

    assert result.tasks == 1
    after = trace_of(busy_task)
    assert {k: v for k, v in after.items() if k != "events"} == dict.fromkeys(
        ("model_calls", "tool_calls", "seen_hashes", "request_answers"), 0
    )
    # Only the audit log (people's actions) and the stop are left of the events.
    kinds = set(Event.objects.filter(task_id=busy_task).values_list("kind", "actor"))
    assert kinds == {("stop_requested", "user:olivia"), ("task_stopped", "user:olivia")}
    assert result.rows == {k: before[k] - after[k] for k in before}
    assert Task.objects.get(pk=busy_task).trace_pruned_at is not None


def test_it_keeps_counters_report_phases_ledger_audit_and_rollups(busy_task, operator_api):
    kept = kept_of(busy_task)
    shown = get_task(operator_api, busy_task)

    prune()

    assert kept_of(busy_task) == kept
    assert get_task(operator_api, busy_task) == shown
    assert Operation.objects.get(operation_key=NOTICE_KEY).state == "COMMITTED"


def test_it_leaves_running_tasks_and_tasks_ended_within_the_days_kept(agent_api, busy_task):
    running = new_task(agent_api)["id"]
    execute(agent_api, running, "fetch", {"page": 2})
    before = trace_of(busy_task), trace_of(running)

    result = retention.trace_prune(days=DAYS, now=timezone.now() + timedelta(days=DAYS - 1))
    assert result.tasks == 0
    prune()

    assert trace_of(running) == before[1]
    assert Task.objects.get(pk=running).trace_pruned_at is None


def test_a_dry_run_counts_what_a_prune_removes_and_changes_nothing(busy_task):
    before = trace_of(busy_task), kept_of(busy_task), Task.objects.get(pk=busy_task)

    dry = prune(dry_run=True)

    assert (trace_of(busy_task), kept_of(busy_task)) == before[:2]
    assert Task.objects.get(pk=busy_task).trace_pruned_at is None
    assert prune().as_dict() == dry.as_dict()


def test_small_batches_remove_the_same_rows_as_one(busy_task):
    before = trace_of(busy_task)

    result = prune(batch_rows=2)

    assert result.rows["tool_calls"] == before["tool_calls"] > 2
    assert trace_of(busy_task)["tool_calls"] == 0


def test_a_second_run_finds_nothing_to_do(busy_task):
    prune()

    again = prune()

    assert (again.tasks, sum(again.rows.values())) == (0, 0)


def test_a_task_with_an_unresolved_operation_keeps_its_trace(agent_api, operator_api):
    task_id = new_task(agent_api)["id"]
    send_notice(agent_api, task_id)  # IN_FLIGHT, never reported
    operator_api.post(f"tasks/{task_id}/stop", {"reason": "enough"})
    before = trace_of(task_id)

    assert prune().tasks == 0
    assert trace_of(task_id) == before


def test_a_resumed_task_after_pruning_decides_as_before(busy_task, agent_api, operator_api):
    prune()

    response = operator_api.post(
        f"tasks/{busy_task}/resume", {"reason": "go on", "grant": {"seconds": 600}}
    )

    assert response.status_code == 200, response.body
    answer = request_tool(agent_api, busy_task, "fetch", {"page": 7})
    assert answer["decision"] == "EXECUTE"
    # The write the pruned trace did is still reused from the ledger, not sent twice.
    again = send_notice(agent_api, busy_task)
    assert again["decision"] == "REUSE", again
    assert ToolCall.objects.filter(task_id=busy_task).count() == 2
    assert get_task(operator_api, busy_task)["state"] == "RUNNING"


def test_a_reconciled_task_after_pruning_can_be_resumed(agent_api, operator_api):
    task_id = new_task(agent_api)["id"]
    call = send_notice(agent_api, task_id)
    sweeps.sweep_leases(now=timezone.now() + timedelta(days=1))  # UNKNOWN: NEEDS_HUMAN
    assert prune().tasks == 0  # unresolved: its trace stays for the reconcile
    operation = Operation.objects.get(operation_key=NOTICE_KEY)
    operation_reconcile(
        operation_id=operation.pk, verdict="NOT_COMMITTED", note="never sent", actor="user:olivia"
    )

    assert prune().tasks == 1
    assert not ToolCall.objects.filter(pk=call["tool_call"]).exists()

    response = operator_api.post(
        f"tasks/{task_id}/resume", {"reason": "send it now", "grant": {"seconds": 600}}
    )
    assert response.status_code == 200, response.body
    assert send_notice(agent_api, task_id)["decision"] == "EXECUTE"


def test_the_task_page_says_when_the_trace_was_pruned(busy_task, make_user, client):
    user, _ = make_user("paula")
    client.force_login(user)
    prune()

    page = client.get(f"/tasks/{busy_task}/").content.decode()

    pruned_on = Task.objects.get(pk=busy_task).trace_pruned_at.date().isoformat()
    assert f"Trace pruned on {pruned_on}" in page
    assert "No calls yet." not in page
    # The ledger panel still lists the write (found by the ledger row's own task column).
    assert "This task made no write through the ledger." not in page


def test_the_command_prints_a_dry_run_and_removes_nothing(busy_task):
    out = StringIO()
    before = trace_of(busy_task)

    call_command("prune", "--dry-run", f"--days={DAYS}", stdout=out)

    assert "0 task(s) to prune" in out.getvalue()  # ended just now: within the days kept
    assert trace_of(busy_task) == before


def test_the_command_removes_what_it_prints(busy_task):
    Task.objects.filter(pk=busy_task).update(ended_at=timezone.now() - LATER)
    ToolCall.objects.filter(task_id=busy_task).update(created_at=timezone.now() - LATER)
    out = StringIO()

    call_command("prune", f"--days={DAYS}", stdout=out)

    assert "1 task(s) pruned" in out.getvalue()
    assert "tool_calls: removed 5" in out.getvalue()
    assert trace_of(busy_task)["tool_calls"] == 0


def test_the_command_refuses_one_day_as_the_setting_does(busy_task):
    """One day would remove yesterday's trace, which the rollup job still rebuilds from."""
    Task.objects.filter(pk=busy_task).update(ended_at=timezone.now() - timedelta(hours=30))
    before = trace_of(busy_task)

    with pytest.raises(CommandError, match="2 or more"):
        call_command("prune", "--days=1", stdout=StringIO())

    assert trace_of(busy_task) == before


def test_the_command_refuses_more_days_than_the_calendar_holds(busy_task):
    before = trace_of(busy_task)

    with pytest.raises(CommandError, match="--days"):
        call_command("prune", "--days=99999999", "--dry-run", stdout=StringIO())

    assert trace_of(busy_task) == before


def test_beat_runs_the_prune_only_when_retention_is_on():
    assert "prune-trace" not in beat_schedule(sweep_seconds=15, rollup_seconds=300)
    on = beat_schedule(sweep_seconds=15, rollup_seconds=300, prune_seconds=3600)
    assert on["prune-trace"]["task"] == "agents.tasks.prune_trace"


def test_rebuilding_a_pruned_day_keeps_its_rollups(busy_task):
    then = timezone.now() - timedelta(days=DAYS + 10)
    for model in (ModelCall, ToolCall, SeenHash, RequestAnswer, Event):
        model.objects.filter(task_id=busy_task).update(created_at=then)
    Phase.objects.filter(task_id=busy_task).update(started_at=then, ended_at=then)
    Task.objects.filter(pk=busy_task).update(created_at=then, ended_at=then)
    DailyRollup.objects.all().delete()
    rollups.rollup_day(day=then.date())
    before = list(DailyRollup.objects.order_by("pk").values())
    assert before and before[0]["model_calls"] == 1, before
    assert retention.trace_prune(days=DAYS).tasks == 1

    rollups.rollup_day(day=then.date())
    call_command("rollup_daily", "--date", then.date().isoformat(), stdout=StringIO())

    assert list(DailyRollup.objects.order_by("pk").values()) == before
