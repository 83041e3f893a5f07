"""The task page says, for a result novelty judged new, which keys made it new (issue 13)."""

from __future__ import annotations

import pytest

from agents.guard import terms
from agents.models import LimitProfile
from agents.services import runner, tasks
from tests.conftest import allow_profiles

pytestmark = pytest.mark.django_db


def answered(agent, task_id, args, **result):
    _, call, _ = runner.tool_call_request(
        task_id=task_id, agent=agent, tool="list_invoices", args=args, effect=terms.READ
    )
    runner.tool_call_result(
        task_id=task_id, agent=agent, tool_call_id=call.pk, result=terms.ToolResult(**result)
    )


def test_the_trace_names_the_keys_that_made_each_result_new(agent, as_operator):
    LimitProfile.objects.update_or_create(name="novelty", defaults={"progress_mode": "novelty"})
    allow_profiles(agent.name, "novelty")
    task = tasks.task_create(agent=agent, goal="List invoices", profile="novelty")
    page_one = {"items": [1, 2], "next_cursor": "c2", "total": 4, "fetched_at": "10:00:01"}
    page_two = {"items": [3, 4], "next_cursor": None, "total": 4, "fetched_at": "10:00:02"}
    answered(agent, task.pk, {"cursor": "c1"}, kind=terms.SUCCESS, data=page_one)
    answered(agent, task.pk, {"cursor": "c2"}, kind=terms.SUCCESS, data=page_two)
    answered(agent, task.pk, {"cursor": "c2"}, kind=terms.SUCCESS, data=page_two)  # not new
    answered(agent, task.pk, {"cursor": "c3"}, kind=terms.SUCCESS, data_hash="client-hash")

    page = as_operator.get(f"/tasks/{task.pk}/").content.decode()

    news = [part.split("</small>")[0] for part in page.split('<small class="novel"')[1:]]
    assert len(news) == 3
    assert "<code>items</code>, <code>next_cursor</code>, <code>total</code>" in news[0]
    assert "<code>items</code>, <code>next_cursor</code></small>" in news[1] + "</small>"
    assert "fetched_at" not in "".join(news)
    assert "data hash only" in news[2]
