"""Resume: a reason, optional grants, usage kept; refused while writes are open."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

from django.utils import timezone

from agents.guard import terms
from agents.models import Event, Phase, Task
from ledger.services import operation_reconcile
from tests.console.conftest import HTMX


def test_the_form_shows_usage_so_far_per_budget(as_operator, stopped_task):
    page = as_operator.get(f"/tasks/{stopped_task.pk}/").content.decode()
    assert "Resume in a new phase" in page
    for key in ("model_calls", "tool_requests", "tool_executions", "retries", "polls", "tokens",
                "cost", "seconds"):  # fmt: skip
        assert f'name="{key}"' in page
    assert '<td class="num">2</td>\n            <td class="num">20</td>' in page  # executions


def test_a_plain_post_resumes_with_grants_and_usage_stays(as_operator, stopped_task, people):
    used = stopped_task.tool_executions
    response = as_operator.post(
        f"/tasks/{stopped_task.pk}/resume/",
        {"reason": "search index fixed", "tool_executions": "5", "cost": "0.5", "polls": ""},
    )
    assert response.status_code == 303
    stopped_task.refresh_from_db()
    assert (stopped_task.state, stopped_task.phase) == (terms.RUNNING, 2)
    assert stopped_task.tool_executions == used
    assert stopped_task.limits["max_tool_executions"] == 25
    assert Decimal(stopped_task.limits["max_cost"]) == Decimal("5.5")
    phase = Phase.objects.get(task=stopped_task, number=2)
    assert (phase.started_by, phase.reason) == (people.operator, "search index fixed")
    page = as_operator.get(f"/tasks/{stopped_task.pk}/").content.decode()
    assert "Resumed by <b>olivia</b>" in page
    assert "tool_executions +5" in page


def test_htmx_swaps_the_task_in_place(as_operator, stopped_task):
    response = as_operator.post(f"/tasks/{stopped_task.pk}/resume/", {"reason": "ok"}, **HTMX)
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="task-page"')
    assert '<span class="badge big state-running">Running</span>' in body


def test_a_bad_grant_shows_the_error_next_to_its_field_and_changes_nothing(
    as_operator, stopped_task
):
    before = (stopped_task.state, stopped_task.phase, stopped_task.limits)
    response = as_operator.post(
        f"/tasks/{stopped_task.pk}/resume/",
        {"reason": "go", "model_calls": "-1", "tokens": "lots", "cost": "abc"},
    )
    assert response.status_code == 422
    body = response.content.decode()
    assert 'id="id_model_calls_error">Must be zero or more.' in body
    assert 'id="id_tokens_error">Must be a number.' in body
    assert 'id="id_cost_error">Must be a number.' in body
    assert 'value="lots"' in body  # what was typed stays
    stopped_task.refresh_from_db()
    assert (stopped_task.state, stopped_task.phase, stopped_task.limits) == before


def test_a_missing_reason_is_refused(as_operator, stopped_task):
    events = Event.objects.count()
    response = as_operator.post(f"/tasks/{stopped_task.pk}/resume/", {"model_calls": "1"})
    assert response.status_code == 422
    assert "Say why the task may go on." in response.content.decode()
    stopped_task.refresh_from_db()
    assert stopped_task.state == terms.STOPPED
    assert Event.objects.count() == events


def test_open_writes_are_named_and_linked_and_block_the_resume(as_operator, lost_write):
    task, op = lost_write.task, lost_write.operation
    page = as_operator.get(f"/tasks/{task.pk}/").content.decode()
    assert "Reconcile first." in page
    assert f'<a href="/reconcile/#op-{op.pk}"><code>pay-INV-42</code></a>' in page
    assert 'disabled title="Reconcile the open writes first"' in page
    response = as_operator.post(f"/tasks/{task.pk}/resume/", {"reason": "try"})
    assert response.status_code == 422
    assert "Reconcile these operations before resuming: pay-INV-42" in response.content.decode()
    task.refresh_from_db()
    assert (task.state, task.phase) == (terms.NEEDS_HUMAN, 1)


def test_after_reconciling_the_task_resumes(as_operator, lost_write, people):
    task, op = lost_write.task, lost_write.operation
    operation_reconcile(operation_id=op.pk, verdict="COMMITTED", note="paid", actor="user:olivia",
                        user=people.operator, result={"payment": "P-1"})  # fmt: skip
    page = as_operator.get(f"/tasks/{task.pk}/").content.decode()
    assert "Reconcile first." not in page
    response = as_operator.post(f"/tasks/{task.pk}/resume/", {"reason": "payment confirmed"})
    assert response.status_code == 303
    task.refresh_from_db()
    assert (task.state, task.phase) == (terms.RUNNING, 2)


def test_a_running_task_has_no_resume_form_and_refuses_a_resume(as_operator, looping_task):
    page = as_operator.get(f"/tasks/{looping_task.pk}/").content.decode()
    assert "Resume in a new phase" not in page
    response = as_operator.post(f"/tasks/{looping_task.pk}/resume/", {"reason": "why not"})
    assert response.status_code == 422
    assert "The task is running; there is nothing to resume." in response.content.decode()


def test_a_completed_task_offers_nothing(as_operator, agent):
    from agents.services import runner, tasks

    task = tasks.task_create(agent=agent, goal="done")
    runner.task_finish(task_id=task.pk, agent=agent, evidence={"revision": 0, "done": True})
    page = as_operator.get(f"/tasks/{task.pk}/").content.decode()
    assert "The goal was met. Nothing to do." in page


def test_a_stop_then_resume_keeps_the_window(as_operator, stopped_task):
    window = list(stopped_task.window)
    as_operator.post(f"/tasks/{stopped_task.pk}/resume/", {"reason": "go"})
    stopped_task.refresh_from_db()
    assert stopped_task.window == window


def test_the_form_shows_the_operators_grant_bound(as_operator, stopped_task):
    page = as_operator.get(f"/tasks/{stopped_task.pk}/").content.decode()
    assert "At most +" in page
    assert "original limit" in page
    assert '<td class="num bound">20</td>' in page  # executions: the original limit


def test_an_operators_grant_above_the_bound_is_refused_next_to_its_field(as_operator, stopped_task):
    response = as_operator.post(
        f"/tasks/{stopped_task.pk}/resume/", {"reason": "more", "tool_executions": "21"}
    )
    assert response.status_code == 422
    assert 'id="id_tool_executions_error"' in response.content.decode()
    stopped_task.refresh_from_db()
    assert stopped_task.phase == 1


def test_an_admin_may_grant_above_the_bound(as_admin, stopped_task):
    response = as_admin.post(
        f"/tasks/{stopped_task.pk}/resume/", {"reason": "more", "tool_executions": "21"}
    )
    assert response.status_code == 303


def test_a_cost_that_is_no_finite_amount_is_a_field_error(as_operator, stopped_task):
    """The grant parser is the guard core's: "nan" and "inf" are refused like any bad value."""
    for typed in ("nan", "inf"):
        response = as_operator.post(
            f"/tasks/{stopped_task.pk}/resume/", {"reason": "go", "cost": typed}
        )
        assert response.status_code == 422
        assert 'id="id_cost_error">Must be a finite amount.' in response.content.decode()
    stopped_task.refresh_from_db()
    assert stopped_task.phase == 1


