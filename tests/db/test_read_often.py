"""The rows every decision reads are built without `Model.__init__`
(`agents.db.read_often.ReadOften`), and are the rows Django would build."""

from __future__ import annotations

import pytest
from django.db.models import Model, signals

from agents.db.read_often import ReadOften
from agents.models import Agent, ApiToken, ModelCall, Task, ToolCall

pytestmark = pytest.mark.django_db

MODELS = [Agent, ApiToken, Task, ModelCall, ToolCall]


@pytest.fixture
def rows(make_task, agent_api):
    """One row of each model, as a decision leaves them (a task with a model and a tool call)."""
    task = make_task()
    gate = agent_api.post(f"tasks/{task.pk}/model-calls", {})
    assert gate.status_code == 200, gate.content
    tool = agent_api.post(
        f"tasks/{task.pk}/tool-calls",
        {"tool": "fetch_page", "args": {"page": 1}, "effect": "read"},
    )
    assert tool.status_code == 200, tool.content
    return task


def _djangos(model: type[Model], pk) -> Model:
    """The row as Django's own `from_db` builds it."""
    names = [f.attname for f in model._meta.concrete_fields]
    values = model.objects.filter(pk=pk).values_list(*names).get()
    return Model.from_db.__func__(model, "default", names, values)


def _fields(obj: Model) -> dict:
    return {f.attname: getattr(obj, f.attname) for f in type(obj)._meta.concrete_fields}


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_a_row_read_often_is_the_row_django_builds(rows, model):
    assert issubclass(model, ReadOften)
    pk = model.objects.order_by("-pk").values_list("pk", flat=True)[0]
    loaded = model.objects.get(pk=pk)
    expected = _djangos(model, pk)
    assert _fields(loaded) == _fields(expected)
    assert (loaded._state.adding, loaded._state.db) == (False, "default")
    # It behaves as any row: related rows load, a save writes it back.
    if model is Task:
        assert loaded.agent.name == expected.agent.name
        loaded.goal = "changed"
        loaded.save(update_fields=["goal"])
        assert Task.objects.get(pk=pk).goal == "changed"


def test_a_decision_builds_its_rows_without_model_init(rows, agent_api, monkeypatch):
    built = []
    for model in MODELS:
        original = model.__init__

        def counted(self, *args, _original=original, **kwargs):
            built.append(type(self).__name__)
            _original(self, *args, **kwargs)

        monkeypatch.setattr(model, "__init__", counted)
    answer = agent_api.post(f"tasks/{rows.pk}/model-calls", {})
    assert answer.status_code == 200, answer.content
    # The token, its agent, the task and the task's agent are read; only the new trace row
    # (a ModelCall made by the service) is built by __init__.
    assert built == ["ModelCall"]


def test_a_row_with_deferred_fields_is_djangos(rows):
    loaded = Task.objects.only("id", "goal").get(pk=rows.pk)
    assert loaded.get_deferred_fields()
    assert loaded.goal == rows.goal
    assert loaded.state == rows.state  # loaded on access, as Django does


def test_an_init_receiver_still_sees_every_row(rows):
    seen = []

    def receiver(sender, instance, **kwargs):
        seen.append(instance.pk)

    signals.post_init.connect(receiver, sender=Task)
    try:
        Task.objects.get(pk=rows.pk)
    finally:
        signals.post_init.disconnect(receiver, sender=Task)
    assert seen == [rows.pk]
