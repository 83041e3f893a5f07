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
