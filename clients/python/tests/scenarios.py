"""What every adapter's end-to-end tests check, read from the live server's trace."""

from __future__ import annotations

from typing import Any

from loopwarden_client import Client


def tool_decisions(lw: Client, task_id: str) -> list[str]:
    return [c["decision"] for c in lw.trace(task_id)["calls"] if c["type"] == "tool_call"]


def model_calls(lw: Client, task_id: str) -> list[dict[str, Any]]:
    return [c for c in lw.trace(task_id)["calls"] if c["type"] == "model_call"]


def operation_state(operator: Client, key: str) -> str:
    states = [op["state"] for op in operator.list_operations() if op["key"] == key]
    assert len(states) == 1, states
    return states[0]
