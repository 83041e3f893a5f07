"""The task page: state in words, budget bars, phases, trace with loops marked, ledger, report."""

from __future__ import annotations

import html
import json
import re
import uuid

from agents.models import ModelCall, ToolCall
from console.timeline import PAGE_SIZE
from tests.console.conftest import HTMX, tool_step


def test_it_says_the_state_and_reason_in_words(as_operator, lost_write):
    page = as_operator.get(f"/tasks/{lost_write.task.pk}/").content.decode()
    assert "Needs a human" in page
    assert "A write may or may not have happened: its outcome is unknown." in page
    assert "unknown_commit" in page and "GUARD_LEDGER" in page
    assert "Reconcile operation pay-INV-42, then an operator may resume." in page


def test_it_draws_a_bar_per_budget_coloured_by_how_near_the_limit(as_operator, looping_task):
    page = as_operator.get(f"/tasks/{looping_task.pk}/").content.decode()
    for label in ("Model calls", "Tool requests", "Tool executions", "Retries", "Polls",
                  "Tokens", "Cost", "Time", "Steps without progress"):  # fmt: skip
        assert f"<dt>{label}</dt>" in page
    assert '2 <span class="muted">/ 20</span>' in page  # tool executions
    assert re.search(r'bar-row ok">\s*<dt>Steps without progress', page)  # 2 of 3


def test_bars_turn_amber_then_red_near_the_limit(as_operator, looping_task):
    looping_task.model_calls = 15  # of 20: amber
    looping_task.tool_requests = 39  # of 40: red
    looping_task.save()
    page = as_operator.get(f"/tasks/{looping_task.pk}/").content.decode()
    assert re.search(r'bar-row warn">\s*<dt>Model calls', page)
    assert re.search(r'bar-row high">\s*<dt>Tool requests', page)
    assert re.search(r'bar-row ok">\s*<dt>Tool executions', page)


def test_the_timeline_marks_repeats_and_redacts_secrets(as_operator, looping_task):
    page = html.unescape(as_operator.get(f"/tasks/{looping_task.pk}/").content.decode())
    assert "repeat ×2" in page
    assert "sk-live-123" not in page
    assert '"api_key": "•••"' in page
    call = ToolCall.objects.filter(task=looping_task).first()
    assert call.fingerprint[:8] in page
    assert 'class="fp-chip"' in page  # the repeated fingerprint has a letter
    assert "asked for</small> kb_search" in page


def test_the_timeline_marks_a_cycle(as_operator, agent, make_user):
    from agents.models import LimitProfile
    from agents.services import tasks

    agent.allowed_profiles.add(LimitProfile.objects.create(name="patient", max_stagnant=10))
    task = tasks.task_create(agent=agent, goal="stock", profile="patient")
    for tool in ("check_stock", "check_supplier", "check_stock", "check_supplier"):
        tool_step(agent, task.pk, tool, {"sku": "SKU-7"})
    page = as_operator.get(f"/tasks/{task.pk}/").content.decode()
    assert "cycle (2)" in page
    assert "short_cycle" in page  # the guard stopped the fourth call


def test_the_timeline_shows_a_window_of_a_long_trace(as_operator, looping_task):
    _add_trace_rows(looping_task, 5 * PAGE_SIZE)  # after the fixture's three rows
    total = 5 * PAGE_SIZE + 3
    page = as_operator.get(f"/tasks/{looping_task.pk}/").content.decode()
    assert f"showing {total - PAGE_SIZE + 1}–{total}" in page  # the latest window, full
    assert "Page 6 of 6" in page
    earlier = as_operator.get(f"/tasks/{looping_task.pk}/?trace=1").content.decode()
    assert "showing 1–3" in earlier  # the oldest window takes the remainder
    partial = as_operator.get(f"/tasks/{looping_task.pk}/timeline/?page=2", **HTMX)
    body = partial.content.decode()
    assert body.lstrip().startswith('<section id="timeline"')
    assert f"showing 4–{PAGE_SIZE + 3}" in body
    assert body.count('<tr class="kind-') == PAGE_SIZE


def test_it_lists_the_ledger_operations_with_a_link_to_reconcile(as_operator, lost_write):
    page = as_operator.get(f"/tasks/{lost_write.task.pk}/").content.decode()
    assert "pay-INV-42" in page
    assert f'href="/reconcile/#op-{lost_write.operation.pk}"' in page


