"""Novelty mode keeps the data hashes it has seen in a table of their own (issue 8, hole 7), so
a decision reads and writes the same few rows whether the task saw ten hashes or ten thousand."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from agents.models import LimitProfile

from .helpers import execute, get_task, new_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def novelty_task(agent_api, agent):
    # The built-in `novelty` profile exists (migration 0006); this test wants its own limits.
    profile, _ = LimitProfile.objects.update_or_create(
        name="novelty", defaults={"progress_mode": "novelty", "max_stagnant": 5}
    )
    agent[1].default_profile = profile
    agent[1].save()
    return new_task(agent_api)


def seen(agent_api, task_id, data_hash):
    _, answer = execute(
        agent_api, task_id, "fetch", {"page": data_hash},
        result={"kind": "SUCCESS", "data_hash": data_hash},
    )  # fmt: skip
    return answer


def test_it_stores_each_seen_hash_once_in_its_own_table(agent_api, novelty_task):
    task_id = novelty_task["id"]
    for data_hash in ("hash-one", "hash-two"):
        seen(agent_api, task_id, data_hash)
    SeenHash = apps.get_model("agents", "SeenHash")

    assert sorted(SeenHash.objects.filter(task_id=task_id).values_list("hash", flat=True)) == [
        "hash-one",
        "hash-two",
    ]
    with pytest.raises(IntegrityError), transaction.atomic():
        SeenHash.objects.create(task_id=task_id, hash="hash-one")


def test_a_repeated_hash_is_not_progress(agent_api, novelty_task):
    task_id = novelty_task["id"]
    seen(agent_api, task_id, "hash-one")
    _, answer = execute(
        agent_api, task_id, "fetch", {"page": "again"},
        result={"kind": "SUCCESS", "data_hash": "hash-one"},
    )  # fmt: skip

    assert answer["decision"] == "CONTINUE"
    assert get_task(agent_api, task_id)["stagnant"] == 1


def test_a_decision_does_not_read_or_write_the_earlier_hashes(agent_api, novelty_task):
    task_id = novelty_task["id"]
    for n in range(15):
        seen(agent_api, task_id, f"early-hash-{n:03}")

    with CaptureQueriesContext(connection) as queries:
        seen(agent_api, task_id, "late-hash")

    sent = " ".join(q["sql"] for q in queries.captured_queries)
    assert "late-hash" in sent
    assert "early-hash-000" not in sent
