"""What every adapter's end-to-end tests check, read from the live server's trace."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loopwarden_client import Client
from loopwarden_client.guard import write

# The tool policy every adapter test guards with, and the search the looping scripts repeat.
PAY = {"pay": write(key="pay-{invoice}")}
SEARCH = ("search", {"query": "refund policy"})


class Tools:
    """The tools an agent gets, counting their real executions. `wrap` is the framework's tool
    decorator (a subclass names it; pydantic-ai takes the plain functions)."""

    wrap: Callable[[Callable[..., str]], Any] = staticmethod(lambda fn: fn)

    def __init__(self, lose_payment: bool = False) -> None:
        self.ran: list[str] = []
        ran = self.ran

        def search(query: str) -> str:
            """Search the knowledge base."""
            ran.append("search")
            return "Refunds take 5 days."

        def fetch_page(page: int) -> str:
            """Fetch one page of invoices."""
            ran.append("fetch_page")
            return f"invoices on page {page}: INV-{page}01, INV-{page}02"

        def pay(invoice: str, amount: str) -> str:
            """Pay an invoice."""
            ran.append("pay")
            if lose_payment:
                raise TimeoutError("the payment provider did not answer")
            return f"paid {invoice}"

        self.all = [self.wrap(fn) for fn in (search, fetch_page, pay)]


def tool_decisions(lw: Client, task_id: str) -> list[str]:
    return [c["decision"] for c in lw.trace(task_id)["calls"] if c["type"] == "tool_call"]


def model_calls(lw: Client, task_id: str) -> list[dict[str, Any]]:
    return [c for c in lw.trace(task_id)["calls"] if c["type"] == "model_call"]


def operation_state(operator: Client, key: str) -> str:
    states = [op["state"] for op in operator.list_operations() if op["key"] == key]
    assert len(states) == 1, states
    return states[0]


# The scenarios the TypeScript client's adapters play too (clients/scenarios.json).
SHARED = json.loads((Path(__file__).resolve().parents[2] / "scenarios.json").read_text())[
    "scenarios"
]


def shared_script(name: str, invoice: str) -> list[Any]:
    """A shared scenario's turns as a scripted model's: lists of (tool, args), or final text."""

    def args(values: dict[str, Any]) -> dict[str, Any]:
        return {k: v.replace("{invoice}", invoice) if isinstance(v, str) else v
                for k, v in values.items()}  # fmt: skip

    return [turn if isinstance(turn, str) else [(tool, args(a)) for tool, a in turn]
            for turn in SHARED[name]["turns"]]  # fmt: skip
