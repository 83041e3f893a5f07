"""What an operator does at 3 a.m., in a real browser against a live server.

The simulated agent is the thin client (loopwarden_client) talking HTTP to the same live
server, exactly as an outside agent would.
"""

from __future__ import annotations

import re

import pytest
from loopwarden_client import TaskStopped
from playwright.sync_api import expect

from agents.models import Task
from tests.browser.conftest import sign_in

pytestmark = pytest.mark.browser

SEARCH = {"query": "loopwarden enterprise price", "api_key": "sk-live-do-not-show"}


def loop_on_search(agent) -> str:
    """The agent plans a search and runs it; no progress; asks again, and again (BLOCK)."""
    task = agent.create_task("Find the enterprise price in the knowledge base", profile="patient")
    gate = agent.gate_model_call(task["id"], model="sim-model", est_prompt_tokens=800)
    agent.report_usage(task["id"], gate["model_call"], prompt_tokens=800, completion_tokens=40,
                       tool_calls=[{"name": "kb_search", "args": SEARCH}])  # fmt: skip
    for _ in range(2):
        asked = agent.request_tool(task["id"], "kb_search", SEARCH)
        assert asked["decision"] == "EXECUTE"
        agent.report_result(task["id"], asked["tool_call"], "SUCCESS", data={"hits": []})
    assert agent.request_tool(task["id"], "kb_search", SEARCH)["decision"] == "BLOCK"
    return task["id"]


def test_an_operator_sees_a_loop_appear_live_and_stops_it(page, console, shot):
    sign_in(page, console.url, "olivia")
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()
    page.evaluate("window.__sameDocument = true")  # gone if the page ever reloads

    task_id = loop_on_search(console.agent)

    # The live table picks the task up by itself.
    row = page.locator("table.tasks tr", has_text="Find the enterprise price")
    expect(row).to_be_visible(timeout=10_000)
    expect(row.locator(".badge")).to_have_text("Running")
    assert page.evaluate("window.__sameDocument") is True
    shot("dashboard")

    # Filters live in the URL and survive the refresh.
    page.select_option("#id_state", "RUNNING")
    expect(page).to_have_url(re.compile(r"state=RUNNING"))
    expect(row).to_be_visible()
    page.wait_for_timeout(3500)  # one refresh later, still filtered
    expect(page.locator("#id_state")).to_have_value("RUNNING")
    expect(row).to_be_visible()

    row.get_by_role("link").click()
    expect(page).to_have_url(f"{console.url}/tasks/{task_id}/")
    timeline = page.locator("#timeline")
    expect(timeline.locator(".mark.repeat", has_text="repeat ×2")).to_be_visible()
    expect(timeline.locator(".mark.repeat", has_text="repeat ×3")).to_be_visible()
    expect(timeline.locator(".decision", has_text="BLOCK")).to_be_visible()
    expect(timeline).not_to_contain_text("sk-live-do-not-show")
    expect(timeline).to_contain_text('"api_key": "•••"')
    shot("task-detail")

    # Stop: open the confirmation, a reason is required.
    page.get_by_text("Stop this task…").click()
    reason = page.get_by_label("Reason (required)")
    page.get_by_role("button", name="Yes, stop the task").click()
    assert reason.evaluate("field => field.validity.valueMissing")  # the browser asks first
    reason.fill("   ")  # passes the browser, not the server
    page.get_by_role("button", name="Yes, stop the task").click()
    expect(page.locator("#id_reason_error")).to_have_text("Say why you are stopping the task.")
    assert Task.objects.get(pk=task_id).state == "RUNNING"
    page.evaluate("window.__sameDocument = true")
    page.get_by_label("Reason (required)").fill("Searching the same thing over and over")
    page.get_by_role("button", name="Yes, stop the task").click()
    expect(page.locator("#task-live .badge.big")).to_have_text("Stopped")
    expect(page.locator("#task-live")).to_contain_text("An operator stopped the task.")
    assert page.evaluate("window.__sameDocument") is True  # updated in place
    expect(page.locator("#history")).to_contain_text("Searching the same thing over and over")
    shot("task-stopped")

    # The agent's next call is answered STOP, with the report.
    with pytest.raises(TaskStopped) as stopped:
        console.agent.gate_model_call(task_id, model="sim-model")
    assert (stopped.value.state, stopped.value.reason) == ("STOPPED", "operator_stop")


