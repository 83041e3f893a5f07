"""Agents 0028 fills `Task.masked_search` for the tasks already there whose goal or
external_ref holds a secret, and leaves it null for the rest (the search reads their raw text).
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from agents.models import Task

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = ("agents", "0027_i43_task_state_counts")
SECRET = "sk_live_51HxYzAbCdEfGhIjKlMnOpQr"


def test_the_tasks_already_there_are_searched_masked_when_they_hold_a_secret():
    executor = MigrationExecutor(connection)
    leaves = executor.loader.graph.leaf_nodes()
    before = [BEFORE, *(node for node in leaves if node[0] != "agents")]
    executor.migrate(before)
    try:
        apps = MigrationExecutor(connection).loader.project_state(before).apps
        agent = apps.get_model("agents", "Agent").objects.create(name="a", namespace="ns")
        old = apps.get_model("agents", "Task").objects
        for goal, ref in [(f"pay with {SECRET}", ""), ("plain goal", f"ref {SECRET}"),
                          ("nothing secret here", "ZD-1")]:  # fmt: skip
            old.create(agent=agent, goal=goal, external_ref=ref, limits={},
                       deadline_at=timezone.now())  # fmt: skip

        MigrationExecutor(connection).migrate(leaves)

        masked = dict(Task.objects.values_list("goal", "masked_search"))
        assert masked == {
            f"pay with {SECRET}": "pay with •••\n",
            "plain goal": "plain goal\nref •••",
            "nothing secret here": None,
        }
    finally:
        MigrationExecutor(connection).migrate(leaves)
