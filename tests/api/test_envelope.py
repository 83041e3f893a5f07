"""The decision bodies' envelope check (`agents.api.envelope`) against the serializers it reads:
for every field of every decision body, every kind of value, the check either gives exactly
the serializer's validated data or steps aside (None) so the serializer words its 400; and it
steps aside for nothing the serializer accepts."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.validators import MaxLengthValidator
from rest_framework import serializers

from agents.api import envelope
from agents.api import serializers as s
from agents.api.fields import BIGINT_MAX, INT_MAX, JSON_INT_MAX
from agents.api.views import _valid

MISSING = object()

DECISION_BODIES = {
    s.ModelCallIn: {"model": "gpt-x", "est_prompt_tokens": 800, "max_output_tokens": 200},
    s.UsageIn: {"prompt_tokens": 800, "completion_tokens": 150, "output_text": "ok",
                "tool_calls": [{"name": "search", "args": {"q": "x"}}]},  # fmt: skip
    s.ToolRequestIn: {"tool": "search", "args": {"q": "abc"}, "effect": "write",
                      "operation_key": "k-1", "job_id": "j", "call_id": "c", "model_call": 3},
    s.ToolResultIn: {"kind": "SUCCESS", "code": "OK", "data": {"hits": [1]}, "data_hash": "h",
                     "wait_ms": 10, "job_id": "j", "attempts": 2, "duration_ms": 5,
                     "error": "e", "evidence": {"revision": 1, "done": False}},
}  # fmt: skip

COMMON_VALUES: list[Any] = [
    MISSING,
    None,
    "",
    " ",
    "\t\u3000\n",
    "x",
    " x ",
    "\x00",
    "a\x00b",
    "a\ud800",
    "\u2400lw:x",
    "pay-cafe\u0301-1",  # NFD: an operation key is taken in NFC
    "pay\u200b-1",
    "\u202epay",
    "\u0958" * 150,  # composes to 300 characters
    "\u0958" * 151,
    "read",
    "write",
    "READ",
    0,
    -1,
    1,
    2,
    10_000,
    10_001,
    INT_MAX,
    INT_MAX + 1,
    JSON_INT_MAX,
    JSON_INT_MAX + 1,
    BIGINT_MAX,
    BIGINT_MAX + 1,
    -BIGINT_MAX,
    -BIGINT_MAX - 1,
    True,
    False,
    1.0,
    1.5,
    -0.0,
    {},
    {"a": 1},
    {"a": None},
    [],
    [1],
    [None],
    ["x"],
    [{"name": "x"}],
    [{"name": "x", "args": {}}],
    [{"name": "x", "args": []}],
    [{"name": ""}],
    [{"name": " "}],
    [{"nme": "x"}],
    [{"name": "x"}, 3],
    [{"name": "a" * 201}],
    [{"name": "\x00"}],
]


def values_for(field: serializers.Field) -> list[Any]:
    """The common values and each bound of `field` with its neighbours."""
    values = list(COMMON_VALUES)
    for validator in field.validators:
        limit = getattr(validator, "limit_value", None)
        if isinstance(validator, MaxLengthValidator):
            values += ["a" * (limit - 1), "a" * limit, "a" * (limit + 1), " " * limit]
        elif isinstance(limit, int):
            values += [limit - 1, limit, limit + 1]
    for choice in getattr(field, "choices", {}) or {}:
        values += [choice, f"{choice} ", str(choice).upper()]
    return values


def bodies_for(cls: type[s.Strict]) -> list[Any]:
    base = DECISION_BODIES[cls]
    bodies: list[Any] = [base, {}, None, [], "x", 1, [base], {**base, "unknown": 1}]
    bodies.append({name: value for name, value in base.items() if cls().fields[name].required})
    for name, field in cls().fields.items():
        for value in values_for(field):
            body = {k: v for k, v in base.items() if k != name}
            if value is not MISSING:
                body[name] = value
            bodies.append(body)
    return bodies


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (True is not 1, 1.0 is not 1)."""
    if type(a) is not type(b):
        return isinstance(a, dict) and isinstance(b, dict) and same(dict(a), dict(b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@pytest.mark.parametrize("cls", list(DECISION_BODIES), ids=lambda c: c.__name__)
def test_the_check_gives_the_serializers_answer_or_steps_aside(cls):
    accepted = refused = 0
    for body in bodies_for(cls):
        serializer = cls(data=body)
        valid = serializer.is_valid()
        checked = envelope.validated(cls, body)
        if not valid:
            assert checked is None, (body, serializer.errors)
            refused += 1
            continue
        # Nothing the serializer accepts is left to it: every valid body takes the short road.
        assert checked is not None, body
        assert same(checked, serializer.validated_data), (body, checked)
        accepted += 1
    assert accepted > 20 and refused > 20, (accepted, refused)


def test_every_decision_body_is_read_and_no_other_body_is():
    for cls in DECISION_BODIES:
        assert envelope.validated(cls, DECISION_BODIES[cls]) is not None
    decision_bodies = {c for c in vars(s).values() if getattr(c, "shared_fields", False)}
    assert decision_bodies == set(DECISION_BODIES)
    # Bodies outside the hot path stay with their serializers entirely.
    assert envelope.validated(s.StopIn, {"reason": "r"}) is None
    assert envelope.validated(s.TaskCreateIn, {"goal": "g"}) is None


def test_a_field_it_does_not_know_hands_the_whole_body_to_the_serializer():
    class WithSlug(s.ModelCallIn):
        region = serializers.SlugField(required=False)

    class WithHook(s.ModelCallIn):
        def validate_model(self, value):
            raise serializers.ValidationError("no")

    for cls in (WithSlug, WithHook):
        assert envelope.validated(cls, {"model": "m"}) is None
        assert cls(data={"model": "m"}).is_valid() is (cls is WithSlug)


def test_a_view_refuses_what_the_serializer_refuses_and_keeps_what_it_accepts(rf):
    from rest_framework.parsers import JSONParser
    from rest_framework.request import Request

    def request(body: str) -> Request:
        return Request(rf.post("/", body, content_type="application/json"),
                       parsers=[JSONParser()])  # fmt: skip

    assert _valid(s.ToolRequestIn, request('{"tool": "t", "args": {}, "effect": "read"}')) == {
        "tool": "t", "args": {}, "effect": "read"}  # fmt: skip
    with pytest.raises(serializers.ValidationError) as refused:
        _valid(s.ToolRequestIn, request('{"tool": " ", "args": {}, "effect": "read"}'))
    assert set(refused.value.detail) == {"tool"}
