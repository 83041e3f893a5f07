"""Agents 0028 fills `Task.masked_search` for the tasks already there whose goal or
external_ref holds a secret, and leaves it null for the rest (the search reads their raw text);
agents 0030 fills it again where the policy learned to mask more (a secret in a URL's query).
"""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from agents.models import Task

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "sk_live_51HxYzAbCdEfGhIjKlMnOpQr"


@contextmanager
def tasks_made_before(migration: str):
    """The database as of agents' `migration`: yields a function that adds a task there; then
    every migration runs (on the way out too, whatever happened)."""
    executor = MigrationExecutor(connection)
    leaves = executor.loader.graph.leaf_nodes()
    before = [("agents", migration), *(node for node in leaves if node[0] != "agents")]
    executor.migrate(before)
    try:
        apps = MigrationExecutor(connection).loader.project_state(before).apps
        agent = apps.get_model("agents", "Agent").objects.create(name="a", namespace="ns")
        old = apps.get_model("agents", "Task").objects

        def add(goal: str, ref: str, **fields) -> None:
            old.create(agent=agent, goal=goal, external_ref=ref, limits={},
                       deadline_at=timezone.now(), **fields)  # fmt: skip

        yield add
    finally:
        MigrationExecutor(connection).migrate(leaves)


def test_the_tasks_already_there_are_searched_masked_when_they_hold_a_secret():
    with tasks_made_before("0027_i43_task_state_counts") as add:
        for goal, ref in [(f"pay with {SECRET}", ""), ("plain goal", f"ref {SECRET}"),
                          ("nothing secret here", "ZD-1")]:  # fmt: skip
            add(goal, ref)

    masked = dict(Task.objects.values_list("goal", "masked_search"))
    assert masked == {
        f"pay with {SECRET}": "pay with •••\n",
        "plain goal": "plain goal\nref •••",
        "nothing secret here": None,
    }


def test_a_secret_in_a_urls_query_is_no_longer_searchable():
    url = "https://api.example.com/v1/export?api_key=Zx81kdP0qLm2"
    with tasks_made_before("0029_task_ids_by_time") as add:
        # As the policy left them: a URL's query unmasked, so no masked text.
        add(f"export from {url}", "")
        add("plain goal", "url=https://x.example.com/a?token=abc123def456")
        add(f"pay with {SECRET}", "", masked_search="pay with •••\n")
        add("page through https://example.com/a?page=2&sort=due_at", "")

    masked = dict(Task.objects.values_list("goal", "masked_search"))
    assert masked == {
        f"export from {url}": "export from https://api.example.com/v1/export?api_key=•••\n",
        "plain goal": "plain goal\nurl=https://x.example.com/a?token=•••",
        f"pay with {SECRET}": "pay with •••\n",
        "page through https://example.com/a?page=2&sort=due_at": None,
    }
