"""Every secret shape, written by an agent into every text it writes, is masked everywhere an
operator reads it: the console's pages, the operator API, report.json, the daily CSV, the
notifications and the audit log. The agent still reads its own data as it sent it, and REUSE
hands it the real committed result.

One task per shape (devtools.secret_samples), driven through the agent API: its goal, an
external ref, a plan's arguments, a read's arguments, result and milestone, a write's operation
key and arguments whose response was lost (UNKNOWN: the task needs a human, the reconcile queue
shows it), and the agent's own stop reason.
"""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agents.guard import keys
from agents.redaction import MASK
from agents.services import notify, rollups, runner
from agents.services.tasks import task_create
from devtools.secret_samples import SAMPLES
from tests.api.helpers import evidence, execute, gate, new_task, report, request_tool, settle
from tests.celery.helpers import fake_endpoint

pytestmark = pytest.mark.django_db


@pytest.fixture
def as_operator(make_user):
    client = Client()
    client.force_login(make_user("olivia")[0])
    return client


SHAPES = [pytest.param(text, secret, id=shape) for shape, text, secret in SAMPLES]


def as_key(text: str) -> str:
    """The text as an agent can write it in an operation key: characters keys refuse (the PEM
    block's line breaks) become spaces."""
    return re.sub(keys.REFUSED_PATTERN, " ", text)


def written_everywhere(agent_api, text: str) -> SimpleNamespace:
    """A task whose agent wrote `text` into every text field it writes."""
    task = new_task(agent_api, goal=f"Goal: {text}", external_ref=text[:200])
    call = gate(agent_api, task["id"])
    settle(agent_api, task["id"], call["model_call"],
           tool_calls=[{"name": "lookup", "args": {"q": text}}])  # fmt: skip
    execute(
        agent_api, task["id"], "lookup", {"q": text, "page": 1},
        result={"kind": "SUCCESS", "data": {"note": text},
                "evidence": evidence(1, milestone=f"found {text}")},
    )  # fmt: skip
    key = as_key(f"send {text}")[:300]
    asked = request_tool(agent_api, task["id"], "send", {"body": text}, "write", operation_key=key)
    assert asked["decision"] == "EXECUTE", asked
    lost = report(agent_api, task["id"], asked["tool_call"], "NO_RESULT", error=text)
    assert lost["decision"] == "STOP", lost  # the write's outcome is unknown: NEEDS_HUMAN
    stop = agent_api.post(f"tasks/{task['id']}/stop", {"reason": f"giving up: {text}"})
    assert stop.status_code == 200, stop.body
    return SimpleNamespace(id=task["id"], key=key)


def assert_masked(where: str, body: str, secret: str) -> None:
    assert secret not in body, f"{where} shows the secret"
    assert MASK in body, f"{where} shows no masked text at all"


@pytest.mark.parametrize(("text", "secret"), SHAPES)
def test_the_operator_api_masks_every_shape(agent_api, operator_api, text, secret):
    task = written_everywhere(agent_api, text)
    operation = operator_api.get("operations").body["operations"][0]

    # Each endpoint, and what it shows of the agent's texts around the masked secret.
    for path, shown in (
        ("tasks", ["Goal: ", "found "]), (f"tasks/{task.id}", ["Goal: ", "send "]),
        (f"tasks/{task.id}/trace", ["send ", "giving up: "]), ("operations", ["send "]),
        (f"operations/{operation['id']}", ["send "]), ("audit?everyone=true", ["giving up: "]),
    ):  # fmt: skip
        answer = operator_api.get(path)
        assert answer.status_code == 200, answer.body
        body = json.dumps(answer.body, ensure_ascii=False)
        assert_masked(f"GET {path}", body, secret)
        assert [word for word in shown if word not in body] == [], path


@pytest.mark.parametrize(("text", "secret"), SHAPES)
def test_the_console_masks_every_shape(agent_api, as_operator, text, secret):
    task = written_everywhere(agent_api, text)
    # Each place, and what it shows of the agent's texts around the masked secret.
    pages = {
        "dashboard": (reverse("dashboard"), ["Goal: "]),
        "task page": (reverse("task", args=[task.id]), ["Goal: ", "send ", "giving up: "]),
        "timeline": (reverse("task-timeline", args=[task.id]), ["send "]),
        "live panel": (reverse("task-live", args=[task.id]), ["found "]),
        "reconcile queue": (reverse("reconcile"), ["Goal: ", "send "]),
        "audit log": (reverse("audit") + "?everyone=on", ["giving up: "]),
        "report.json": (reverse("task-report", args=[task.id]), ["found ", "send "]),
    }
    for where, (url, shown) in pages.items():
        page = as_operator.get(url)
        assert page.status_code == 200, where
        is_json = page["Content-Type"].startswith("application/json")
        body = json.dumps(page.json(), ensure_ascii=False) if is_json else page.content.decode()
        assert_masked(where, body, secret)
        assert [word for word in shown if word not in body] == [], where