def pay_and_lose_the_answer(agent) -> str:
    task = agent.create_task("Pay invoice INV-42 (EUR 1250.00) exactly once")
    asked = agent.request_tool(task["id"], "get_invoice", {"invoice": "INV-42"})
    loaded = {"revision": 1, "done": False, "milestone": "invoice_loaded"}
    agent.report_result(
        task["id"], asked["tool_call"], "SUCCESS", data={"amount": "1250.00"}, evidence=loaded
    )
    pay = agent.request_tool(task["id"], "pay_invoice",
                             {"invoice": "INV-42", "amount": "1250.00", "card": "4111"},
                             effect="write", operation_key="pay-INV-42")  # fmt: skip
    assert pay["decision"] == "EXECUTE"
    with pytest.raises(TaskStopped) as stopped:  # the payments API timed out: did it pay?
        agent.report_result(task["id"], pay["tool_call"], "NO_RESULT", error="read timeout")
    assert stopped.value.reason == "unknown_commit"
    return task["id"]


def test_a_lost_write_is_reconciled_and_the_task_resumed_with_a_grant(page, console, shot):
    task_id = pay_and_lose_the_answer(console.agent)
    sign_in(page, console.url, "olivia")
    expect(page.locator("nav a", has_text="Reconcile")).to_contain_text("1")

    # The task page says what must happen first, and links to it.
    page.goto(f"{console.url}/tasks/{task_id}/")
    expect(page.locator("#actions")).to_contain_text("Reconcile first.")
    expect(page.get_by_role("button", name="Resume task")).to_be_disabled()
    page.locator("#actions").get_by_role("link", name="pay-INV-42").click()

    expect(page).to_have_url(re.compile(r"/reconcile/#op-\d+$"))
    card = page.locator("article.op-card", has_text="pay-INV-42")
    expect(card).to_contain_text("pay_invoice")
    expect(card).to_contain_text("Pay invoice INV-42")
    expect(card).to_contain_text('"card": "•••"')
    shot("reconcile-queue")

    page.evaluate("window.__sameDocument = true")
    card.get_by_label("Committed: it happened").check()
    card.get_by_label("Result (optional)").fill('{"payment_id": "PAY-778"}')
    card.get_by_label("Note (required)").fill("PSP dashboard shows PAY-778 captured at 03:12")
    card.get_by_role("button", name="Record verdict").click()
    expect(card).to_contain_text("Recorded COMMITTED by olivia")
    assert page.evaluate("window.__sameDocument") is True

    card.get_by_role("link", name="Go to the task to resume it →").click()
    history = page.locator("#history")
    expect(history).to_contain_text("olivia")
    expect(history).to_contain_text("COMMITTED")
    expect(history).to_contain_text("PSP dashboard shows PAY-778 captured at 03:12")

    before = Task.objects.get(pk=task_id)
    page.get_by_label("Reason (required)").fill("Payment confirmed; let it send the receipt")
    page.get_by_role("textbox", name="Tool executions").fill("2")
    page.get_by_role("button", name="Resume task").click()
    expect(page.locator("#task-live .badge.big")).to_have_text("Running")
    expect(page.locator("#phases")).to_contain_text("Resumed by olivia")
    after = Task.objects.get(pk=task_id)
    assert after.phase == 2
    assert after.tool_executions == before.tool_executions == 2  # usage stays
    assert after.limits["max_tool_executions"] == before.limits["max_tool_executions"] + 2
    expect(page.locator(".bar-row", has_text="Tool executions")).to_contain_text("2 / 22")
    shot("task-resumed")

    # The agent asks to pay again: the committed result comes back, nothing is paid twice.
    again = console.agent.request_tool(
        task_id, "pay_invoice", {"invoice": "INV-42", "amount": "1250.00", "card": "4111"},
        effect="write", operation_key="pay-INV-42",
    )  # fmt: skip
    assert (again["decision"], again["result"]) == ("REUSE", {"payment_id": "PAY-778"})


