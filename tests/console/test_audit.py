"""The audit log: every operator action with actor, time, target and reason, filterable."""

from __future__ import annotations

from tests.console.conftest import HTMX


def test_it_lists_operator_actions_with_actor_target_and_reason(as_operator, stopped_task):
    page = as_operator.get("/audit/").content.decode()
    assert "<b>olivia</b>" in page
    assert "asked to stop" in page
    assert "looping" in page
    assert f'href="/tasks/{stopped_task.pk}/"' in page


def test_agent_and_system_events_are_hidden_unless_asked_for(as_operator, stopped_task):
    assert "created the task" not in as_operator.get("/audit/").content.decode()
    assert "created the task" in as_operator.get("/audit/?everyone=on").content.decode()


def test_it_filters_by_action_and_by_person(as_operator, as_admin, stopped_task, agent):
    as_admin.post("/agents/agent-a/pause/", {"pause-agent-a-reason": "night freeze"})
    page = as_operator.get("/audit/?kind=agent_paused").content.decode()
    assert "night freeze" in page and "asked to stop" not in page
    page = as_operator.get("/audit/?actor=olivia").content.decode()
    assert "asked to stop" in page and "night freeze" not in page
    page = as_operator.get("/audit/?agent=agent-a").content.decode()
    assert "night freeze" in page and "asked to stop" in page
    page = as_operator.get(f"/audit/?task={stopped_task.pk}").content.decode()
    assert "asked to stop" in page and "night freeze" not in page


def test_htmx_gets_only_the_rows(as_operator, stopped_task):
    body = as_operator.get("/audit/?kind=stop_requested", **HTMX).content.decode()
    assert body.lstrip().startswith('<div id="audit-rows"')


def test_a_bad_filter_is_reported_not_crashed(as_operator, db):
    response = as_operator.get("/audit/?task=not-a-uuid&page=zz")
    assert response.status_code == 200
    assert "Enter a valid UUID." in response.content.decode()
