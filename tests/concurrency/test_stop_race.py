"""An operator's stop racing with tool requests: once the stop commits, nothing EXECUTEs.

The task row lock serializes the stop with every decision, and `trace_seq` numbers the
decisions in the order they took that lock. So the trace must split cleanly: EXECUTEs first,
then only STOPs. A stop that did not take the lock (or a request that decided on a stale read
of the task) shows up here as an EXECUTE numbered after a STOP, an EXECUTE row written after
the stop's audit event, an EXECUTE answered to a request sent after the stop returned, or a
task that is RUNNING again.
"""

from __future__ import annotations

import threading
import time

import pytest

from agents.guard import terms
from agents.models import Event, Task, ToolCall
from tests.live import race

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("on_postgres"),
]

THREADS = 5
PER_THREAD = 4  # 20 tool requests in all
STOP_AFTER = 4  # answers seen before the operator presses stop, so both sides are non-empty


def test_no_execute_is_decided_after_a_racing_stop_committed(make_agent, make_user, api_for):
    _, agent_token = make_agent("runaway", namespace="ns-runaway")
    _, operator_token = make_user("olivia")
    agent, operator = api_for(agent_token), api_for(operator_token)
    task_id = agent.post("tasks", {"goal": "look everything up"})[1]["id"]

    answered = threading.Semaphore(0)
    stop_returned: list[float] = []
    sent: list[tuple[float, int, dict]] = []  # (sent at, status, answer)
    lock = threading.Lock()

    def requests(thread: int) -> None:
        for n in range(PER_THREAD):
            body = {"tool": "lookup", "args": {"thread": thread, "n": n}, "effect": "read"}
            at = time.monotonic()
            status, answer = agent.post(f"tasks/{task_id}/tool-calls", body)
            with lock:
                sent.append((at, status, answer))
            answered.release()

    def stop() -> None:
        for _ in range(STOP_AFTER):
            answered.acquire(timeout=60)
        stop_request = {"reason": "runaway", "request_id": "s1"}
        status, _ = operator.post(f"tasks/{task_id}/stop", stop_request)
        assert status == 200
        stop_returned.append(time.monotonic())

    race([lambda t=t: requests(t) for t in range(THREADS)] + [stop])

    assert [status for _, status, _ in sent] == [200] * THREADS * PER_THREAD, sent
    decisions = {answer["decision"] for _, _, answer in sent}
    assert decisions <= {terms.EXECUTE, terms.STOP}, decisions
    late = [answer for at, _, answer in sent if at > stop_returned[0]]
    assert all(answer["decision"] == terms.STOP for answer in late), late

    task = Task.objects.get(pk=task_id)
    assert (task.state, task.reason) == (terms.STOPPED, "operator_stop")
    calls = list(ToolCall.objects.filter(task=task).order_by("seq"))
    executed = [c for c in calls if c.decision == terms.EXECUTE]
    stopped = [c for c in calls if c.decision == terms.STOP]
    assert len(executed) >= STOP_AFTER and stopped, "the race should leave both kinds"
    assert len(executed) + len(stopped) == len(calls) == THREADS * PER_THREAD
    # The trace splits cleanly: every EXECUTE took the task lock before the stop did.
    assert max(c.seq for c in executed) < min(c.seq for c in stopped)
    assert [c.seq for c in calls] == list(range(1, len(calls) + 1))
    stop_event = Event.objects.get(task=task, kind="stop_requested")
    assert stop_event.detail["applied"] is True
    assert all(c.created_at <= stop_event.created_at for c in executed)
    assert all(c.created_at >= stop_event.created_at for c in stopped)
    assert task.ended_at is not None and task.ended_at <= stop_event.created_at
    # Counted only what was decided while RUNNING; a stopped task counts nothing.
    assert task.tool_requests == task.tool_executions == len(executed)
    assert task.report["usage"]["tool_executions"] == len(executed)
