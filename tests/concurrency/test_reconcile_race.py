"""An operator's reconciliation racing the agent's retry of the same write: no deadlock.

Every service locks the task row before an operation row. A reconciliation that took the
operation first and then wrote its audit event (which references the task, so PostgreSQL waits
for the task row) deadlocked with a tool request holding the task and waiting for the
operation; one side got a 500. Each trial races the two once, at the moment the claim's lease
has run out and the reconciliation is allowed.
"""

from __future__ import annotations

import time
from functools import partial

import pytest

from agents.guard import terms
from agents.models import Task
from ledger.models import Operation
from tests.live import race

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("on_postgres"),
]

TRIALS = 20


def test_a_reconciliation_racing_a_retry_of_its_write_never_deadlocks(
    make_agent, make_user, api_for
):
    _, agent_token = make_agent("payer", namespace="ns-pay")
    _, operator_token = make_user("olivia")
    agent, operator = api_for(agent_token), api_for(operator_token)
    trials = []
    for n in range(TRIALS):
        task_id = agent.post("tasks", {"goal": f"pay {n}", "limits": {"lease_seconds": 1}})[1]["id"]
        call = {"tool": "pay", "args": {"invoice": n}, "effect": "write",
                "operation_key": f"pay-{n}"}  # fmt: skip
        status, answer = agent.post(f"tasks/{task_id}/tool-calls", call)
        assert (status, answer["decision"]) == (200, terms.EXECUTE)
        trials.append((task_id, call, Operation.objects.get(operation_key=f"pay-{n}").pk))
    time.sleep(1.2)  # every lease is over: the operator may reconcile, the agent retries

    verdict = {"verdict": terms.NOT_COMMITTED, "note": "the provider has no such payment"}
    for task_id, call, operation_id in trials:
        retry, reconciled = race(
            [
                partial(agent.post, f"tasks/{task_id}/tool-calls", call),
                partial(operator.post, f"operations/{operation_id}/reconcile", verdict),
            ]
        )
        assert (retry[0], reconciled[0]) == (200, 200), (retry, reconciled)
        operation = Operation.objects.get(pk=operation_id)
        task = Task.objects.get(pk=task_id)
        if retry[1]["decision"] == terms.EXECUTE:
            # Reconciled first: NOT_COMMITTED may run again, and the retry claimed it.
            assert (operation.state, operation.tool_call.pk) == (
                terms.IN_FLIGHT,
                retry[1]["tool_call"],
            )
        else:
            # The retry first: an expired claim is UNKNOWN, then reconciled NOT_COMMITTED.
            assert retry[1]["decision"] == terms.STOP
            assert (task.state, task.reason) == (terms.NEEDS_HUMAN, "unknown_commit")
            assert operation.state == terms.NOT_COMMITTED
