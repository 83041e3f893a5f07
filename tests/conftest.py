"""Shared fixtures: an agent, another agent, an operator, an admin and an outsider, each with a
token, and a JSON API caller; an agent's task with a write in flight (the ledger's and the
background jobs' tests)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone
from hypothesis import settings as hypothesis_settings

from agents.guard import terms
from agents.models import LimitProfile, Task, ToolPolicy
from agents.services import runner
from agents.services.tasks import task_create
from ledger.models import Operation

# Property tests check what the guard does, not how fast: no per-example deadline (speed is the
# benchmarks' job), and a failure prints the blob that replays it.
hypothesis_settings.register_profile("loopwarden", deadline=None, print_blob=True)
hypothesis_settings.load_profile("loopwarden")


@dataclass
class Caller:
    """Calls the API with one bearer token through Django's test client."""

    client: object
    token: str

    def _call(self, method: str, path: str, body=None, raw: str | None = None):
        url = path if path.startswith("/") else f"/api/v1/{path}"
        kwargs = {"HTTP_AUTHORIZATION": f"Bearer {self.token}"}
        if raw is not None:
            kwargs.update(data=raw, content_type="application/json")
        elif body is not None:
            kwargs.update(data=json.dumps(body), content_type="application/json")
        response = getattr(self.client, method)(url, **kwargs)
        is_json = "json" in response.get("Content-Type", "") and response.content
        response.body = response.json() if is_json else None
        return response

    def get(self, path):
        return self._call("get", path)

    def post(self, path, body=None, raw=None):
        return self._call("post", path, body if body is not None else {}, raw)

    def patch(self, path, body=None):
        return self._call("patch", path, body or {})

    def delete(self, path):
        return self._call("delete", path)


def _last_line(command: str, *args, **options) -> str:
    from io import StringIO

    out = StringIO()
    call_command(command, *args, stdout=out, **options)
    return out.getvalue().strip().splitlines()[-1]


@pytest.fixture
def make_agent(db):
    def make(name: str, **options) -> tuple[object, str]:
        from agents.models import Agent

        token = _last_line("create_agent", name, **options)
        return Agent.objects.get(name=name), token

    return make


@pytest.fixture
def make_user(db):
    def make(username: str, *, admin: bool = False, groups: bool = True) -> tuple[object, str]:
        from django.contrib.auth import get_user_model

        from agents.models import ApiToken

        if groups:
            token = _last_line("create_operator", username, password="pw", admin=admin)
            return get_user_model().objects.get(username=username), token
        user = get_user_model().objects.create_user(username=username, password="pw")
        raw, key_hash, prefix = ApiToken.generate()
        ApiToken.objects.create(user=user, key_hash=key_hash, prefix=prefix)
        return user, raw

    return make


@pytest.fixture
def agent(make_agent, client):
    obj, token = make_agent("agent-a", namespace="ns-a")
    return Caller(client, token), obj


@pytest.fixture
def agent_api(agent):
    return agent[0]


@pytest.fixture
def other_agent_api(make_agent, client):
    _, token = make_agent("agent-b", namespace="ns-b")
    return Caller(client, token)


@pytest.fixture
def operator_api(make_user, client):
    return Caller(client, make_user("olivia")[1])


@pytest.fixture
def admin_api(make_user, client):
    return Caller(client, make_user("adam", admin=True)[1])


@pytest.fixture
def outsider_api(make_user, client):
    return Caller(client, make_user("oscar", groups=False)[1])


# -- an agent's task with a write in flight ---------------------------------------------------


@pytest.fixture
def agent_row(agent):
    """The Agent row of the shared `agent` fixture (agent-a, namespace ns-a)."""
    return agent[1]


@pytest.fixture
def profile(db):
    """The default profile (a migration creates it) with a short lease."""
    return LimitProfile.objects.update_or_create(
        name="default", defaults={"lease_seconds": 60, "deadline_seconds": 600}
    )[0]


@pytest.fixture
def make_task(agent_row, profile):
    def make(goal: str = "Send the March invoices", **options) -> Task:
        return task_create(agent=agent_row, goal=goal, **options)

    return make


@pytest.fixture
def start_write(agent_row):
    """Ask for a write and get EXECUTE: the ledger row is IN_FLIGHT with a lease."""

    def start(task: Task, key: str = "invoice-42", tool: str = "send_invoice") -> Operation:
        _task, call, outcome = runner.tool_call_request(
            task_id=task.pk, agent=agent_row, tool=tool, args={"invoice": key},
            effect=terms.WRITE, operation_key=key,
        )  # fmt: skip
        assert outcome.decision == terms.EXECUTE
        return Operation.objects.get(pk=call.operation_id)

    return start


@pytest.fixture
def past_lease():
    """A moment after every lease of the `profile` fixture ran out."""
    return timezone.now() + timedelta(seconds=61)


@pytest.fixture
def reconciler_policy(db):
    def register(url: str, tool: str = "send_invoice") -> ToolPolicy:
        return ToolPolicy.objects.update_or_create(tool=tool, defaults={"reconcile_url": url})[0]

    return register


@pytest.fixture
def devtools():
    """The developer tools app installed for one test (settings leave it out unless
    LOOPWARDEN_DEVTOOLS=true): its management commands are known while the test runs."""
    from django.conf import settings
    from django.test import override_settings

    if "devtools" in settings.INSTALLED_APPS:
        yield
        return
    with override_settings(INSTALLED_APPS=[*settings.INSTALLED_APPS, "devtools"]):
        yield


@pytest.fixture
def on_postgres():
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (set DATABASE_URL=postgres://...)")


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Throttle counters live in the cache; one test's calls must not count against the next
    one's token (token ids repeat once a test's rows are rolled back)."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


def allow_profiles(agent_name: str, *names: str) -> None:
    """Grant an agent profiles besides its default, as an admin does (docs/DESIGN.md section 6)."""
    from agents.models import Agent, LimitProfile

    Agent.objects.get(name=agent_name).allowed_profiles.add(
        *LimitProfile.objects.filter(name__in=names)
    )