def test_an_operator_cannot_change_a_limit(page, console):
    task = console.agent.create_task("Summarise the incident")
    sign_in(page, console.url, "olivia")
    page.goto(f"{console.url}/tasks/{task['id']}/")
    expect(page.get_by_role("link", name="Change this task's limits →")).to_have_count(0)
    expect(page.locator("nav.nav")).not_to_contain_text("Limits")

    response = page.goto(f"{console.url}/tasks/{task['id']}/limits/")
    assert response.status == 403
    expect(page.get_by_role("heading", name="Not allowed")).to_be_visible()

    # Even a hand-made POST with a valid CSRF token is refused.
    page.goto(f"{console.url}/tasks/{task['id']}/")
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    answer = page.request.post(f"{console.url}/tasks/{task['id']}/limits/",
                               form={"max_model_calls": "500"},
                               headers={"X-CSRFToken": csrf, "Referer": console.url})  # fmt: skip
    assert answer.status == 403
    assert Task.objects.get(pk=task["id"]).limits["max_model_calls"] == 20

    # An admin may.
    page.context.clear_cookies()
    sign_in(page, console.url, "adam")
    page.goto(f"{console.url}/tasks/{task['id']}/limits/")
    page.get_by_label("Model calls").fill("30")
    page.get_by_label("Reason").fill("long incident")
    page.get_by_role("button", name="Save limits").click()
    expect(page.locator("#limits-form")).to_contain_text("Model calls 20 → 30")
    assert Task.objects.get(pk=task["id"]).limits["max_model_calls"] == 30


def test_signed_out_visitors_go_to_sign_in(page, console):
    page.goto(f"{console.url}/reconcile/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/reconcile/"))
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()


def test_the_daily_report_charts_the_trips_the_agent_caused(page, console, shot):
    from django.utils import timezone

    from agents.services.rollups import rollup_day

    loop_on_search(console.agent)  # BLOCK, then the next identical request stops it
    task = console.agent.list_tasks()[0]
    with pytest.raises(TaskStopped):
        console.agent.request_tool(task["id"], "kb_search", SEARCH)
    today = timezone.now().date()  # rollups are per UTC day
    rollup_day(day=today)

    sign_in(page, console.url, "olivia")
    page.get_by_role("link", name="Reports").click()
    expect(page.get_by_role("heading", name="Daily report")).to_be_visible()
    today_bar = page.locator(f'svg rect.bar[data-day="{today.isoformat()}"]')
    expect(today_bar).to_have_attribute("data-trips", "1")
    expect(page.locator("main")).to_contain_text("GUARD_LOOP_DETECTED")
    shot("daily-report")

    csv = page.request.get(f"{console.url}/reports/daily.csv")
    assert csv.status == 200
    assert "support-bot" in csv.text()


def test_a_task_that_waited_past_its_deadline_is_resumed_with_the_proposed_seconds(
    page, console, shot
):
    from datetime import timedelta

    from django.utils import timezone

    task_id = console.agent.create_task("Summarise the incident for the customer")["id"]
    console.agent.stop(task_id, reason="waiting for the customer's answer")
    created = timezone.now() - timedelta(hours=3)  # it then waited three hours for a person
    Task.objects.filter(pk=task_id).update(
        created_at=created,
        ended_at=created + timedelta(seconds=100),
        deadline_at=created + timedelta(seconds=900),
    )

    sign_in(page, console.url, "adam")
    page.goto(f"{console.url}/tasks/{task_id}/")
    warning = page.locator("#actions .deadline-passed")
    expect(warning).to_contain_text("The deadline passed 2 h 45 min ago")
    seconds = page.get_by_role("textbox", name="Seconds")
    proposed = int(seconds.input_value())
    assert proposed > 3 * 3600 - 900
    shot("resume-past-deadline")

    page.get_by_label("Reason (required)").fill("The customer answered; finish the summary")
    page.get_by_role("button", name="Resume task").click()
    expect(page.locator("#task-live .badge.big")).to_have_text("Running")
    # Not dead on arrival: the agent's next call is allowed, not stopped on its deadline.
    assert console.agent.gate_model_call(task_id, model="sim-model")["decision"] == "ALLOW"