def test_it_shows_the_stop_report_with_a_json_download(as_operator, lost_write):
    task = lost_write.task
    page = as_operator.get(f"/tasks/{task.pk}/").content.decode()
    assert "Stop report" in page
    assert f'href="/tasks/{task.pk}/report.json"' in page
    response = as_operator.get(f"/tasks/{task.pk}/report.json")
    assert response.status_code == 200
    assert response["Content-Disposition"] == (
        f'attachment; filename="loopwarden-report-{task.pk}.json"'
    )
    assert json.loads(response.content) == task.report


def test_a_running_task_has_no_report_to_download(as_operator, looping_task):
    assert as_operator.get(f"/tasks/{looping_task.pk}/report.json").status_code == 404


def test_a_running_task_polls_its_state(as_operator, looping_task):
    page = as_operator.get(f"/tasks/{looping_task.pk}/").content.decode()
    assert f'hx-get="/tasks/{looping_task.pk}/live/?state=RUNNING"' in page
    live = as_operator.get(f"/tasks/{looping_task.pk}/live/?state=RUNNING", **HTMX)
    assert live.content.decode().lstrip().startswith('<section id="task-live"')


def test_a_running_task_keeps_its_latest_trace_window_fresh(as_operator, looping_task, agent):
    page = as_operator.get(f"/tasks/{looping_task.pk}/").content.decode()
    assert f'hx-get="/tasks/{looping_task.pk}/timeline/" hx-trigger="every 5s"' in page
    tool_step(agent, looping_task.pk, "fresh_tool", {"n": 1})
    poll = as_operator.get(f"/tasks/{looping_task.pk}/timeline/", **HTMX).content.decode()
    assert "fresh_tool" in poll


def test_the_page_reloads_when_the_state_moved_on(as_operator, stopped_task):
    live = as_operator.get(f"/tasks/{stopped_task.pk}/live/?state=RUNNING", **HTMX)
    assert live["HX-Refresh"] == "true"


def test_a_stopped_task_does_not_poll(as_operator, stopped_task):
    page = as_operator.get(f"/tasks/{stopped_task.pk}/").content.decode()
    assert "/live/?state=" not in page


def test_an_unknown_task_is_404(as_operator, db):
    assert as_operator.get(f"/tasks/{uuid.uuid4()}/").status_code == 404
    assert as_operator.get("/tasks/not-a-uuid/").status_code == 404


def _add_trace_rows(task, count: int) -> None:
    """Many trace rows, written directly: the page's cost is what is measured, not the guard."""
    seq = task.trace_seq
    model_rows, tool_rows = [], []
    for index in range(count):
        seq += 1
        if index % 2:
            model_rows.append(ModelCall(task=task, seq=seq, phase=1, decision="ALLOW", model="m"))
        else:
            tool_rows.append(ToolCall(task=task, seq=seq, phase=1, tool="t", effect="read",
                                      args={"i": index % 7}, fingerprint=f"{index % 7:064x}",
                                      decision="EXECUTE", result_kind="SUCCESS"))  # fmt: skip
    ModelCall.objects.bulk_create(model_rows)
    ToolCall.objects.bulk_create(tool_rows)
    task.trace_seq = seq
    task.save(update_fields=["trace_seq"])


def test_the_timeline_masks_secrets_by_one_policy(as_operator, agent):
    from agents.models import ToolPolicy
    from agents.services import runner, tasks

    ToolPolicy.objects.create(tool="login", redact_fields=["account.number"])
    task = tasks.task_create(agent=agent, goal="log in")
    args = {"Private_Key": "pk-1", "X-Session": "se-2", "AccountNumber": "an-3",
            "note": "Bearer abcdefghijklmnopqrstuvwxyz", "user": "ann"}  # fmt: skip
    runner.tool_call_request(task_id=task.pk, agent=agent, tool="login", args=args,
                             effect="read")  # fmt: skip

    page = as_operator.get(f"/tasks/{task.pk}/").content.decode()

    for leak in ("pk-1", "se-2", "an-3", "abcdefghijklmnop"):
        assert leak not in page, leak
    assert "ann" in page
