"""Fixtures for the background jobs: an agent's task with a write in flight, and friends."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from agents.guard import terms
from agents.models import LimitProfile, ModelPrice, Task, ToolPolicy
from agents.services import runner
from agents.services.tasks import task_create
from ledger.models import Operation


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
def price(db):
    """100 prompt + 100 completion tokens cost 0.3; a gate without an estimate reserves 200
    tokens (0.4), not the profile's 4,000 (8.00, above the default cost limit)."""
    return ModelPrice.objects.create(
        model="*", input_per_million=Decimal("1000"), output_per_million=Decimal("2000"),
        default_estimate_tokens=200,
    )  # fmt: skip


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
def json_logs(caplog):
    """The JSON lines of loopwarden's own loggers (they do not propagate to the root)."""
    import json
    import logging

    loggers = [logging.getLogger(name) for name in ("loopwarden.decisions", "loopwarden.jobs")]
    for logger in loggers:
        logger.addHandler(caplog.handler)
    caplog.set_level(logging.INFO)

    def lines(event: str | None = None) -> list[dict]:
        parsed = []
        for record in caplog.records:
            if record.name not in ("loopwarden.decisions", "loopwarden.jobs"):
                continue
            line = json.loads(record.getMessage())
            if event is None or line.get("event") == event:
                parsed.append(line)
        return parsed

    yield lines
    for logger in loggers:
        logger.removeHandler(caplog.handler)
