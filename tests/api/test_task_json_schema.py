"""`selectors.task_json` builds the task answer; `responses.Task` describes it for the schema.
The two must agree, key for key and type for type, for tasks in every state a task reaches:
the default suite checks it (the CI-only schemathesis run checks it against a live server)."""

from __future__ import annotations

import uuid
from datetime import datetime

import pytest
from rest_framework import serializers as s

from agents import selectors
from agents.api import responses
from agents.guard import terms
from agents.services import operator, runner
from tests.api.helpers import evidence

pytestmark = pytest.mark.django_db


def mismatches(field: s.Field, value, path: str = "task") -> list[str]:
    """Where `value` is not what the schema `field` says: missing or extra keys, wrong types."""
    if value is None:
        return [] if field.allow_null else [f"{path}: null, not nullable"]
    if isinstance(field, s.ListSerializer):
        if not isinstance(value, list):
            return [f"{path}: {type(value).__name__}, not a list"]
        return [m for i, item in enumerate(value) for m in mismatches(field.child, item, path)]
    if isinstance(field, s.Serializer):
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__}, not an object"]
        found = [f"{path}.{key}: not in the schema" for key in set(value) - set(field.fields)]
        found += [f"{path}.{key}: missing" for key in set(field.fields) - set(value)]
        for key in set(value) & set(field.fields):
            found += mismatches(field.fields[key], value[key], f"{path}.{key}")
        return found
    if isinstance(field, s.ListField):
        if not isinstance(value, list):
            return [f"{path}: {type(value).__name__}, not a list"]
        return [m for item in value for m in mismatches(field.child, item, f"{path}[]")]
    if isinstance(field, s.ChoiceField):
        return [] if value in field.choices else [f"{path}: {value!r} not among its choices"]
    if isinstance(field, s.IntegerField):
        ok = isinstance(value, int) and not isinstance(value, bool)
        return [] if ok else [f"{path}: {value!r} is not an integer"]
    if isinstance(field, s.FloatField):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return [] if ok else [f"{path}: {value!r} is not a number"]
    if isinstance(field, s.DateTimeField):
        try:
            datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            return [f"{path}: {value!r} is not a date-time"]
        return []
    if isinstance(field, s.UUIDField):
        try:
            uuid.UUID(str(value))
        except ValueError:
            return [f"{path}: {value!r} is not a UUID"]
        return [] if isinstance(value, str) else [f"{path}: {value!r} is not text"]
    if isinstance(field, s.CharField):
        return [] if isinstance(value, str) else [f"{path}: {value!r} is not text"]
    raise AssertionError(f"{path}: no check for {type(field).__name__}")


def answer(task) -> dict:
    task.refresh_from_db()
    return selectors.task_json(task)


@pytest.fixture
def admin(make_user):
    return make_user("admin-schema", admin=True)[0]


def running(make_task, agent_row, admin):
    return make_task()


def completed(make_task, agent_row, admin):
    task = make_task()
    return runner.task_finish(task_id=task.pk, agent=agent_row, evidence=evidence(1, done=True))


def partial_by_budget(make_task, agent_row, admin):
    task = make_task(limits={"max_model_calls": 1})
    for _ in range(2):
        runner.model_call_gate(task_id=task.pk, agent=agent_row, est_prompt_tokens=10)
    return task


def stopped(make_task, agent_row, admin):
    return operator.task_stop(task_id=make_task().pk, reason="enough", user=admin)[0]


def resumed(make_task, agent_row, admin):
    task = stopped(make_task, agent_row, admin)
    return operator.task_resume(
        task_id=task.pk, user=admin, reason="go on", grant={"model_calls": 2, "cost": "1.5"}
    )


STATES = {
    "running": (running, terms.RUNNING),
    "completed": (completed, terms.COMPLETED),
    "partial by budget": (partial_by_budget, terms.PARTIAL),
    "stopped": (stopped, terms.STOPPED),
    "resumed": (resumed, terms.RUNNING),
}


@pytest.mark.parametrize("name", STATES)
def test_the_task_answer_has_the_schemas_keys_and_types(name, make_task, agent_row, admin):
    build, state = STATES[name]
    body = answer(build(make_task, agent_row, admin))

    assert body["state"] == state
    assert (body["report"] is None) == (state == terms.RUNNING)
    assert mismatches(responses.Task(), body) == []


def test_the_check_finds_a_key_the_schema_lacks_and_a_wrong_type(make_task):
    body = answer(make_task())
    body["limits"]["max_invented"] = 3
    body["usage"]["tokens"] = "12"
    del body["remaining"]["cost"]

    assert sorted(mismatches(responses.Task(), body)) == [
        "task.limits.max_invented: not in the schema",
        "task.remaining.cost: missing",
        "task.usage.tokens: '12' is not an integer",
    ]
