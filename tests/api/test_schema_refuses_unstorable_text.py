"""Text the database cannot hold (NUL, lone surrogates) is refused in input with a 400, and
the schema says so: a body the schema allows is never refused for its text (schemathesis'
positive-data check found a NUL in an `args` key and in a resume's reason), and a report's
text, which is stored encoded rather than refused, stays allowed."""

from __future__ import annotations

import pytest
from jsonschema import Draft7Validator

from .helpers import new_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def schema(client):
    response = client.get("/api/v1/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    return response.json()


def allows(schema, component: str, body: dict) -> bool:
    """Whether the request schema `component` allows `body` (a JSON Schema validator)."""
    root = {"$ref": f"#/components/schemas/{component}", "components": schema["components"]}
    return Draft7Validator(root).is_valid(body)


def test_a_nul_in_args_is_refused_by_both(agent_api, schema):
    task = new_task(agent_api)
    for args in ({"a": "x\x00"}, {"a": {"b": "\x00"}}, {"a": [{"b": ["\x00"]}]}):
        body = {"tool": "search", "args": args, "effect": "read"}

        response = agent_api.post(f"tasks/{task['id']}/tool-calls", body)

        assert response.status_code == 400, (args, response.body)
        assert response.body["error"]["code"] == "UNSUPPORTED_TEXT"
        assert not allows(schema, "ToolRequestInRequest", body), args


def test_a_nul_in_an_args_key_is_refused_and_the_schema_says_so(agent_api, schema):
    # OpenAPI 3.0 has no `propertyNames`: the description says it (the conformance run keeps
    # such keys out of its positive cases, tests/conformance/hooks.py).
    task = new_task(agent_api)
    for args in ({"\x00": 1}, {"a": {"b\x00": 1}}, {"a": [{"\ud800": "x"}]}):
        body = {"tool": "search", "args": args, "effect": "read"}

        response = agent_api.post(f"tasks/{task['id']}/tool-calls", body)

        assert response.status_code == 400, (args, response.body)
        assert response.body["error"]["code"] == "UNSUPPORTED_TEXT"
    args = schema["components"]["schemas"]["ToolRequestInRequest"]["properties"]["args"]
    assert "Object keys holding NUL" in args["description"]
    fine = {"tool": "search", "args": {"a": [{"b": "c"}, 1, None]}, "effect": "read"}
    assert allows(schema, "ToolRequestInRequest", fine)


def test_a_nul_in_a_resume_reason_is_refused_by_both(agent_api, operator_api, schema):
    task = new_task(agent_api)
    agent_api.post(f"tasks/{task['id']}/stop", {})
    for reason in ("why\x00", "\x00"):
        response = operator_api.post(f"tasks/{task['id']}/resume", {"reason": reason})

        assert response.status_code == 400, response.body
        assert not allows(schema, "ResumeInRequest", {"reason": reason}), reason
    # A lone surrogate (sendable only as a JSON escape) is refused too; the schema's pattern
    # names NUL only (schemathesis cannot generate from a surrogate range), its text says both.
    response = operator_api.post(f"tasks/{task['id']}/resume", {"reason": "\ud800 lone"})
    assert response.status_code == 400, response.body
    assert "lone surrogate" in schema["components"]["schemas"]["StorableJSON"]["description"]
    assert allows(schema, "ResumeInRequest", {"reason": "it is safe now 🙂"})
    assert not allows(schema, "ResumeInRequest", {"reason": "  "})


def test_every_text_of_a_body_that_is_not_a_report_refuses_nul(schema):
    bodies = {
        "TaskCreateInRequest": {"goal": "x\x00"},
        "StopInRequest": {"reason": "\x00"},
        "FinishInRequest": {"evidence": {"a": "\x00"}},
        "ReconcileInRequest": {"verdict": "UNKNOWN", "note": "n", "evidence": ["\x00"]},
        "PauseInRequest": {"reason": "p\x00"},
        "PatchedAgentPatchInRequest": {"allowed_profiles": ["a\x00"]},
        "ProfileInRequest": {"name": "p", "description": "\x00"},
    }
    for component, body in bodies.items():
        assert not allows(schema, component, body), component


def test_a_reports_text_is_stored_encoded_so_the_schema_allows_it(agent_api, schema):
    task = new_task(agent_api)
    body = {"tool": "search", "args": {"q": "x"}, "effect": "read"}
    asked = agent_api.post(f"tasks/{task['id']}/tool-calls", body).body
    result = {"kind": "SUCCESS", "data": {"\x00": "a\x00"}, "error": "e\x00"}

    response = agent_api.post(f"tasks/{task['id']}/tool-calls/{asked['tool_call']}/result", result)

    assert response.status_code == 200, response.body
    assert allows(schema, "ToolResultInRequest", result)
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "output_text": "\x00",
             "tool_calls": [{"name": "n\x00", "args": {"\x00": 1}}]}  # fmt: skip
    assert allows(schema, "UsageInRequest", usage)
