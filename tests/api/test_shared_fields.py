"""The decision bodies' serializers share their bound fields between requests (built once per
thread instead of deep-copied per request): nothing of one body reaches the next."""

from __future__ import annotations

from agents.api import serializers as s


def validated(cls, body):
    serializer = cls(data=body)
    valid = serializer.is_valid()
    return (serializer.validated_data if valid else None), serializer.errors


def test_one_bodys_values_and_errors_do_not_reach_the_next():
    first, _ = validated(s.ToolRequestIn, {"tool": "t", "args": {"a": 1}, "effect": "read",
                                           "model_call": 7, "job_id": "j"})  # fmt: skip
    second, _ = validated(s.ToolRequestIn, {"tool": "u", "args": {}, "effect": "write"})
    _, errors = validated(s.ToolRequestIn, {"tool": " ", "args": [], "effect": "x", "y": 1})
    again, _ = validated(s.ToolRequestIn, {"tool": "t", "args": {"a": 1}, "effect": "read"})

    assert first == {"tool": "t", "args": {"a": 1}, "effect": "read", "model_call": 7,
                     "job_id": "j"}  # fmt: skip
    assert second == {"tool": "u", "args": {}, "effect": "write"}
    assert set(errors) == {"y"}  # unknown fields are refused first
    assert again == {"tool": "t", "args": {"a": 1}, "effect": "read"}
    _, errors = validated(s.ToolRequestIn, {"tool": " ", "args": [], "effect": "x"})
    assert set(errors) == {"tool", "args", "effect"}
    assert s.ToolRequestIn().fields is s.ToolRequestIn().fields  # shared, not rebuilt


def test_the_shared_fields_give_the_answers_fresh_fields_give():
    bodies = [
        {"prompt_tokens": 1, "completion_tokens": 2, "tool_calls": [{"name": "n"}]},
        {"prompt_tokens": -1, "completion_tokens": "2", "tool_calls": [{"name": ""}, 3]},
        {"prompt_tokens": 1},
    ]

    class Fresh(s.UsageIn):
        shared_fields = False

    for body in bodies:
        assert validated(s.UsageIn, body) == validated(Fresh, body)
    assert s.UsageIn().fields is not Fresh().fields
