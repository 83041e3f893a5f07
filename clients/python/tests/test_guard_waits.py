"""A WAIT is slept out with the session's own `sleep`, in async framework runs too."""

from __future__ import annotations

import asyncio

from loopwarden_client.guard import Guard, write


def test_an_async_run_with_a_sync_session_sleeps_with_the_sessions_sleep(lw, unique):
    args = {"invoice": unique, "amount": "1.00"}
    holder = lw.session(lw.create_task("holds the payment")["id"])
    claim = lw.request_tool(holder.task_id, "pay", args, effect="write",
                            operation_key=f"pay-{unique}")  # fmt: skip
    assert claim["decision"] == "EXECUTE"  # in flight, its lease live: others WAIT

    slept: list[float] = []
    s = lw.session(lw.create_task("waits for it")["id"], sleep=slept.append, max_wait_tries=3)
    guard = Guard(s, tools={"pay": write(key="pay-{invoice}")})
    outcome = asyncio.run(guard.arun(guard.tool("pay", args, lambda a: "paid twice")))
    assert outcome.decision == "WAIT" and outcome.message["code"] == "OPERATION_IN_FLIGHT"
    assert len(slept) == 2 and all(seconds > 0 for seconds in slept)


def test_waits_on_a_held_write_back_off_so_a_long_lease_costs_few_requests(lw, unique):
    """Every ask is a tool request of the task's budget (docs/DESIGN.md counts it before the ledger
    answers WAIT): a client asking each second spent most of a 40-request budget on one
    120-second lease. The server's retry_after_ms is the least it waits; the waits double
    from it, up to the retry policy's max_wait_seconds."""
    most = lw.retry.max_wait_seconds

    args = {"invoice": unique, "amount": "1.00"}
    holder = lw.create_task("holds the payment")["id"]
    claim = lw.request_tool(holder, "pay", args, effect="write", operation_key=f"pay-{unique}")
    assert claim["decision"] == "EXECUTE"

    slept: list[float] = []
    waiting = lw.create_task("waits for it")["id"]
    s = lw.session(waiting, sleep=slept.append, max_wait_tries=7)
    outcome = s.tool("pay", args, lambda a: "paid twice", effect="write",
                     operation_key=f"pay-{unique}")  # fmt: skip

    assert outcome["code"] == "OPERATION_IN_FLIGHT"
    assert slept == [1.0, 2.0, 4.0, 8.0, most, most]
    assert lw.get_task(waiting)["usage"]["tool_requests"] == 7
