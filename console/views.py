"""Dashboard and task pages: watch, stop, resume, and a task's own limits.

Every state change goes through agents/services (the same functions the REST API calls);
these views only parse forms, call one service and choose between a partial and a page.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import urlencode

from django.http import HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django_htmx.http import HttpResponseClientRefresh

from agents import roles
from agents.db import storable
from agents.errors import DomainError
from agents.guard import core, terms
from agents.guard.report import resume_condition
from agents.models import Agent, Task
from agents.redaction import redact
from agents.services import operator
from agents.taskrow import to_state
from console import access, budgets, queries
from console.access import INVALID, console_view
from console.forms import ResumeForm, StopForm, TaskFilterForm, TaskLimitsForm
from console.paging import CappedPaginator
from console.templatetags.console_formats import duration, limit_shown
from console.timeline import timeline
from console.words import GRANTS, state_words
from ledger.selectors import is_unresolved

DASHBOARD_PAGE_SIZE = 50


# -- dashboard -------------------------------------------------------------------------------


@console_view(roles.VIEW_TASK)
def dashboard(request):
    agents = list(Agent.objects.order_by("name").values_list("name", flat=True))
    form = TaskFilterForm(request.GET or None, agents=agents)
    filters = form.filters()
    paginator = CappedPaginator(queries.dashboard_tasks(**filters), DASHBOARD_PAGE_SIZE)
    tasks = paginator.get_page(request.GET.get("page"))
    for task in tasks:
        task.busiest = budgets.busiest(task)
    carried = form.query_values()
    query = urlencode(carried)
    spent, reserved = queries.spend_today()
    context = {
        "form": form,
        "filters": filters,
        "query": query,
        "page_query": urlencode({**carried, "page": tasks.number}),
        "tasks": tasks,
        "counts": queries.state_counts(),
        "trips": queries.trips_today(),
        "spent_today": spent,
        "reserved_today": reserved,
    }
    status = INVALID if form.shown_errors else 200
    return access.page(
        request, "console/dashboard.html", "console/_dashboard_live.html", context, status=status
    )


# -- task detail -----------------------------------------------------------------------------


def _task(task_id) -> Task:
    return get_object_or_404(Task.objects.select_related("agent", "profile"), pk=task_id)


def next_step(task: Task, operations) -> str:
    """What must happen before a resume, from the ledger as it is now.

    The stop report is stored once and keeps the condition of the moment it stopped; after a
    reconcile that sentence is out of date, so the guard's own rule is asked again.
    """
    if not task.report:
        return ""
    current = [{"key": op.operation_key, "state": op.state} for op in operations]
    return resume_condition(to_state(task), current)


def task_context(request, task: Task, **forms) -> dict:
    """Everything the task page shows. Forms passed in (with errors) replace the blank ones."""
    operations = queries.task_operations(task)
    unresolved = [op for op in operations if is_unresolved(op)]
    history, history_total = queries.task_history(task)
    bars = budgets.bars(task)
    deadline = deadline_warning(task, request.user) if task.terminal else None
    try:
        trace_page = int(request.GET.get("trace", ""))
    except ValueError:
        trace_page = None
    return {
        "task": task,
        "state_words": state_words(task.state),
        "next_step": next_step(task, operations),
        "bars": bars,
        "grant_rows": _grant_rows(task, request.user, deadline),
        "deadline": deadline,
        "grant_unbounded": operator.may_exceed_grant_bound(request.user),
        "phases": list(task.phases.select_related("started_by")),
        "operations": operations,
        "unresolved": unresolved,
        "history": history,
        "history_total": history_total,
        "timeline": timeline(task, trace_page),
        "report_json": json.dumps(redact(task.report), indent=2) if task.report else "",
        "stop_form": forms.get("stop_form") or StopForm(),
        "resume_form": forms.get("resume_form") or ResumeForm(),
        "can_stop": request.user.has_perm(roles.STOP_TASK),
        "can_resume": request.user.has_perm(roles.RESUME_TASK),
        "can_reconcile": request.user.has_perm(roles.RECONCILE),
        "can_change_limits": request.user.has_perm(roles.CHANGE_TASK_LIMITS),
        "resumable": task.terminal and task.state != terms.COMPLETED,
        # "Real loop" / "False stop" judge the guard's stop: they mean nothing elsewhere.
        "labels_apply": task.terminal and terms.is_trip(task.reason),
    }


@dataclass(frozen=True)
class DeadlineWarning:
    """A stopped task whose deadline has passed: what a resume must grant, and a proposal."""

    behind: str  # how long ago the deadline passed
    needed: int  # the least grant.seconds a resume takes (core.seconds_needed)
    proposed: int | None  # needed + a fresh deadline's worth; None: above an operator's bound
    leaves: str  # the time the proposal leaves the agent
    bound: int | None  # the most an operator may grant; None for an admin


def deadline_warning(task: Task, user) -> DeadlineWarning | None:
    """The resume form's warning when the deadline is past. The seconds needed are the guard
    core's (the resume service refuses less with DEADLINE_PASSED); the proposal adds the
    task's original deadline, held to a non-admin operator's bound."""
    needed = core.seconds_needed(to_state(task), timezone.now())
    if not needed:
        return None
    original = operator.original_limits(task)
    fresh = needed + original.deadline_seconds
    proposed: int | None = fresh
    bound = None
    if not operator.may_exceed_grant_bound(user):
        bound = int(core.grant_bound(original)["seconds"])
        proposed = min(fresh, bound) if bound > needed else None
    leaves = duration(proposed - needed) if proposed else ""
    return DeadlineWarning(duration(needed - 1), needed, proposed, leaves, bound)


def _grant_rows(task: Task, user, deadline: DeadlineWarning | None) -> list[dict]:
    """One row per grant: usage (time as it is now: the deadline kept running while the task
    waited), limit and, for a non-admin operator, the most one resume may grant (the
    service's rule, `core.grant_bound`, shown rather than re-derived)."""
    by_key = {bar.key: bar for bar in budgets.bars(task, live=True)}
    unbounded = operator.may_exceed_grant_bound(user)
    bound = {} if unbounded else core.grant_bound(operator.original_limits(task))
    return [
        {
            "key": key,
            "label": label,
            "bar": by_key.get(key),
            "bound": limit_shown(bound[key], key) if key in bound else None,
            "proposed": deadline.proposed if deadline and key == "seconds" else None,
        }
        for key, label, _limit, _usage in GRANTS
    ]


@console_view(roles.VIEW_TASK)
def task_detail(request, task_id):
    task = _task(task_id)
    return access.page(
        request, "console/task_detail.html", "console/task/_page.html", task_context(request, task)
    )


@console_view(roles.VIEW_TASK)
def task_live(request, task_id):
    """Polled while a task runs: its state and budgets. When the state moved on (the guard or
    someone else stopped it), the whole page is reloaded so its actions match the new state."""
    task = _task(task_id)
    if request.GET.get("state") and request.GET["state"] != task.state:
        return HttpResponseClientRefresh()
    operations = queries.task_operations(task) if task.report else []
    context = {
        "task": task,
        "bars": budgets.bars(task),
        "state_words": state_words(task.state),
        "next_step": next_step(task, operations),
    }
    return render(request, "console/task/_live.html", context)


@console_view(roles.VIEW_TASK)
def task_timeline(request, task_id):
    task = _task(task_id)
    try:
        number = int(request.GET.get("page", ""))
    except ValueError:
        number = None
    context = {"task": task, "timeline": timeline(task, number)}
    return render(request, "console/task/_timeline.html", context)


@console_view(roles.VIEW_TASK)
def task_report(request, task_id):
    task = _task(task_id)
    if not task.report:
        return JsonResponse({"error": "The task has no stop report yet."}, status=404)
    # Reported text as the agent sent it (ASCII escapes: a lone surrogate stays valid JSON),
    # masked by the redaction policy: the download is an operator's read.
    report = redact(storable.decode(task.report))
    response = JsonResponse(report, json_dumps_params={"indent": 2})
    response["Content-Disposition"] = f'attachment; filename="loopwarden-report-{task.pk}.json"'
    return response


def _task_answer(request, task: Task, message: str, kind: str = "success") -> HttpResponse:
    task = _task(task.pk)  # fresh, with its relations
    return access.done(
        request,
        message,
        partial="console/task/_page.html",
        context=task_context(request, task),
        then=reverse("task", args=[task.pk]),
        kind=kind,
    )


def _task_invalid(request, task: Task, **forms) -> HttpResponse:
    return access.page(
        request,
        "console/task_detail.html",
        "console/task/_page.html",
        task_context(request, _task(task.pk), **forms),
        status=INVALID,
    )


@console_view(roles.STOP_TASK, methods=("POST",))
def task_stop(request, task_id):
    task = _task(task_id)
    form = StopForm(request.POST)
    if not form.is_valid():
        return _task_invalid(request, task, stop_form=form)
    stopped, now = operator.task_stop(
        task_id=task.pk, reason=form.cleaned_data["reason"], user=request.user
    )
    if not now:  # another tab, person or the agent got there first
        state = state_words(stopped.state).lower()
        return _task_answer(
            request, task, f"The task had already ended ({state}); nothing changed.", "info"
        )
    return _task_answer(request, task, "Task stopped. The agent's next call gets STOP.")


@console_view(roles.STOP_TASK, methods=("POST",))
def task_label(request, task_id):
    """An operator says whether a stop was a real loop or a false stop (loop_eval --from-db)."""
    task = _task(task_id)
    label = request.POST.get("label", "")
    try:
        operator.task_label_stop(task_id=task.pk, label=label, user=request.user)
    except DomainError as error:
        return _task_answer(request, task, error.message, "error")
    labels = {"real_loop": "a real loop", "false_stop": "a false stop"}
    message = f"Stop labelled {labels[label]}." if label else "Label cleared."
    return _task_answer(request, task, message)


@console_view(roles.RESUME_TASK, methods=("POST",))
def task_resume(request, task_id):
    task = _task(task_id)
    form = ResumeForm(request.POST)
    if form.is_valid():
        try:
            operator.task_resume(
                task_id=task.pk,
                user=request.user,
                reason=form.cleaned_data["reason"],
                grant=form.grant(),
            )
        except DomainError as error:
            access.field_errors(form, error)
        else:
            return _task_answer(request, task, "Task resumed: a new phase started.")
    return _task_invalid(request, task, resume_form=form)


# -- a task's own limits (admins) ------------------------------------------------------------


@console_view(roles.CHANGE_TASK_LIMITS, methods=("GET", "POST"))
def task_limits(request, task_id):
    task = _task(task_id)
    form = TaskLimitsForm(request.POST or None, limits=task.limits)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                operator.task_set_limits(
                    task_id=task.pk,
                    user=request.user,
                    changes=form.changes(),
                    reason=form.cleaned_data["reason"],
                )
            except DomainError as error:
                access.field_errors(form, error)
            else:
                task = _task(task.pk)
                return access.done(
                    request,
                    "Limits changed.",
                    partial="console/_task_limits_form.html",
                    context=_limits_context(task, TaskLimitsForm(limits=task.limits)),
                    then=reverse("task", args=[task.pk]),
                )
        status = INVALID
    return access.page(
        request,
        "console/task_limits.html",
        "console/_task_limits_form.html",
        _limits_context(task, form),
        status=status,
    )


def _limits_context(task: Task, form: TaskLimitsForm) -> dict:
    return {
        "task": task,
        "form": form,
        "changes": queries.task_limit_changes(task),
        "state_words": state_words(task.state),
    }
