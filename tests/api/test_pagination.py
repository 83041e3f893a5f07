"""Lists come a page at a time with a `next` link; following it reaches every row once."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.utils import timezone

from agents.models import Task
from ledger.models import Operation

from .helpers import gate, new_task, request_tool

pytestmark = pytest.mark.django_db


def follow(api, path):
    """Every page of a list, following `next` links."""
    pages = []
    url = path
    while url:
        response = api.get(url)
        assert response.status_code == 200, response.body
        pages.append(response.body)
        url = response.body["next"]
        if url:
            assert url.startswith("http://testserver/api/v1/")
            url = url.removeprefix("http://testserver")
    return pages


def test_it_pages_the_task_list_newest_first(agent_api):
    created = [new_task(agent_api)["id"] for _ in range(5)]

    pages = follow(agent_api, "tasks?limit=2")

    assert [len(page["tasks"]) for page in pages] == [2, 2, 1]
    assert [t["id"] for page in pages for t in page["tasks"]] == created[::-1]
    assert pages[-1]["next"] is None


def test_it_keeps_the_filters_in_the_next_link(agent_api, operator_api):
    for _ in range(3):
        new_task(agent_api)
    stopped = new_task(agent_api)["id"]
    agent_api.post(f"tasks/{stopped}/stop", {"reason": "done"})

    pages = follow(operator_api, "tasks?state=RUNNING&limit=1")

    assert len(pages) == 3
    assert all("state=RUNNING" in (page["next"] or "state=RUNNING") for page in pages)


def test_it_never_cuts_the_operation_list(agent_api):
    task = Task.objects.get(pk=new_task(agent_api)["id"])
    now = timezone.now()
    Operation.objects.bulk_create(
        Operation(
            namespace=task.agent.namespace,
            operation_key=f"key-{n}",
            tool="pay",
            fingerprint="f" * 64,
            state="COMMITTED",
            task=task,
            claimed_at=now + timedelta(seconds=n),
        )  # fmt: skip
        for n in range(501)
    )

    pages = follow(agent_api, "operations?limit=500")

    keys = [op["key"] for page in pages for op in page["operations"]]
    assert len(keys) == 501
    assert keys == [f"key-{n}" for n in range(501)]


def test_it_pages_a_trace_by_calls_and_events(agent_api):
    task = new_task(agent_api)
    for n in range(3):
        gate(agent_api, task["id"])
        request_tool(agent_api, task["id"], "search", {"q": n})

    pages = follow(agent_api, f"tasks/{task['id']}/trace?limit=2")

    calls = [c for page in pages for c in page["calls"]]
    assert [c["seq"] for c in calls] == [1, 2, 3, 4, 5, 6]
    assert len(pages) == 3
    events = [e["id"] for page in pages for e in page["events"]]
    assert events == sorted(set(events)) and events


def test_operators_read_the_audit_log_a_page_at_a_time(agent_api, operator_api):
    tasks = [new_task(agent_api)["id"] for _ in range(3)]
    for task_id in tasks:
        operator_api.post(f"tasks/{task_id}/stop", {"reason": "audit me"})

    pages = follow(operator_api, "audit?kind=task_stopped&limit=2")

    events = [e for page in pages for e in page["events"]]
    assert [e["task"] for e in events] == tasks[::-1]
    assert {e["actor"] for e in events} == {"user:olivia"}
    assert follow(operator_api, "audit?everyone=true")[0]["events"]


def test_agents_may_not_read_the_audit_log(agent_api):
    assert agent_api.get("audit").status_code == 403


@pytest.mark.parametrize(
    "query",
    ["cursor=nonsense", "cursor=", "limit=0", "limit=501", "limit=two", "limit=1.0", "state="],
)
def test_it_refuses_a_bad_cursor_or_limit(agent_api, query):
    response = agent_api.get(f"tasks?{query}")

    assert response.status_code == 400, response.body
    assert set(response.body["error"]) == {"code", "message", "fields"}


@pytest.mark.parametrize(
    "path", ["operations/abc", "operations/99999999999999999999", "operations/0"]
)
def test_an_id_that_names_no_row_answers_a_json_404(operator_api, path):
    response = operator_api.get(path)

    assert response.status_code == 404
    assert response.body["error"]["code"] == "OPERATION_NOT_FOUND"


def test_an_empty_state_names_no_operation_state(agent_api):
    assert agent_api.get("operations?state=").status_code == 400


def test_a_cursor_from_the_far_future_starts_at_the_top(agent_api):
    task = new_task(agent_api)

    response = agent_api.get("tasks?cursor=738402596422661721.86b8fec0eb4e9a9895271dbe1f79d4e1")

    assert response.status_code == 200
    assert [t["id"] for t in response.body["tasks"]] == [task["id"]]


def test_an_empty_audit_filter_is_no_filter(agent_api, operator_api):
    task = new_task(agent_api)
    operator_api.post(f"tasks/{task['id']}/stop", {"reason": "x"})

    response = operator_api.get("audit?kind=&actor=&agent=")

    assert response.status_code == 200, response.body
    assert "task_stopped" in [e["kind"] for e in response.body["events"]]


def _cursor(link: str) -> str:
    return parse_qs(urlsplit(link).query)["cursor"][0]


def test_a_cursor_of_another_list_is_refused_and_another_agents_shows_only_yours(
    agent_api, other_agent_api, operator_api
):
    mine = [new_task(agent_api)["id"] for _ in range(3)]
    theirs = new_task(other_agent_api)["id"]
    for _ in range(2):
        request_tool(agent_api, mine[0], "search", {"q": _})
    tasks_cursor = _cursor(agent_api.get("tasks?limit=1").body["next"])
    trace_cursor = _cursor(agent_api.get(f"tasks/{mine[0]}/trace?limit=1").body["next"])
    audit_cursor = _cursor(operator_api.get("audit?everyone=true&limit=1").body["next"])

    for path, cursor in (
        ("operations", tasks_cursor), ("audit", tasks_cursor),
        (f"tasks/{mine[0]}/trace", tasks_cursor), ("tasks", trace_cursor),
        ("operations", trace_cursor), ("audit", trace_cursor),
        ("tasks", audit_cursor), (f"tasks/{mine[0]}/trace", audit_cursor),
    ):  # fmt: skip
        response = operator_api.get(f"{path}?cursor={cursor}")
        assert response.status_code == 400, (path, cursor, response.body)
        assert response.body["error"]["fields"] == {"cursor": "Not a cursor of this list."}

    # Agent A's cursor handed to agent B: a place in B's own list, never A's rows.
    pages = follow(other_agent_api, f"tasks?cursor={tasks_cursor}")
    assert {t["id"] for page in pages for t in page["tasks"]} <= {theirs}
    assert other_agent_api.get(f"tasks/{mine[0]}/trace?cursor={trace_cursor}").status_code == 404
