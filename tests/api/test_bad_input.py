"""Bad envelopes answer 400 {"error": {"code", "message", "fields"}} and change nothing."""

from __future__ import annotations

import json

import pytest

from .helpers import gate, new_task, request_tool, row_counts, snapshot

pytestmark = pytest.mark.django_db

NOT_JSON = object()


@pytest.fixture
def running(agent_api):
    """A task with an ALLOWed model call and an EXECUTE'd tool call, both still open."""
    task = new_task(agent_api)
    model_call = gate(agent_api, task["id"])["model_call"]
    tool_call = request_tool(agent_api, task["id"], "search", {"q": "x"})["tool_call"]
    return {"id": task["id"], "mc": model_call, "tc": tool_call}


def send(api, path, body):
    if body is NOT_JSON:
        return api.post(path, raw="{goal: not json")
    if isinstance(body, str):
        return api.post(path, raw=body)
    return api.post(path, body)


def assert_bad_request(response):
    assert response.status_code == 400, response.body
    error = response.body["error"]
    assert set(error) == {"code", "message", "fields"}
    assert error["code"] and error["message"]
    assert isinstance(error["fields"], dict)
    return error


BAD_TASKS = [
    pytest.param(NOT_JSON, id="not json"),
    pytest.param("[]", id="a list"),
    pytest.param("null", id="null"),
    pytest.param({}, id="missing goal"),
    pytest.param({"goal": 42}, id="int for goal"),
    pytest.param({"goal": "x", "limits": ["max_model_calls", 5]}, id="list for limits"),
    pytest.param({"goal": "x", "limits": {"max_model_calls": "5"}}, id="string for int limit"),
    pytest.param({"goal": "x", "limits": {"max_model_calls": True}}, id="bool for int limit"),
    pytest.param({"goal": "x", "limits": {"max_tasks_per_trigger": 1}}, id="profile-only limit"),
    pytest.param({"goal": "x", "limits": {"max_calls": 1}}, id="unknown limit"),
    pytest.param({"goal": "x", "priority": "high"}, id="unknown field"),
    pytest.param({"goal": "x", "trigger_key": 7}, id="int for trigger_key"),
]


@pytest.mark.parametrize("body", BAD_TASKS)
def test_it_refuses_a_bad_task_and_creates_nothing(agent_api, body):
    before = row_counts()

    assert_bad_request(send(agent_api, "tasks", body))

    assert row_counts() == before


def test_it_names_the_offending_fields(agent_api):
    error = assert_bad_request(agent_api.post("tasks", {"goal": 1, "colour": "red"}))

    assert "colour" in error["fields"]
    malformed = assert_bad_request(agent_api.post("tasks", raw="{oops"))
    assert malformed["code"] == "MALFORMED_JSON"


