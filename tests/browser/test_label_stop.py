"""Labelling a breaker trip in a real browser: the button's own value reaches the server over
htmx (a form with two submit buttons), the page swaps in place and says the label."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agents.models import Agent, Event, Task
from tests.browser.conftest import sign_in
from tests.console.conftest import tripped

pytestmark = pytest.mark.browser


def test_an_operator_labels_a_trip_a_false_stop_then_clears_it(page, console):
    task = tripped(Agent.objects.get(name="support-bot"), "Find the price, again and again")

    sign_in(page, console.url, "olivia")
    page.goto(f"{console.url}/tasks/{task.pk}/")
    page.evaluate("window.__kept = 'same page'")
    labels = page.locator("form.label-stop")

    labels.get_by_role("button", name="False stop").click()
    expect(labels).to_contain_text("Labelled: false stop")
    assert Task.objects.get(pk=task.pk).loop_label == "false_stop"

    page.locator("form.label-stop").get_by_role("button", name="Clear label").click()
    expect(page.locator("form.label-stop")).not_to_contain_text("Labelled:")
    assert Task.objects.get(pk=task.pk).loop_label == ""
    assert Event.objects.filter(task=task, kind="stop_labelled").count() == 2
    assert page.evaluate("window.__kept") == "same page"
