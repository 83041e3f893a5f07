"""A job answered PENDING that the agent starts again instead of polling it (no `job_id`):
each restart draws on the poll budget, so the restarts end at `max_polls`, not at the
execution budget."""

from __future__ import annotations

import pytest

from agents.models import LimitProfile
from tests.conftest import allow_profiles

from .helpers import assert_stopped, get_task, new_task, report, request_tool

pytestmark = pytest.mark.django_db

EXPORT = ("start_export", {"report": "sales"})


def test_restarting_a_pending_job_stops_at_the_poll_budget(agent_api, db):
    LimitProfile.objects.create(name="restarts", max_polls=2, max_tool_executions=20)
    allow_profiles("agent-a", "restarts")
    task = new_task(agent_api, profile="restarts")
    for _ in range(3):  # the start, then two restarts within the poll budget
        asked = request_tool(agent_api, task["id"], *EXPORT)
        assert asked["decision"] == "EXECUTE"
        answer = report(agent_api, task["id"], asked["tool_call"], "PENDING",
                        job_id="export-1", wait_ms=1000)  # fmt: skip
        assert answer["decision"] == "CONTINUE"

    answer = request_tool(agent_api, task["id"], *EXPORT)

    stop_report = assert_stopped(answer, "PARTIAL", "poll_budget", "GUARD_ROUND_LIMIT")
    assert stop_report["usage"]["tool_executions"] == 3
    assert get_task(agent_api, task["id"])["usage"]["polls"] == 2
