"""What the three examples share: the story they play, its two tools, and how a run is shown.

The scripted model loops: it asks for the same search again and again (the search runs twice,
then Loopwarden stops the task as a loop, GUARD_LOOP_DETECTED), then, in a second task, pays
an invoice whose response is lost (NO_RESULT: the payment may have happened, so the task
waits for a human: NEEDS_HUMAN). In a third task it searches once and answers: the run ends
well, and the adapter finishes the task (PARTIAL/goal_unverified: no verifier confirmed the
goal; COMPLETED when one does). Not an example itself: each `guard_*.py` beside it imports
it and adds its framework's agent. Against a running `./dev run`:

    export LOOPWARDEN_TOKEN=$(python manage.py create_agent example-bot \
        --profile novelty | tail -n1)
    python examples/guard_langchain.py   # or guard_openai_agents.py, guard_pydantic_ai.py
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from typing import Any

from loopwarden_client import Client, TaskSession, TaskStopped
from loopwarden_client.guard import write

# `./dev run`'s address (PORT, as `PORT=8001 ./dev run` chose), unless LOOPWARDEN_URL says.
URL = (
    os.environ.get("LOOPWARDEN_URL") or f"http://127.0.0.1:{os.environ.get('PORT', '8000')}/api/v1/"
)
TOKEN = os.environ["LOOPWARDEN_TOKEN"]
INVOICE = f"INV-{uuid.uuid4().hex[:6]}"
TOOLS = {"pay": write(key="pay-{invoice}")}  # how each payment's operation key is derived

# (goal, the tool call the model asks for, its arguments, the answer it gives after the first
# result: None for a model that keeps asking for the same call)
TASKS = [
    ("Find the refund policy", "search", {"query": "refund policy"}, None),
    (f"Pay invoice {INVOICE}", "pay", {"invoice": INVOICE, "amount": "1250.00"}, None),
    ("Tell a customer how long refunds take", "search", {"query": "refund policy"},
     "Refunds take 5 days."),
]  # fmt: skip

# build(session, tool, args, answer) -> (what holds the task's report as `report`, run(goal))
Build = Callable[
    [TaskSession, str, dict[str, Any], str | None], tuple[Any, Callable[[str], object]]
]


def search(query: str) -> str:
    """Search the knowledge base."""
    print(f"  search({query!r}) ran")
    return "Refunds take 5 days."


def pay(invoice: str, amount: str) -> str:
    """Pay an invoice."""
    print(f"  pay({invoice}, {amount}) ran, and its response was lost")
    raise TimeoutError("the payment provider did not answer")


def main(build: Build) -> None:
    """Play the tasks with the framework's guarded agent, then show how each ended."""
    with Client(URL, TOKEN) as lw:
        for goal, tool, args, answer in TASKS:
            task = lw.create_task(goal)
            print(f"task {task['id']}: {goal}")
            guard, run = build(lw.session(task["id"]), tool, args, answer)
            try:
                run(goal)
            except TaskStopped:  # a tool STOP ends the run with this error
                print("  TaskStopped raised by the tool call")
            # A model STOP ends the run cleanly instead, and a final answer finishes the task;
            # either way the guard holds the task's report.
            report = guard.report
            if report["reason"] in ("goal_met", "goal_unverified"):
                print(f"  answered, and finished: {report['state']}/{report['reason']}")
            else:
                print(f"  stopped: {report['state']}/{report['reason']} ({report['code']})")
            if report.get("resume_condition"):
                print(f"  {report['resume_condition']}")
            console = URL.split("/api/")[0]
            print(f"  console: {console}/tasks/{task['id']}/")
