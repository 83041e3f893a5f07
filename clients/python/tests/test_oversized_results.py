"""A write's result the server cannot take whole (nested past LOOPWARDEN_MAX_JSON_DEPTH, or
past LOOPWARDEN_MAX_BODY_BYTES) still reaches the ledger: the client reports it again without
its data, so the operation is COMMITTED, not left IN_FLIGHT to go UNKNOWN."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from loopwarden_client import TaskStopped


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = {"inner": value}
    return value


# An export's rows hold what JSON has no type for: sent as text, and hashed as sent.
EXPORT = {"rows": [{"total": Decimal("12.50"), "on": date(2026, 1, 2), "memo": "x" * 300}] * 10_000}


@pytest.mark.parametrize(
    "answer",
    [nested(100), "x" * 3_000_000, EXPORT],
    ids=["too_deep", "too_large", "too_large_with_decimals"],
)
def test_a_write_whose_result_cannot_be_stored_whole_still_commits(lw, operator, unique, answer):
    task = lw.create_task(f"oversized {unique}")
    session = lw.session(task["id"])
    key = f"oversized-{unique}"
    ran = []

    def execute(args):
        ran.append(args)
        return answer

    def committed(data):
        return {"revision": 0, "done": False, "committed": True}

    first = session.tool("export", {"ref": unique}, execute, effect="write",
                         operation_key=key, inspect=committed)  # fmt: skip
    again = session.tool("export", {"ref": unique}, execute, effect="write",
                         operation_key=key, inspect=committed)  # fmt: skip
    [op] = [o for o in operator.list_operations() if o["key"] == key]
    assert first["success"] is True and len(ran) == 1
    assert op["state"] == "COMMITTED"
    assert again["reused"] is True and again["data"] is None  # nothing kept to give back


def test_a_write_that_raised_with_a_huge_message_is_reported_unknown(lw, operator, unique):
    """A tool's exception carrying a whole response body in its message: the NO_RESULT
    report was refused 413 for its `error`, raised LoopwardenError and left the write
    IN_FLIGHT; the error is sent cut, and the write is UNKNOWN for a human at once."""
    session = lw.session(lw.create_task(f"huge error {unique}")["id"])
    key = f"huge-error-{unique}"

    def execute(args):
        raise RuntimeError("upstream answered: " + "x" * 3_000_000)

    with pytest.raises(TaskStopped) as caught:
        session.tool("export", {"ref": unique}, execute, effect="write", operation_key=key)
    assert (caught.value.state, caught.value.reason) == ("NEEDS_HUMAN", "unknown_commit")
    assert isinstance(caught.value.__cause__, RuntimeError)
    [op] = [o for o in operator.list_operations() if o["key"] == key]
    assert op["state"] == "UNKNOWN"
