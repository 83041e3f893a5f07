"""Parallel agents against several web workers: no request errors, on SQLite too.

On SQLite the workers share one file: WAL lets readers run beside the writer, IMMEDIATE
transactions take the write lock at BEGIN (a decision never fails half-way on a lock upgrade)
and the busy timeout makes writers queue instead of failing with "database is locked".
"""

from __future__ import annotations

import pytest

from agents.guard import terms
from agents.models import AgentDay, Task
from ledger.models import Operation
from tests.live import race

pytestmark = pytest.mark.django_db(transaction=True)

AGENTS = 8
ROUNDS = 5


def test_parallel_agent_loops_get_no_errors_and_exact_counters(make_agent, api_for):
    _, token = make_agent("crowd", namespace="ns-crowd")
    api = api_for(token)
    task_ids = [api.post("tasks", {"goal": f"export {i}"})[1]["id"] for i in range(AGENTS)]
    seen: list[tuple[str, int, object]] = []

    def loop(task_id: str) -> None:
        """Gate, settle, request a tool, report progress; one write per round in the ledger."""
        for n in range(1, ROUNDS + 1):
            steps = []
            status, answer = api.post(f"tasks/{task_id}/model-calls", {"est_prompt_tokens": 10})
            steps.append(("gate", status, answer))
            usage = {"prompt_tokens": 10, "completion_tokens": 5,
                     "tool_calls": [{"name": "export_page", "args": {"page": n}}]}  # fmt: skip
            call = answer.get("model_call")
            status, answer = api.post(f"tasks/{task_id}/model-calls/{call}/usage", usage)
            steps.append(("usage", status, answer))
            request = {"tool": "export_page", "args": {"page": n}, "effect": "write",
                       "operation_key": f"{task_id}-page-{n}", "model_call": call}  # fmt: skip
            status, answer = api.post(f"tasks/{task_id}/tool-calls", request)
            steps.append(("tool", status, answer))
            result = {"kind": "SUCCESS", "data": {"page": n},
                      "evidence": {"revision": n, "done": False, "committed": True}}  # fmt: skip
            status, answer = api.post(
                f"tasks/{task_id}/tool-calls/{answer.get('tool_call')}/result", result
            )
            steps.append(("result", status, answer))
            seen.extend(steps)

    race([lambda t=t: loop(t) for t in task_ids])

    assert [(step, status) for step, status, _ in seen if status != 200] == []
    expected = {
        "gate": terms.ALLOW, "usage": terms.CONTINUE,
        "tool": terms.EXECUTE, "result": terms.CONTINUE,
    }  # fmt: skip
    assert [(step, a) for step, _, a in seen if a["decision"] != expected[step]] == []
    for task in Task.objects.filter(pk__in=task_ids):
        assert task.state == terms.RUNNING
        assert (task.model_calls, task.tool_executions, task.revision) == (ROUNDS,) * 3
        assert task.trace_seq == 2 * ROUNDS
    assert Operation.objects.filter(namespace="ns-crowd", state=terms.OP_COMMITTED).count() == (
        AGENTS * ROUNDS
    )
    assert AgentDay.objects.filter(agent__name="crowd").count() == 1
