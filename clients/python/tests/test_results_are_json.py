"""A tool result that JSON cannot hold as it is (Decimal, datetime) is still reported."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from loopwarden_client import Plan, ToolReport, run
from scenarios import operation_state


def paid(args: dict) -> dict:
    return {"amount": Decimal("12.50"), "at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)}


def committed(data: dict) -> dict:
    return {"revision": 1, "done": False, "committed": True}


def test_a_decimal_result_of_a_write_is_reported_and_the_operation_committed(lw, operator, unique):
    s = lw.session(lw.create_task("pay with decimals")["id"])
    key = f"pay-{unique}"
    message = s.tool("pay", {"invoice": unique}, paid, effect="write", operation_key=key,
                     inspect=committed)  # fmt: skip
    assert message == {"success": True, "data": paid({})}
    [call] = [c for c in lw.trace(s.task_id)["calls"] if c["type"] == "tool_call"]
    assert (call["decision"], call["result_kind"], call["reported_at"] is not None) == (
        "EXECUTE", "SUCCESS", True,
    )  # fmt: skip
    assert operation_state(operator, key) == "COMMITTED"
    [operation] = [op for op in operator.list_operations() if op["key"] == key]
    assert operation["result"] == {"amount": "12.50", "at": "2026-01-02T03:04:05+00:00"}


def test_run_returns_the_task_when_a_result_holds_a_decimal(lw, operator, unique):
    task_id = lw.create_task("run with decimals")["id"]
    key = f"pay-{unique}"
    steps = iter([
        Plan(tool_calls=[{"name": "pay", "args": {"invoice": unique}, "effect": "write",
                          "operation_key": key}]),
        Plan(done=True, evidence={"revision": 1, "done": True}, answer="paid"),
    ])  # fmt: skip
    task = run(lw, task_id, lambda history: next(steps), lambda name, args: paid(args),
               lambda name, args, data: committed(data))  # fmt: skip
    assert task["state"] == "COMPLETED"
    assert operation_state(operator, key) == "COMMITTED"


def scored(args: dict) -> dict:
    return {"score": float("nan"), "ceiling": float("inf"), "floor": float("-inf")}


def test_a_nan_in_a_writes_result_is_reported_and_the_operation_committed(lw, operator, unique):
    """JSON has no NaN or Infinity (httpx refuses to send them, the server answers 400): a
    tool that returned one (a pandas mean of nothing) already ran, so its result must still
    reach the ledger, not leave the write IN_FLIGHT until its lease makes it UNKNOWN."""
    s = lw.session(lw.create_task("pay with a NaN score")["id"])
    key = f"pay-{unique}"
    s.tool("pay", {"invoice": unique}, scored, effect="write", operation_key=key,
           inspect=committed)  # fmt: skip
    assert operation_state(operator, key) == "COMMITTED"
    [operation] = [op for op in operator.list_operations() if op["key"] == key]
    assert operation["result"] == {"score": "NaN", "ceiling": "Infinity", "floor": "-Infinity"}


def cut_text(args: dict) -> dict:
    return {"note": "paid \U0001f4b8"[:-1] + "\ud83d"}  # an emoji cut in half: a lone surrogate


def test_a_lone_surrogate_in_a_writes_result_is_reported_and_the_operation_committed(
    lw, operator, unique
):
    """UTF-8 has no form for a lone surrogate (httpx raised UnicodeEncodeError while sending
    the report): the write that ran must still reach the ledger, and REUSE gives it back."""
    s = lw.session(lw.create_task("pay with a cut emoji")["id"])
    key = f"pay-{unique}"
    s.tool("pay", {"invoice": unique}, cut_text, effect="write", operation_key=key,
           inspect=committed)  # fmt: skip
    assert operation_state(operator, key) == "COMMITTED"
    again = s.tool("pay", {"invoice": unique}, cut_text, effect="write", operation_key=key,
                   inspect=committed)  # fmt: skip
    assert again == {"success": True, "reused": True, "data": cut_text({})}


def nested(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth):
        value = {"inner": value}
    return value


class Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("repr needs a session that is closed")


@pytest.mark.parametrize(
    "answer",
    [{"n": 10**5000}, {"row": Unprintable()}, nested(5000)],
    ids=["huge_int", "failing_repr", "past_pythons_recursion_limit"],
)
def test_a_result_without_any_text_form_is_reported_and_the_operation_committed(
    lw, operator, unique, answer
):
    """An int past Python's 4300 digits (`str` refuses it), an object whose repr raises, a tree
    deeper than Python's recursion limit (a parsed document): the encoding's or the last
    resort's own failure left the write IN_FLIGHT; it is reported by its type instead."""
    s = lw.session(lw.create_task("pay with an unprintable result")["id"])
    key = f"pay-{unique}"
    s.tool("pay", {"invoice": unique}, lambda args: answer, effect="write",
           operation_key=key, inspect=committed)  # fmt: skip
    assert operation_state(operator, key) == "COMMITTED"


@pytest.mark.parametrize(
    "report",
    [
        ToolReport(kind="PENDING", job_id=12345, wait_ms=1000),  # a provider's numeric job id
        ToolReport(kind="RETRYABLE", wait_ms=1.5 * 1000),  # Retry-After seconds, in ms
        ToolReport(kind="RETRYABLE", wait_ms=0.4, attempts=2.0),  # under a millisecond
        ToolReport(kind="RETRYABLE", wait_ms=100, error=TimeoutError("no answer")),  # error=exc
    ],
    ids=["int_job_id", "float_wait", "fractional_wait", "exception_as_error"],
)
def test_a_report_written_the_way_python_allows_is_sent_as_the_api_takes_it(lw, report):
    """The tool ran, so its call must close: a float wait, an int job id or an exception as
    the error were refused 400 and raised, the call left open (a write's IN_FLIGHT)."""
    s = lw.session(lw.create_task("report fields as python has them")["id"])
    message = s.tool("export", {"n": 1}, lambda args: report)
    [call] = [c for c in lw.trace(s.task_id)["calls"] if c["type"] == "tool_call"]
    assert (call["decision"], call["result_kind"]) == ("EXECUTE", report.kind)
    assert message["success"] is False and message["retryable"] is True
