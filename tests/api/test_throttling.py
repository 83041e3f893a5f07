"""API throttling per token: past API_THROTTLE_RATE a call answers 429 THROTTLED, Retry-After."""

from __future__ import annotations

import pytest

from agents.api.throttles import TokenRateThrottle

from .helpers import new_task, row_counts

pytestmark = pytest.mark.django_db


@pytest.fixture
def clock(monkeypatch):
    """The throttle's clock, set by the test; it starts at the start of a minute."""
    now = {"t": 60 * 20_000.0}
    monkeypatch.setattr(TokenRateThrottle, "timer", lambda self: now["t"])
    return now


def test_past_the_rate_a_call_answers_429_throttled_with_retry_after(agent_api, settings, clock):
    settings.API_THROTTLE_RATE = "3/min"
    task = new_task(agent_api)  # 1
    assert agent_api.get(f"tasks/{task['id']}").status_code == 200  # 2
    clock["t"] += 15
    assert agent_api.get("tasks").status_code == 200  # 3
    before = row_counts()

    response = agent_api.post(f"tasks/{task['id']}/model-calls", {"model": "m"})  # 4

    assert response.status_code == 429
    assert response.body["error"]["code"] == "THROTTLED"
    assert response["Retry-After"] == "45"  # the rest of the minute
    assert row_counts() == before  # refused before the guard saw it


def test_the_count_is_per_token(agent_api, other_agent_api, settings, clock):
    settings.API_THROTTLE_RATE = "2/min"
    for _ in range(2):
        assert agent_api.get("tasks").status_code == 200
    assert agent_api.get("tasks").status_code == 429

    assert other_agent_api.get("tasks").status_code == 200


def test_the_next_window_lets_calls_through_again(agent_api, settings, clock):
    settings.API_THROTTLE_RATE = "2/min"
    for _ in range(2):
        agent_api.get("tasks")
    throttled = agent_api.get("tasks")
    assert throttled.status_code == 429

    clock["t"] += int(throttled["Retry-After"])

    assert agent_api.get("tasks").status_code == 200


def test_unauthenticated_calls_answer_401_not_429(client, agent_api, settings, clock):
    settings.API_THROTTLE_RATE = "1/min"
    for _ in range(3):
        response = client.get("/api/v1/tasks")
        assert response.status_code == 401


def test_off_turns_the_throttle_off(agent_api, settings, clock):
    settings.API_THROTTLE_RATE = None  # what API_THROTTLE_RATE=off parses to
    for _ in range(5):
        assert agent_api.get("tasks").status_code == 200


def test_the_default_rate_is_far_above_an_agents_loop(agent_api, clock):
    # A tight loop of 300 calls in one second (an agent with no model call between them) is
    # well inside the default.
    for _ in range(300):
        assert agent_api.get("tasks").status_code == 200