@pytest.mark.parametrize(("text", "secret"), SHAPES)
def test_notifications_mask_every_shape(agent_api, settings, mailoutbox, text, secret):
    task = written_everywhere(agent_api, text)
    with fake_endpoint() as endpoint:
        settings.NOTIFY_WEBHOOK_URL = endpoint.url
        settings.NOTIFY_EMAILS = ["oncall@example.com"]
        notify.notification_send(task_id=task.id, phase=1)
        webhook = json.dumps(endpoint.bodies()[0], ensure_ascii=False)

    assert_masked("the webhook", webhook, secret)
    assert_masked("the email", mailoutbox[0].subject + mailoutbox[0].body, secret)


# A tool name is at most 200 characters.
SHORT_SHAPES = [pytest.param(text, secret, id=shape) for shape, text, secret in SAMPLES
                if len(text) <= 200]  # fmt: skip


@pytest.mark.parametrize(("text", "secret"), SHORT_SHAPES)
def test_the_trace_masks_the_tool_names_of_a_models_plan(agent_api, operator_api, as_operator,
                                                         text, secret):  # fmt: skip
    """The tool calls a model asked for are the agent's text, their names too: the operator's
    trace masks a name as the console's timeline does, and the agent reads it as it sent it."""
    task = new_task(agent_api)
    call = gate(agent_api, task["id"])
    settle(agent_api, task["id"], call["model_call"],
           tool_calls=[{"name": text, "args": {"page": 1}}])  # fmt: skip

    trace = operator_api.get(f"tasks/{task['id']}/trace")
    timeline = as_operator.get(reverse("task-timeline", args=[task["id"]]))

    assert trace.status_code == 200, trace.body
    assert_masked("the trace", json.dumps(trace.body, ensure_ascii=False), secret)
    assert trace.body["calls"][0]["tool_calls"][0]["args"] == {"page": 1}
    assert_masked("the timeline", timeline.content.decode(), secret)
    own = agent_api.get(f"tasks/{task['id']}/trace").body
    assert own["calls"][0]["tool_calls"][0]["name"] == text


def test_the_agent_reads_its_own_data_as_it_sent_it(agent_api):
    shape, text, secret = SAMPLES[0]
    task = written_everywhere(agent_api, text)

    own = json.dumps(agent_api.get(f"tasks/{task.id}").body)
    trace = json.dumps(agent_api.get(f"tasks/{task.id}/trace").body)
    ledger = json.dumps(agent_api.get("operations").body)

    assert secret in own and secret in trace and secret in ledger, shape


# Shapes whose secret is one only in its context (inside a PEM block, after `Bearer `, after
# `password: `): alone, as a name, it is an ordinary word.
IN_CONTEXT = {"PEM private key block", "Bearer token header", "password in name: value text"}


def _name_shaped() -> list:
    """The samples whose secret word is a valid agent name (a slug of at most 64 characters)."""
    found = []
    for shape, text, secret in SAMPLES:
        if shape in IN_CONTEXT:
            continue
        word = next((w for w in text.split() if secret in w), "")
        if re.fullmatch(r"[-a-zA-Z0-9_]{1,64}", word):
            found.append(pytest.param(word, id=shape))
    return found


@pytest.mark.parametrize("name", _name_shaped())
def test_the_daily_csv_masks_secret_shaped_names(make_agent, profile, as_operator, name):
    """Agent and profile names are chosen by an admin, but the CSV goes through the policy
    too: a token pasted as a name is masked like any other text."""
    agent, _token = make_agent(name)
    task = task_create(agent=agent, goal="a task")
    runner.model_call_gate(task_id=task.pk, agent=agent)
    rollups.rollup_day(day=timezone.now().date())

    csv_text = as_operator.get(reverse("reports-csv")).content.decode()
    assert_masked("the daily CSV", csv_text, name)


@pytest.mark.parametrize(("text", "secret"), SHAPES)
def test_answers_naming_an_operation_mask_its_key(agent_api, operator_api, as_operator, text,
                                                  secret):  # fmt: skip
    """A refused resume names the operations to reconcile; a recorded verdict names its key, and
    so does a verdict refused because one was recorded already."""
    task = written_everywhere(agent_api, text)
    operation = operator_api.get("operations").body["operations"][0]

    refused = operator_api.post(f"tasks/{task.id}/resume", {"reason": "try again"})
    url = reverse("operation-reconcile", args=[operation["id"]])
    prefix = f"op{operation['id']}"
    verdict = {f"{prefix}-verdict": "NOT_COMMITTED", f"{prefix}-note": "checked the provider"}
    toast = as_operator.post(url, verdict, HTTP_HX_REQUEST="true")
    again = operator_api.post(
        f"operations/{operation['id']}/reconcile", {"verdict": "COMMITTED", "note": "again"}
    )

    assert refused.status_code == 409, refused.body
    secret = as_key(secret)  # these answers name the operation by its key
    assert_masked("the refused resume", json.dumps(refused.body, ensure_ascii=False), secret)
    assert toast.status_code == 200
    shown = json.dumps(dict(toast.headers), ensure_ascii=False) + toast.content.decode()
    assert_masked("the verdict's answer", shown, secret)
    assert again.status_code == 409, again.body
    assert_masked("the refused verdict", json.dumps(again.body, ensure_ascii=False), secret)
