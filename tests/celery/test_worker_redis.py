"""Acceptance, with real processes: a Celery worker (and beat) on the local Redis, agents that
die, reconcilers that answer or hang. CI runs these with `-m celery_redis`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from django.db import connection

from agents.guard import terms
from agents.models import Event, LimitProfile, Notification, Task
from ledger.jobs import reconcile_unknown_operations
from ledger.models import Operation, Reconciliation
from tests.celery.helpers import ROOT, celery_processes, fake_endpoint, wait_for, worker_args

pytestmark = [pytest.mark.celery_redis, pytest.mark.django_db(transaction=True)]

REDIS_URL = os.environ.get("LOOPWARDEN_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture
def redis_url():
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        pytest.fail(f"these tests need Redis at {REDIS_URL}: {exc}")
    return REDIS_URL


@pytest.fixture
def celery(redis_url, tmp_path, request):
    """Start processes with `celery.start(...)`; extra worker env via indirect params."""
    env = getattr(request, "param", {})
    with celery_processes(
        broker_url=redis_url, db_settings=connection.settings_dict, data_dir=tmp_path / "data",
        **env,
    ) as procs:  # fmt: skip
        yield procs


AGENT = """
import json, sys, time
from loopwarden_client import Client

client = Client(sys.argv[1], sys.argv[2])
task = client.create_task("Send the March invoices")
answer = client.request_tool(task["id"], "send_invoice", {"invoice": 42}, effect="write",
                             operation_key="invoice-42")
print(json.dumps({"task": task["id"], "decision": answer["decision"]}), flush=True)
time.sleep(600)  # executing the write... until someone kills this process
"""


def test_a_killed_agent_ends_unknown_needs_human_notified_once_and_queued(
    celery, live_server, agent, operator_api
):
    LimitProfile.objects.update_or_create(name="default", defaults={"lease_seconds": 1})
    token = agent[0].token
    with fake_endpoint() as webhook:
        celery.env.update(
            SWEEP_INTERVAL_SECONDS="1", NOTIFY_WEBHOOK_URL=webhook.url, NOTIFY_EMAILS="",
            SITE_URL=live_server.url,
        )  # fmt: skip
        celery.start("worker", *worker_args("acceptance"), ready=" ready.")
        celery.start("beat", "--loglevel=INFO", ready="beat: Starting")

        process = subprocess.Popen(
            [sys.executable, "-c", AGENT, f"{live_server.url}/api/v1/", token],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        try:
            said = json.loads(process.stdout.readline())
        finally:
            process.kill()  # the agent dies right after EXECUTE, before any result
            process.wait(timeout=10)
        assert said["decision"] == "EXECUTE"
        task_id = said["task"]

        wait_for(
            lambda: Notification.objects.filter(task_id=task_id, sent_at__isnull=False).exists(),
            timeout=60, message="no notification was sent", logs=celery.logs,
        )  # fmt: skip
        time.sleep(3)  # three more beats: nothing more may be sent

        bodies = [b for b in webhook.bodies() if b and b.get("task") == task_id]
    task = Task.objects.get(pk=task_id)
    operation = Operation.objects.get(operation_key="invoice-42")
    assert (task.state, task.reason) == (terms.NEEDS_HUMAN, "unknown_commit")
    assert operation.state == terms.UNKNOWN
    assert Notification.objects.filter(task_id=task_id).count() == 1
    assert len(bodies) == 1
    assert bodies[0]["event"] == "task.needs_human"
    assert bodies[0]["url"] == f"{live_server.url}/tasks/{task_id}/"
    assert task.events.filter(kind="task_stopped", actor="system:lease_sweep").count() == 1
    queue = operator_api.get("operations?state=UNKNOWN")
    assert queue.status_code == 200
    assert [op["key"] for op in queue.body["operations"]] == ["invoice-42"]


@pytest.fixture
def unknown(make_task, start_write):
    operation = start_write(make_task())
    Operation.objects.filter(pk=operation.pk).update(state=terms.UNKNOWN)
    return operation


QUICK = {"RECONCILE_TIMEOUT_SECONDS": "1", "RECONCILE_BACKOFF_SECONDS": "1",
         "RECONCILE_MAX_CHECKS": "3"}  # fmt: skip


@pytest.mark.parametrize("celery", [QUICK], indirect=True)
def test_a_reconciler_that_answers_committed_settles_the_operation(
    celery, unknown, reconciler_policy
):
    with fake_endpoint(answer={"state": "committed", "result": {"id": "inv_42"}}) as endpoint:
        reconciler_policy(endpoint.url)
        celery.start("worker", *worker_args("reconcile"), ready=" ready.")
        celery.send(reconcile_unknown_operations)

        wait_for(
            lambda: Operation.objects.get(pk=unknown.pk).state != terms.UNKNOWN,
            timeout=30, message="the reconciler's answer was not applied", logs=celery.logs,
        )  # fmt: skip

    unknown.refresh_from_db()
    assert (unknown.state, unknown.result) == (terms.OP_COMMITTED, {"id": "inv_42"})
    row = Reconciliation.objects.get(operation=unknown)
    assert (row.automatic, row.actor, row.verdict) == (True, "reconciler:send_invoice", "COMMITTED")
    assert len(endpoint.requests) == 1


@pytest.mark.parametrize("celery", [QUICK], indirect=True)
def test_a_reconciler_that_times_out_leaves_it_unknown_after_bounded_retries(
    celery, unknown, reconciler_policy
):
    with fake_endpoint(delay=3) as endpoint:
        reconciler_policy(endpoint.url)
        celery.start("worker", *worker_args("reconcile-timeout"), ready=" ready.")
        celery.send(reconcile_unknown_operations)

        wait_for(
            lambda: Event.objects.filter(kind="reconcile_no_answer").exists(),
            timeout=60, message="the checks did not give up", logs=celery.logs,
        )  # fmt: skip
        seen = len(endpoint.requests)

    unknown.refresh_from_db()
    assert (unknown.state, unknown.reconcile_checks) == (terms.UNKNOWN, 3)
    assert seen == 3
    assert not Reconciliation.objects.exists()
    times = [r["at"] for r in endpoint.requests]
    assert times == sorted(times)
