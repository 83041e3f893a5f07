"""An OpenAI Agents SDK agent guarded by Loopwarden, with a scripted model (no network, no key).

The model loops: it asks for the same search again and again (the search runs twice, then
Loopwarden stops the task as a loop, GUARD_LOOP_DETECTED), then, in a second task, pays an
invoice whose response is lost (NO_RESULT: the payment may have happened, so the task waits
for a human: NEEDS_HUMAN).

    pip install './clients/python[openai-agents]'  # ./dev has done it in .venv
    export LOOPWARDEN_TOKEN=$(python manage.py create_agent example-bot \
        --profile novelty | tail -n1)
    python examples/guard_openai_agents.py         # against a running `./dev run`
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from typing import Any

from loopwarden_client import Client, TaskStopped
from loopwarden_client.guard import write
from loopwarden_client.openai_agents import guard_agent
from openai.types.responses import ResponseFunctionToolCall

from agents import (
    Agent,
    Model,
    ModelResponse,
    Runner,
    Usage,
    function_tool,
    set_tracing_disabled,
)

URL = os.environ.get("LOOPWARDEN_URL", "http://127.0.0.1:8000/api/v1/")
TOKEN = os.environ["LOOPWARDEN_TOKEN"]
INVOICE = f"INV-{uuid.uuid4().hex[:6]}"
set_tracing_disabled(True)  # nothing leaves this machine


class LoopingModel(Model):
    """Always asks for the same tool call: the loop Loopwarden exists to stop."""

    def __init__(self, name: str, args: dict[str, Any]) -> None:
        self.name, self.args = name, args

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        call = ResponseFunctionToolCall(
            call_id=f"call_{uuid.uuid4().hex[:8]}",
            name=self.name,
            arguments=json.dumps(self.args),
            type="function_call",
        )
        usage = Usage(requests=1, input_tokens=900, output_tokens=40, total_tokens=940)
        return ModelResponse(output=[call], usage=usage, response_id=None)

    async def stream_response(self, *args: Any, **kwargs: Any):
        raise NotImplementedError("this example does not stream")
        yield


@function_tool
def search(query: str) -> str:
    """Search the knowledge base."""
    print(f"  search({query!r}) ran")
    return "Refunds take 5 days."


@function_tool
def pay(invoice: str, amount: str) -> str:
    """Pay an invoice."""
    print(f"  pay({invoice}, {amount}) ran, and its response was lost")
    raise TimeoutError("the payment provider did not answer")


def guarded_run(lw: Client, goal: str, tool: str, args: dict[str, Any]) -> None:
    task = lw.create_task(goal)
    print(f"task {task['id']}: {goal}")
    agent = Agent(name="clerk", model=LoopingModel(tool, args), tools=[search, pay])
    agent = guard_agent(agent, lw.session(task["id"]), tools={"pay": write(key="pay-{invoice}")})
    try:
        asyncio.run(Runner.run(agent, goal, max_turns=20))
    except TaskStopped:  # a tool STOP ends the run with this error
        print("  TaskStopped raised by the tool call")
    # A model STOP ends the run cleanly instead; either way the guard holds the stop report.
    report = agent.loopwarden.report
    print(f"  stopped: {report['state']}/{report['reason']} ({report['code']})")
    if report.get("resume_condition"):
        print(f"  {report['resume_condition']}")
    console = URL.split("/api/")[0]
    print(f"  console: {console}/tasks/{task['id']}/")


with Client(URL, TOKEN) as lw:
    guarded_run(lw, "Find the refund policy", "search", {"query": "refund policy"})
    guarded_run(lw, f"Pay invoice {INVOICE}", "pay", {"invoice": INVOICE, "amount": "1250.00"})