RUNNER_CASES = [
    ("model-calls", NOT_JSON),
    ("model-calls", {"est_prompt_tokens": "100"}),
    ("model-calls", {"est_prompt_tokens": True}),
    ("model-calls", {"est_prompt_tokens": 1.5}),
    ("model-calls", {"max_output_tokens": -1}),
    ("model-calls", {"model": ["gpt"]}),
    ("model-calls", {"temperature": 0}),
    ("usage", NOT_JSON),
    ("usage", {"prompt_tokens": 10}),
    ("usage", {"prompt_tokens": "10", "completion_tokens": 5}),
    ("usage", {"prompt_tokens": 10, "completion_tokens": False}),
    ("usage", {"prompt_tokens": 10, "completion_tokens": 5, "tool_calls": {"name": "x"}}),
    ("usage", {"prompt_tokens": 10, "completion_tokens": 5, "tool_calls": [{"args": {}}]}),
    (
        "usage",
        {"prompt_tokens": 10, "completion_tokens": 5, "tool_calls": [{"name": "x", "args": [1]}]},
    ),
    ("usage", {"prompt_tokens": 10, "completion_tokens": 5, "cost": 1}),
    ("tool-calls", NOT_JSON),
    ("tool-calls", {"args": {}, "effect": "read"}),
    ("tool-calls", {"tool": "search", "effect": "read"}),
    ("tool-calls", {"tool": "search", "args": {}}),
    ("tool-calls", {"tool": "search", "args": ["q", "x"], "effect": "read"}),
    ("tool-calls", {"tool": "search", "args": "q=x", "effect": "read"}),
    ("tool-calls", {"tool": "search", "args": {}, "effect": "delete"}),
    ("tool-calls", {"tool": 5, "args": {}, "effect": "read"}),
    ("tool-calls", {"tool": "send", "args": {}, "effect": "write", "operation_key": 5}),
    ("tool-calls", {"tool": "search", "args": {}, "effect": "read", "model_call": True}),
    ("tool-calls", {"tool": "search", "args": {}, "effect": "read", "model_call": "1"}),
    ("tool-calls", {"tool": "search", "args": {}, "effect": "read", "retry": True}),
    ("result", NOT_JSON),
    ("result", {}),
    ("result", {"kind": 1}),
    ("result", {"kind": "RETRYABLE", "wait_ms": "100"}),
    ("result", {"kind": "RETRYABLE", "wait_ms": 100, "attempts": True}),
    ("result", {"kind": "RETRYABLE", "wait_ms": 100, "attempts": 0}),
    ("result", {"kind": "SUCCESS", "duration_ms": "5"}),
    ("result", {"kind": "SUCCESS", "error": 500}),
    ("result", {"kind": "SUCCESS", "committed": True}),
    ("finish", NOT_JSON),
    ("finish", {"answer": 42}),
    ("finish", {"done": True}),
    ("stop", NOT_JSON),
    ("stop", {"reason": 42}),
    ("stop", {"request_id": ["a"]}),
    ("stop", {"force": True}),
]


def runner_path(running, endpoint):
    base = f"tasks/{running['id']}"
    return {
        "model-calls": f"{base}/model-calls",
        "usage": f"{base}/model-calls/{running['mc']}/usage",
        "tool-calls": f"{base}/tool-calls",
        "result": f"{base}/tool-calls/{running['tc']}/result",
        "finish": f"{base}/finish",
        "stop": f"{base}/stop",
    }[endpoint]


@pytest.mark.parametrize(
    ("endpoint", "body"),
    RUNNER_CASES,
    ids=[f"{e} {'not json' if b is NOT_JSON else json.dumps(b)}" for e, b in RUNNER_CASES],
)
def test_it_refuses_a_bad_runner_envelope_and_changes_nothing(agent_api, running, endpoint, body):
    before, counts = snapshot(agent_api, running["id"]), row_counts()

    assert_bad_request(send(agent_api, runner_path(running, endpoint), body))

    assert snapshot(agent_api, running["id"]) == before
    assert row_counts() == counts


TOO_BIG = 2**31  # one past what a PositiveIntegerField holds
ABSURD = 10**20  # past even a 64-bit column

OUT_OF_RANGE_CASES = [
    ("model-calls", {"est_prompt_tokens": TOO_BIG}),
    ("model-calls", {"max_output_tokens": ABSURD}),
    ("usage", {"prompt_tokens": TOO_BIG, "completion_tokens": 1}),
    ("usage", {"prompt_tokens": 1, "completion_tokens": ABSURD}),
    ("tool-calls", {"tool": "search", "args": {}, "effect": "read", "model_call": ABSURD}),
    ("result", {"kind": "RETRYABLE", "wait_ms": ABSURD}),
    ("result", {"kind": "RETRYABLE", "wait_ms": 100, "attempts": TOO_BIG}),
    ("result", {"kind": "SUCCESS", "duration_ms": TOO_BIG}),
]


@pytest.mark.parametrize(
    ("endpoint", "body"),
    OUT_OF_RANGE_CASES,
    ids=[f"{e} {json.dumps(b)}" for e, b in OUT_OF_RANGE_CASES],
)
def test_it_refuses_a_number_too_large_to_store_and_changes_nothing(
    agent_api, running, endpoint, body
):
    before, counts = snapshot(agent_api, running["id"]), row_counts()

    error = assert_bad_request(send(agent_api, runner_path(running, endpoint), body))

    assert error["code"] == "INVALID_FIELDS"
    assert snapshot(agent_api, running["id"]) == before
    assert row_counts() == counts


