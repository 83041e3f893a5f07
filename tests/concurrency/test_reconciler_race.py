"""A reconciler's answer racing an operator and a new claim of the same write key.

The reconciler is asked about one UNKNOWN episode of an operation, over HTTP, outside any
transaction. While it answers, an operator reconciles the episode NOT_COMMITTED, another task
executes the key again, and that execution ends with no result: a new UNKNOWN episode nobody
has asked about. The reconciler's answer speaks of the world before that execution; applied
to the new episode it would let the key run a third time although the second run may have
committed (docs/DESIGN.md: "write timed out ... never blind-retry; a human reconciles").
"""

from __future__ import annotations

import threading
from unittest import mock

import pytest
from django.db import connection

from agents.guard import terms
from agents.models import Task
from ledger import reconcilers
from ledger.models import Operation, Reconciliation

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("on_postgres"),
]

CALL = {"tool": "send_invoice", "args": {"invoice": 9}, "effect": "write",
        "operation_key": "invoice-9"}  # fmt: skip
NO_RESULT = {"kind": "NO_RESULT", "error": "timed out"}


def test_a_late_reconciler_answer_never_settles_a_newer_unknown_episode(
    make_agent, make_user, api_for, reconciler_policy
):
    _, agent_token = make_agent("invoicer", namespace="ns-invoice")
    _, operator_token = make_user("olivia")
    agent, operator = api_for(agent_token), api_for(operator_token)
    reconciler_policy("http://127.0.0.1:9/never-called")  # the answer is mocked below
    first, second, third = (
        agent.post("tasks", {"goal": f"invoice {n}"})[1]["id"] for n in range(3)
    )

    # Episode 1: the first task's write times out; the key is UNKNOWN.
    status, asked = agent.post(f"tasks/{first}/tool-calls", CALL)
    assert (status, asked["decision"]) == (200, terms.EXECUTE)
    status, _ = agent.post(f"tasks/{first}/tool-calls/{asked['tool_call']}/result", NO_RESULT)
    assert status == 200
    operation = Operation.objects.get(namespace="ns-invoice", operation_key="invoice-9")
    assert operation.state == terms.UNKNOWN

    # The reconciler is asked about episode 1 and takes its time to answer.
    reconciler_asked, answer_now = threading.Event(), threading.Event()
    outcome: list[object] = []

    def slow_answer(url, op):
        reconciler_asked.set()
        assert answer_now.wait(60)
        return {"state": "not_committed"}  # true of episode 1: the provider had nothing then

    def check() -> None:
        try:
            outcome.append(reconcilers.operation_check(operation_id=operation.pk, attempt=0))
        finally:
            connection.close()

    with mock.patch.object(reconcilers, "ask_reconciler", slow_answer):
        checker = threading.Thread(target=check)
        checker.start()
        try:
            assert reconciler_asked.wait(30)
            # Meanwhile an operator settles episode 1, the second task runs the key again
            # and that run times out too: episode 2, which nobody has reconciled.
            verdict = {"verdict": terms.NOT_COMMITTED, "note": "the provider has nothing"}
            status, body = operator.post(f"operations/{operation.pk}/reconcile", verdict)
            assert status == 200, body
            status, asked = agent.post(f"tasks/{second}/tool-calls", CALL)
            assert (status, asked["decision"]) == (200, terms.EXECUTE)
            path = f"tasks/{second}/tool-calls/{asked['tool_call']}/result"
            status, answer = agent.post(path, NO_RESULT)
            assert (status, answer["decision"]) == (200, terms.STOP)
            operation.refresh_from_db()
            assert (operation.state, operation.attempts) == (terms.UNKNOWN, 2)
        finally:
            answer_now.set()
            checker.join(60)

    operation.refresh_from_db()
    assert operation.state == terms.UNKNOWN, (
        f"the reconciler's answer about episode 1 settled episode 2: {outcome}"
    )
    assert not Reconciliation.objects.filter(operation=operation, automatic=True).exists()
    status, asked = agent.post(f"tasks/{third}/tool-calls", CALL)
    assert status == 200 and asked["decision"] != terms.EXECUTE, asked
    assert Task.objects.get(pk=second).state == terms.NEEDS_HUMAN
