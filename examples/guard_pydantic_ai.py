"""A pydantic-ai agent guarded by Loopwarden, with a scripted model (no network, no API key).

The model loops: it asks for the same search again and again (the search runs twice, then
Loopwarden stops the task as a loop, GUARD_LOOP_DETECTED), then, in a second task, pays an
invoice whose response is lost (NO_RESULT: the payment may have happened, so the task waits
for a human: NEEDS_HUMAN).

    pip install './clients/python[pydantic-ai]'    # ./dev has done it in .venv
    export LOOPWARDEN_TOKEN=$(python manage.py create_agent example-bot \
        --profile novelty | tail -n1)
    python examples/guard_pydantic_ai.py           # against a running `./dev run`
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from loopwarden_client import Client, TaskStopped
from loopwarden_client.guard import write
from loopwarden_client.pydantic_ai import LoopwardenCapability
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

URL = os.environ.get("LOOPWARDEN_URL", "http://127.0.0.1:8000/api/v1/")
TOKEN = os.environ["LOOPWARDEN_TOKEN"]
INVOICE = f"INV-{uuid.uuid4().hex[:6]}"


def looping_model(tool: str, args: dict[str, Any]) -> FunctionModel:
    """Always asks for the same tool call: the loop Loopwarden exists to stop."""

    def answer(messages: list[Any], info: AgentInfo) -> ModelResponse:
        call = ToolCallPart(tool_name=tool, args=args, tool_call_id=uuid.uuid4().hex[:8])
        return ModelResponse(parts=[call], usage=RequestUsage(input_tokens=900, output_tokens=40))

    return FunctionModel(answer)


def search(query: str) -> str:
    """Search the knowledge base."""
    print(f"  search({query!r}) ran")
    return "Refunds take 5 days."


def pay(invoice: str, amount: str) -> str:
    """Pay an invoice."""
    print(f"  pay({invoice}, {amount}) ran, and its response was lost")
    raise TimeoutError("the payment provider did not answer")


def guarded_run(lw: Client, goal: str, tool: str, args: dict[str, Any]) -> None:
    task = lw.create_task(goal)
    print(f"task {task['id']}: {goal}")
    guard = LoopwardenCapability(lw.session(task["id"]), tools={"pay": write(key="pay-{invoice}")})
    agent = Agent(looping_model(tool, args), tools=[search, pay], capabilities=[guard])
    try:
        agent.run_sync(goal)
    except TaskStopped:  # a tool STOP ends the run with this error
        print("  TaskStopped raised by the tool call")
    # A model STOP ends the run cleanly instead; either way the guard holds the stop report.
    report = guard.report
    print(f"  stopped: {report['state']}/{report['reason']} ({report['code']})")
    if report.get("resume_condition"):
        print(f"  {report['resume_condition']}")
    console = URL.split("/api/")[0]
    print(f"  console: {console}/tasks/{task['id']}/")


with Client(URL, TOKEN) as lw:
    guarded_run(lw, "Find the refund policy", "search", {"query": "refund policy"})
    guarded_run(lw, f"Pay invoice {INVOICE}", "pay", {"invoice": INVOICE, "amount": "1250.00"})