def test_it_refuses_a_grant_too_large_to_store(agent_api, operator_api, running):
    operator_api.post(f"tasks/{running['id']}/stop", {"reason": "halt"})
    before = snapshot(agent_api, running["id"])

    response = operator_api.post(
        f"tasks/{running['id']}/resume", {"reason": "x", "grant": {"seconds": ABSURD}}
    )

    assert assert_bad_request(response)["fields"].keys() == {"grant.seconds"}
    assert snapshot(agent_api, running["id"]) == before


INT_MAX = 2**31 - 1  # the largest grant of a count the envelope takes


@pytest.mark.parametrize(
    ("limits", "grant", "field"),
    [({}, {"retries": INT_MAX}, "grant.retries"),
     ({"max_model_calls": INT_MAX}, {"model_calls": 1}, "grant.model_calls"),
     ({"deadline_seconds": INT_MAX}, {"seconds": 1, "tool_requests": 1}, "grant.seconds")],
    ids=["retries", "model_calls", "seconds"],
)  # fmt: skip
def test_it_refuses_a_grant_that_would_raise_a_limit_past_its_largest_value(
    agent_api, admin_api, running, limits, grant, field
):
    """Each amount fits the envelope, the limit it raises would not: a bad grant is a 400
    BAD_GRANT naming the dimension (docs/API.md), not a 409 conflict, and changes nothing."""
    if limits:
        assert admin_api.patch(f"tasks/{running['id']}/limits", limits).status_code == 200
    admin_api.post(f"tasks/{running['id']}/stop", {"reason": "halt"})
    before = snapshot(agent_api, running["id"])

    response = admin_api.post(f"tasks/{running['id']}/resume", {"reason": "x", "grant": grant})

    error = assert_bad_request(response)
    assert error["code"] == "BAD_GRANT"
    assert set(error["fields"]) == {field}
    assert snapshot(agent_api, running["id"]) == before


def test_it_refuses_a_body_that_is_not_json_media(agent_api, running):
    before, counts = snapshot(agent_api, running["id"]), row_counts()

    response = agent_api.client.post(
        f"/api/v1/tasks/{running['id']}/model-calls",
        "est_prompt_tokens=5",
        content_type="text/plain",
        HTTP_AUTHORIZATION=f"Bearer {agent_api.token}",
    )

    assert response.status_code == 415
    assert response.json()["error"]["code"] == "UNSUPPORTED_MEDIA_TYPE"
    assert snapshot(agent_api, running["id"]) == before
    assert row_counts() == counts


@pytest.mark.parametrize("charset", ["rot13", "zlib", "bz2", "hex", "base64"])
def test_it_refuses_a_charset_that_is_no_text_encoding_and_changes_nothing(
    agent_api, running, charset
):
    """Python knows these codecs, but they turn bytes into bytes, not text: the body is not JSON
    text in any encoding. A 415 in the envelope, never a 500 from the decoder."""
    before, counts = snapshot(agent_api, running["id"]), row_counts()

    response = agent_api.client.generic(
        "POST",
        f"/api/v1/tasks/{running['id']}/model-calls",
        b'{"est_prompt_tokens": 5}',
        content_type=f"application/json; charset={charset}",
        HTTP_AUTHORIZATION=f"Bearer {agent_api.token}",
    )

    assert response.status_code == 415, response.content[:300]
    assert response.json()["error"]["code"] == "UNSUPPORTED_MEDIA_TYPE"
    assert snapshot(agent_api, running["id"]) == before
    assert row_counts() == counts


