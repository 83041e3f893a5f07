"""Console fixtures: an operator, an admin and an outsider, each with a signed-in browser-like
client, and tasks in the states an operator meets (looping, stopped, waiting for a verdict).

Tasks are driven through the same services the runner API calls, so what the pages show is
what the guard really decided.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from django.test import Client

from agents.guard import terms
from agents.models import Task
from agents.services import runner, tasks


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    """Users are made with a password; the production hasher is slow on purpose."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def signed_in(user, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


@pytest.fixture
def people(make_user):
    return SimpleNamespace(
        operator=make_user("olivia")[0],
        admin=make_user("adam", admin=True)[0],
        outsider=make_user("oscar", groups=False)[0],
    )


@pytest.fixture
def as_operator(people) -> Client:
    return signed_in(people.operator)


@pytest.fixture
def as_admin(people) -> Client:
    return signed_in(people.admin)


@pytest.fixture
def as_outsider(people) -> Client:
    return signed_in(people.outsider)


@pytest.fixture
def anonymous(db) -> Client:
    return Client()


HTMX = {"HTTP_HX_REQUEST": "true"}

CSRF_TOKEN = re.compile(r'(csrfmiddlewaretoken" value="|"X-CSRFToken": ")[A-Za-z0-9]+')


def without_csrf_tokens(page: str) -> str:
    """The page with its CSRF tokens left blank: a token is 64 random letters and digits, so
    it spells, now and then, any short word a test says the page must not hold."""
    return CSRF_TOKEN.sub(r"\1", page)


@pytest.fixture(params=["random", "spelled"])
def csrf_token_spells(request, monkeypatch):
    """Run a page test twice: with Django's random CSRF token, and with one that spells the
    words given (letters and digits), as a random token now and then does."""

    def spell(words: str) -> None:
        if request.param == "spelled":
            token = (words * 64)[:64]
            monkeypatch.setattr("django.middleware.csrf._mask_cipher_secret", lambda _: token)

    return spell


@pytest.fixture
def agent(make_agent):
    return make_agent("agent-a", namespace="ns-a")[0]


def tool_step(agent, task_id, tool="kb_search", args=None, *, kind=terms.SUCCESS, **request):
    """One tool call: request, and when EXECUTE'd, report a result of `kind`."""
    _, call, outcome = runner.tool_call_request(
        task_id=task_id, agent=agent, tool=tool, args=args or {"query": "price"},
        effect=request.pop("effect", terms.READ), **request,
    )  # fmt: skip
    if outcome.decision == terms.EXECUTE:
        runner.tool_call_result(
            task_id=task_id, agent=agent, tool_call_id=call.pk, result=terms.ToolResult(kind=kind)
        )
    return call, outcome


@pytest.fixture
def looping_task(agent) -> Task:
    """RUNNING, having asked for the same search twice (the second is a repeat)."""
    task = tasks.task_create(agent=agent, goal="Find the enterprise price")
    _, model_call, _ = runner.model_call_gate(task_id=task.pk, agent=agent, model="m")
    runner.model_call_usage(
        task_id=task.pk, agent=agent, model_call_id=model_call.pk, prompt_tokens=100,
        completion_tokens=10, tool_calls=[{"name": "kb_search", "args": {"query": "price"}}],
    )  # fmt: skip
    tool_step(agent, task.pk, args={"query": "price", "api_key": "sk-live-123"})
    tool_step(agent, task.pk, args={"query": "price", "api_key": "sk-live-123"})
    task.refresh_from_db()
    assert task.state == terms.RUNNING
    return task


@pytest.fixture
def lost_write(agent) -> SimpleNamespace:
    """NEEDS_HUMAN/unknown_commit: a payment's answer was lost, its operation is UNKNOWN."""
    task = tasks.task_create(agent=agent, goal="Pay invoice INV-42 exactly once")
    call, _ = tool_step(
        agent, task.pk, "pay_invoice", {"invoice": "INV-42", "card_number": "4111111111111111"},
        kind=terms.NO_RESULT, effect=terms.WRITE, operation_key="pay-INV-42",
    )  # fmt: skip
    task.refresh_from_db()
    assert task.state == terms.NEEDS_HUMAN
    call.refresh_from_db()
    return SimpleNamespace(task=task, operation=call.operation)


@pytest.fixture
def stopped_task(looping_task, people) -> Task:
    from agents.services import operator

    operator.task_stop(task_id=looping_task.pk, reason="looping", user=people.operator)
    looping_task.refresh_from_db()
    return looping_task


def tripped(agent, goal: str) -> Task:
    """A task stopped by the guard (a breaker trip): the same search asked until the loop rule
    fired."""
    task = tasks.task_create(agent=agent, goal=goal)
    for _ in range(10):
        _, outcome = tool_step(agent, task.pk)
        if outcome.decision == terms.STOP:
            break
    task.refresh_from_db()
    assert task.terminal and terms.is_trip(task.reason), (task.state, task.reason)
    return task


@pytest.fixture
def tripped_task(agent) -> Task:
    return tripped(agent, "Find the enterprise price, again and again")


@pytest.fixture
def completed_task(agent) -> Task:
    """COMPLETED: the agent finished with verified evidence."""
    task = tasks.task_create(agent=agent, goal="Answer once, with evidence")
    runner.task_finish(task_id=task.pk, agent=agent, evidence={"revision": 1, "done": True})
    task.refresh_from_db()
    assert task.state == terms.COMPLETED
    return task
