"""Tool declarations and result forms, checked without a server."""

from __future__ import annotations

import pytest
from loopwarden_client import Client
from loopwarden_client.guard import Guard, data_hash, read, stop_text, tool_specs, write
from loopwarden_client.novelty import result_hash
from loopwarden_client.types import jsonable


def test_a_write_needs_a_key_when_it_is_declared():
    for declare in (lambda: write(key=""), lambda: tool_specs({"pay": "write"})):
        with pytest.raises(ValueError, match="key"):
            declare()


def test_a_key_derives_from_the_arguments_by_format_or_function():
    assert write(key="pay-{invoice}").operation_key({"invoice": "I-1", "amount": 3}) == "pay-I-1"
    assert write(key=lambda a: f"r{a['n'] * 2}").operation_key({"n": 21}) == "r42"
    assert read().operation_key({"q": 1}) is None


def test_undeclared_tools_are_reads_and_bad_declarations_are_refused():
    guard = Guard(Client("http://lw/api/v1/", "t").session("t1"), tools={"pay": write(key="k")})
    assert guard.spec("search").effect == "read" and guard.spec("pay").effect == "write"
    with pytest.raises(TypeError):
        tool_specs({"pay": 42})
    with pytest.raises(ValueError):
        tool_specs({"pay": "delete"})


def test_results_become_json_and_equal_data_hashes_equal():
    class Thing:
        def model_dump(self):
            return {"a": 1}

    assert jsonable({"x": Thing(), "y": (1, 2)}) == {"x": {"a": 1}, "y": [1, 2]}
    assert data_hash({"b": 1, "a": [1]}) == data_hash({"a": [1], "b": 1})
    assert data_hash("x") != data_hash("y")


def test_the_data_hash_leaves_the_volatile_keys_out_as_the_server_does():
    stamped = {"rows": [1], "fetchedAt": "10:00:01", "meta": {"X-Request-Id": "r1"}}
    again = {"rows": [1], "fetchedAt": "10:00:02", "meta": {"X-Request-Id": "r2"}}
    assert data_hash(stamped) == data_hash(again)
    assert data_hash(stamped) != data_hash({**stamped, "rows": [2]})
    assert result_hash(stamped, volatile_keys=False) != result_hash(again, volatile_keys=False)
    assert result_hash({"n": 1, "replica": "a"}, ["replica"]) == result_hash(
        {"n": 1, "replica": "b"}, ["replica"]
    )


def test_the_stop_text_names_state_reason_code_and_what_to_do():
    report = {"state": "NEEDS_HUMAN", "reason": "unknown_commit", "code": "GUARD_LEDGER",
              "resume_condition": "Reconcile operation pay-1."}  # fmt: skip
    assert stop_text(report) == (
        "Loopwarden stopped this task: NEEDS_HUMAN/unknown_commit (GUARD_LEDGER). "
        "Reconcile operation pay-1."
    )
