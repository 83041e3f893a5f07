"""A LangChain v1 agent guarded by Loopwarden, with a scripted model (no network, no API key).

The model loops: it asks for the same search again and again (the search runs twice, then
Loopwarden stops the task as a loop, GUARD_LOOP_DETECTED), then, in a second task, pays an
invoice whose response is lost (NO_RESULT: the payment may have happened, so the task waits
for a human: NEEDS_HUMAN).

    pip install './clients/python[langchain]'      # ./dev has done it in .venv
    export LOOPWARDEN_TOKEN=$(python manage.py create_agent example-bot \
        --profile novelty | tail -n1)
    python examples/guard_langchain.py             # against a running `./dev run`
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from loopwarden_client import Client, TaskStopped
from loopwarden_client.guard import write
from loopwarden_client.langchain import LoopwardenMiddleware

URL = os.environ.get("LOOPWARDEN_URL", "http://127.0.0.1:8000/api/v1/")
TOKEN = os.environ["LOOPWARDEN_TOKEN"]
INVOICE = f"INV-{uuid.uuid4().hex[:6]}"


class LoopingModel(BaseChatModel):
    """Always asks for the same tool call: the loop Loopwarden exists to stop."""

    call: dict[str, Any]

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> LoopingModel:
        return self

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:  # fmt: skip
        call = {**self.call, "id": f"call-{uuid.uuid4().hex[:8]}"}
        usage = {"input_tokens": 900, "output_tokens": 40, "total_tokens": 940}
        message = AIMessage(content="", tool_calls=[call], usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=message)])


@tool
def search(query: str) -> str:
    """Search the knowledge base."""
    print(f"  search({query!r}) ran")
    return "Refunds take 5 days."


@tool
def pay(invoice: str, amount: str) -> str:
    """Pay an invoice."""
    print(f"  pay({invoice}, {amount}) ran, and its response was lost")
    raise TimeoutError("the payment provider did not answer")


def guarded_run(lw: Client, goal: str, call: dict[str, Any]) -> None:
    task = lw.create_task(goal)
    print(f"task {task['id']}: {goal}")
    guard = LoopwardenMiddleware(lw.session(task["id"]), tools={"pay": write(key="pay-{invoice}")})
    agent = create_agent(LoopingModel(call=call), [search, pay], middleware=[guard])
    try:
        agent.invoke({"messages": [{"role": "user", "content": goal}]})
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
    guarded_run(lw, "Find the refund policy",
                {"name": "search", "args": {"query": "refund policy"}})  # fmt: skip
    guarded_run(lw, f"Pay invoice {INVOICE}",
                {"name": "pay", "args": {"invoice": INVOICE, "amount": "1250.00"}})  # fmt: skip
