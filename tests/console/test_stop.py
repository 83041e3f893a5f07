"""Stop: a confirmation, a required reason, the page updated in place, the agent told STOP."""

from __future__ import annotations

import json

import pytest

from agents.errors import NotFound  # noqa: F401  (documents what the guard raises)
from agents.guard import terms
from agents.models import Event
from agents.services import runner
from tests.console.conftest import HTMX


def test_the_stop_button_asks_for_confirmation_and_a_reason(as_operator, looping_task):
    page = as_operator.get(f"/tasks/{looping_task.pk}/").content.decode()
    assert '<details class="confirm"' in page
    assert "Stop this task…" in page
    assert "Yes, stop the task" in page
    assert f'action="/tasks/{looping_task.pk}/stop/"' in page


def test_a_plain_post_stops_the_task_and_redirects(as_operator, looping_task, agent):
    response = as_operator.post(f"/tasks/{looping_task.pk}/stop/", {"reason": "looping on search"})
    assert response.status_code == 303
    assert response["Location"] == f"/tasks/{looping_task.pk}/"
    looping_task.refresh_from_db()
    assert (looping_task.state, looping_task.reason) == (terms.STOPPED, "operator_stop")
    event = Event.objects.get(task=looping_task, kind="stop_requested")
    assert (event.actor, event.reason) == ("user:olivia", "looping on search")
    page = as_operator.get(response["Location"]).content.decode()
    assert "Task stopped" in page  # the message after the redirect
    # the agent's next call is answered STOP
    _, _, outcome = runner.tool_call_request(
        task_id=looping_task.pk, agent=agent, tool="kb_search", args={"q": 1}, effect="read"
    )
    assert outcome.decision == terms.STOP


def test_htmx_swaps_the_task_in_place(as_operator, looping_task):
    response = as_operator.post(f"/tasks/{looping_task.pk}/stop/", {"reason": "loop"}, **HTMX)
    body = response.content.decode()
    assert response.status_code == 200
    assert body.lstrip().startswith('<div id="task-page"')
    assert "<html" not in body
    assert "An operator stopped the task." in body
    assert "lw:toast" in response["HX-Trigger"]


def test_a_missing_reason_shows_the_error_next_to_the_field_and_changes_nothing(
    as_operator, looping_task
):
    events = Event.objects.count()
    response = as_operator.post(f"/tasks/{looping_task.pk}/stop/", {"reason": "  "})
    assert response.status_code == 422
    body = response.content.decode()
    assert 'id="id_reason_error">Say why you are stopping the task.' in body
    assert '<details class="confirm" open>' in body
    looping_task.refresh_from_db()
    assert looping_task.state == terms.RUNNING
    assert Event.objects.count() == events


def test_htmx_gets_the_error_in_place_too(as_operator, looping_task):
    response = as_operator.post(f"/tasks/{looping_task.pk}/stop/", {}, **HTMX)
    assert response.status_code == 422
    assert "Say why you are stopping the task." in response.content.decode()
    assert "<html" not in response.content.decode()


def test_stopping_a_stopped_task_changes_nothing_and_says_so(as_operator, stopped_task):
    before = (stopped_task.state, stopped_task.reason, stopped_task.report)
    response = as_operator.post(f"/tasks/{stopped_task.pk}/stop/", {"reason": "again"})
    assert response.status_code == 303
    stopped_task.refresh_from_db()
    assert (stopped_task.state, stopped_task.reason, stopped_task.report) == before
    page = as_operator.get(response["Location"]).content.decode()
    assert "had already ended" in page and "nothing changed" in page
    assert "Task stopped." not in page


def test_a_stop_from_a_stale_tab_is_told_the_task_had_already_ended(as_operator, looping_task):
    """Two tabs on one running task: the second stop arrives after the first took effect."""
    as_operator.post(f"/tasks/{looping_task.pk}/stop/", {"reason": "tab A"}, **HTMX)

    response = as_operator.post(f"/tasks/{looping_task.pk}/stop/", {"reason": "tab B"}, **HTMX)

    assert response.status_code == 200
    toast = json.loads(response["HX-Trigger"])["lw:toast"]
    assert "had already ended" in toast["message"]
    assert toast["kind"] == "info"


@pytest.mark.parametrize("client_name", ["as_outsider", "as_admin"])
def test_who_may_stop(request, looping_task, client_name):
    client = request.getfixturevalue(client_name)
    response = client.post(f"/tasks/{looping_task.pk}/stop/", {"reason": "x"})
    looping_task.refresh_from_db()
    if client_name == "as_outsider":
        assert response.status_code == 403
        assert looping_task.state == terms.RUNNING
    else:
        assert response.status_code == 303
        assert looping_task.state == terms.STOPPED