def test_an_admins_grant_past_what_a_limit_holds_is_refused_and_the_task_stays_stoppable(
    as_admin, stopped_task
):
    """Admins may grant above the operators' bound, but not past a limit's largest value: a
    cost of 1e24 once made the task's report fail, and with it every page, list and stop."""
    before = (stopped_task.state, stopped_task.phase, stopped_task.limits)

    for field, value in [("cost", "1000000000000000000000000"), ("seconds", "300000000000")]:
        response = as_admin.post(
            f"/tasks/{stopped_task.pk}/resume/", {"reason": "go", field: value}
        )

        assert response.status_code == 422, field
        assert f'id="id_{field}_error">' in response.content.decode()
        stopped_task.refresh_from_db()
        assert (stopped_task.state, stopped_task.phase, stopped_task.limits) == before
    assert as_admin.get(f"/tasks/{stopped_task.pk}/").status_code == 200


# -- a task that waited past its deadline ----------------------------------------------------


def waited(task, *, hours_ago: float, ran_seconds: int = 100, deadline_seconds: int = 900):
    """The task was created `hours_ago`, ran `ran_seconds` and has waited for a person since,
    past its deadline."""
    created = timezone.now() - timedelta(hours=hours_ago)
    Task.objects.filter(pk=task.pk).update(
        created_at=created,
        ended_at=created + timedelta(seconds=ran_seconds),
        deadline_at=created + timedelta(seconds=deadline_seconds),
    )
    task.refresh_from_db()
    return task


def resume_form(page: str) -> str:
    return page[
        page.index('<form class="resume"') : page.index(
            "</form>", page.index('<form class="resume"')
        )
    ]


def test_the_form_shows_the_real_time_against_the_deadline_and_warns(as_admin, stopped_task):
    task = waited(stopped_task, hours_ago=3)

    form = resume_form(as_admin.get(f"/tasks/{task.pk}/").content.decode())

    # Time as it is now (3 h since creation against 15 min), not frozen at the stop (100 s).
    assert re.search(r'<td class="num">3 h</td>\s*<td class="num">15 min</td>', form)
    assert 'class="notice warn deadline-passed"' in form
    assert "The deadline passed 2 h 45 min ago" in form
    needed = 3 * 3600 - 900 + 1
    proposed = re.search(r'name="seconds" id="id_seconds"[^>]* value="(\d+)"', form)
    assert proposed, form
    assert needed < int(proposed.group(1)) <= needed + 900 + 60


def test_the_proposed_seconds_resume_the_task_ahead_of_its_deadline(as_admin, stopped_task):
    task = waited(stopped_task, hours_ago=3)
    form = resume_form(as_admin.get(f"/tasks/{task.pk}/").content.decode())
    seconds = re.search(r'name="seconds" id="id_seconds"[^>]* value="(\d+)"', form).group(1)

    response = as_admin.post(f"/tasks/{task.pk}/resume/", {"reason": "fixed", "seconds": seconds})

    assert response.status_code == 303
    task.refresh_from_db()
    assert task.state == terms.RUNNING and task.deadline_at > timezone.now()


def test_an_operator_whose_bound_is_too_small_is_told_to_ask_an_admin(as_operator, stopped_task):
    task = waited(stopped_task, hours_ago=3)

    form = resume_form(as_operator.get(f"/tasks/{task.pk}/").content.decode())

    assert "ask an admin" in form
    assert not re.search(r'name="seconds" id="id_seconds"[^>]* value="\d+"', form)


def test_resuming_without_the_seconds_keeps_the_form_and_names_the_seconds_needed(
    as_admin, stopped_task
):
    task = waited(stopped_task, hours_ago=3)
    before = (task.state, task.phase, task.deadline_at)

    response = as_admin.post(
        f"/tasks/{task.pk}/resume/", {"reason": "fixed", "model_calls": "2", "seconds": ""}
    )

    assert response.status_code == 422
    body = response.content.decode()
    assert re.search(r'id="id_seconds_error">At least \d+ seconds', body)
    assert 'value="2"' in resume_form(body)  # the form keeps what was typed
    task.refresh_from_db()
    assert (task.state, task.phase, task.deadline_at) == before