OPERATOR_CASES = [
    ("stop", {"reason": 1}),
    ("resume", {}),
    ("resume", {"reason": 5}),
    ("resume", {"reason": "x", "grant": {"model_calls": "5"}}),
    ("resume", {"reason": "x", "grant": {"model_calls": True}}),
    ("resume", {"reason": "x", "grant": {"model_calls": -1}}),
    ("resume", {"reason": "x", "grant": {"days": 1}}),
    ("resume", {"reason": "x", "grant": [1]}),
    ("resume", {"reason": "x", "grant": {"cost": "lots"}}),
    ("resume", NOT_JSON),
]


@pytest.mark.parametrize(
    ("endpoint", "body"),
    OPERATOR_CASES,
    ids=[f"{e} {'not json' if b is NOT_JSON else json.dumps(b)}" for e, b in OPERATOR_CASES],
)
def test_it_refuses_a_bad_operator_envelope_and_changes_nothing(
    agent_api, operator_api, running, endpoint, body
):
    operator_api.post(f"tasks/{running['id']}/stop", {"reason": "halt"})
    before, counts = snapshot(agent_api, running["id"]), row_counts()

    assert_bad_request(send(operator_api, f"tasks/{running['id']}/{endpoint}", body))

    assert snapshot(agent_api, running["id"]) == before
    assert row_counts() == counts


@pytest.mark.parametrize(
    "kind", ["EXPLODED", "success", "", "   ", "X" * 33, "K" * 5000], ids=lambda k: repr(k[:40])
)
def test_it_does_not_answer_400_to_an_unknown_result_kind(agent_api, running, kind):
    """docs/DESIGN.md: a kind outside the list is not a 400; the tool ran, so its call closes."""
    response = agent_api.post(
        f"tasks/{running['id']}/tool-calls/{running['tc']}/result", {"kind": kind}
    )

    assert response.status_code == 200, response.body
    assert (response.body["decision"], response.body["reason"]) == ("STOP", "bad_result")
    # The call closed: a second report is the duplicate's 409, not a new decision.
    again = agent_api.post(
        f"tasks/{running['id']}/tool-calls/{running['tc']}/result", {"kind": "SUCCESS"}
    )
    assert again.status_code == 409


# A number JSON can write but no float holds: Python reads `1e999` as infinity, which neither
# database's JSON accepts. Refused as the literals NaN and Infinity are (MALFORMED_JSON), on
# every endpoint, reports included: the sender can send the number as text.
OVERFLOWING_NUMBERS = [
    ("tool-calls", '{"tool": "search", "args": {"a": 1e999}, "effect": "read"}'),
    ("tool-calls", '{"tool": "search", "args": {"a": [-1e400]}, "effect": "read"}'),
    ("usage", '{"prompt_tokens": 1, "completion_tokens": 1, '
              '"tool_calls": [{"name": "a", "args": {"x": 1e999}}]}'),
    ("result", '{"kind": "SUCCESS", "data": {"amount": 1e999}}'),
    ("result", '{"kind": "SUCCESS", "data": {"a": 1}, "evidence": {"revision": 1e999}}'),
    ("finish", '{"evidence": {"revision": 1e999, "done": true}}'),
    ("model-calls", '{"est_prompt_tokens": 1e999}'),
]  # fmt: skip


@pytest.mark.parametrize(
    ("endpoint", "body"), OVERFLOWING_NUMBERS, ids=[f"{e} {b}" for e, b in OVERFLOWING_NUMBERS]
)
def test_it_refuses_a_number_no_float_holds_and_changes_nothing(agent_api, running, endpoint, body):
    before, counts = snapshot(agent_api, running["id"]), row_counts()

    error = assert_bad_request(send(agent_api, runner_path(running, endpoint), body))

    assert error["code"] == "MALFORMED_JSON"
    assert snapshot(agent_api, running["id"]) == before
    assert row_counts() == counts


def test_a_large_number_a_float_holds_is_still_accepted(agent_api, running):
    body = '{"tool": "search", "args": {"a": 1e308, "b": -1.5e-300}, "effect": "read"}'

    answer = send(agent_api, runner_path(running, "tool-calls"), body)

    assert answer.status_code == 200, answer.body
    assert answer.body["decision"] == "EXECUTE"
