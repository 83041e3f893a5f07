"""no_progress: args change every time, the verified business state does not move."""

from __future__ import annotations

import pytest

from tests.conftest import allow_profiles

from .helpers import (
    assert_stop_is_sticky,
    assert_stopped,
    evidence,
    execute,
    get_task,
    new_task,
    report,
    request_tool,
)

pytestmark = pytest.mark.django_db


def test_it_stops_after_three_steps_without_verified_progress(agent_api):
    task = new_task(agent_api)
    execute(agent_api, task["id"], "search", {"q": "invoice 1"})
    execute(agent_api, task["id"], "search", {"q": "invoice 2"})
    asked = request_tool(agent_api, task["id"], "search", {"q": "invoice 3"})

    answer = report(agent_api, task["id"], asked["tool_call"], "SUCCESS", data={"hits": []})

    stop_report = assert_stopped(answer, "PARTIAL", "no_progress", "GUARD_LOOP_DETECTED")
    assert stop_report["usage"]["tool_executions"] == 3
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_resets_the_count_on_verified_progress(agent_api):
    task = new_task(agent_api)
    execute(agent_api, task["id"], "search", {"q": "1"})
    execute(agent_api, task["id"], "search", {"q": "2"})
    execute(
        agent_api,
        task["id"],
        "search",
        {"q": "3"},
        result={"kind": "SUCCESS", "evidence": evidence(1)},
    )
    execute(agent_api, task["id"], "search", {"q": "4"})

    body = get_task(agent_api, task["id"])

    assert body["state"] == "RUNNING"
    assert body["revision"] == 1
    assert body["stagnant"] == 1


def test_it_counts_new_data_as_progress_in_novelty_mode(agent_api, db):
    from agents.models import LimitProfile

    # Built in by a data migration; a transactional test before this one may have flushed it.
    LimitProfile.objects.get_or_create(name="novelty", defaults={"progress_mode": "novelty"})
    allow_profiles("agent-a", "novelty")
    task = new_task(agent_api, profile="novelty")
    for n in range(5):
        execute(
            agent_api,
            task["id"],
            "search",
            {"q": f"invoice {n}"},
            result={"kind": "SUCCESS", "data": {"hits": [n]}},
        )
    execute(
        agent_api,
        task["id"],
        "search",
        {"q": "again"},
        result={"kind": "SUCCESS", "data": {"hits": [4]}},
    )

    body = get_task(agent_api, task["id"])

    assert body["state"] == "RUNNING"
    assert body["stagnant"] == 1
