"""Structured logs: one JSON line per decision and per guard trigger, always the same keys."""

from __future__ import annotations

from agents.guard import terms
from agents.services import operator, runner, sweeps
from agents.services.hooks import LINE_KEYS


def test_every_decision_line_has_every_field(make_task, start_write, agent_row, json_logs, price):
    task = make_task()
    _t, call, _o = runner.model_call_gate(task_id=task.pk, agent=agent_row, model="m")
    runner.model_call_usage(task_id=task.pk, agent=agent_row, model_call_id=call.pk,
                            prompt_tokens=30, completion_tokens=12)  # fmt: skip
    start_write(task)

    lines = json_logs()
    assert [line["event"] for line in lines] == ["model_call", "usage", "tool_call"]
    for line in lines:
        assert set(LINE_KEYS) <= set(line)
        assert line["task"] == str(task.pk) and line["run"] == f"{task.pk}:1"
        assert line["phase"] == 1 and line["round"] == 1
    gate, usage, tool = lines
    assert (gate["decision"], gate["tokens"]) == (terms.ALLOW, None)
    assert (usage["decision"], usage["tokens"]) == (terms.CONTINUE, 42)
    assert (tool["decision"], tool["tool"], tool["operation_key"]) == (
        terms.EXECUTE, "send_invoice", "invoice-42",
    )  # fmt: skip
    assert len(tool["fingerprint"]) == 64


def test_a_rule_that_blocks_writes_a_trigger_line(make_task, agent_row, json_logs):
    task = make_task()
    for _ in range(3):
        _t, call, outcome = runner.tool_call_request(
            task_id=task.pk, agent=agent_row, tool="search", args={"q": "x"}, effect=terms.READ
        )
        if outcome.decision == terms.EXECUTE:
            runner.tool_call_result(
                task_id=task.pk, agent=agent_row, tool_call_id=call.pk,
                result=terms.ToolResult(kind=terms.SUCCESS, data={"n": 1}),
            )  # fmt: skip

    triggers = json_logs("guard_trigger")
    assert triggers, json_logs()
    assert triggers[0]["reason"] == "same_call" and triggers[0]["code"] == "GUARD_LOOP_DETECTED"
    assert triggers[0]["tool"] == "search" and triggers[0]["trigger_of"] == "tool_call"


def test_a_sweep_stop_is_a_decision_and_a_trigger(make_task, start_write, past_lease, json_logs):
    task = make_task()
    start_write(task)
    sweeps.sweep_leases(now=past_lease)

    swept = json_logs("lease_sweep")
    assert len(swept) == 1
    assert (swept[0]["decision"], swept[0]["reason"], swept[0]["state"]) == (
        terms.STOP, "unknown_commit", terms.NEEDS_HUMAN,
    )  # fmt: skip
    assert swept[0]["operation_key"] == "invoice-42" and swept[0]["tool"] == "send_invoice"
    trigger = json_logs("guard_trigger")[-1]
    assert (trigger["trigger_of"], trigger["code"]) == ("lease_sweep", "GUARD_LEDGER")


def test_a_completed_task_is_not_a_trigger(make_task, agent_row, json_logs):
    task = make_task()
    runner.task_finish(task_id=task.pk, agent=agent_row, evidence={"revision": 1, "done": True})

    assert json_logs("finish")[0]["reason"] == "goal_met"
    assert json_logs("guard_trigger") == []


def test_a_stop_by_a_person_or_the_agent_is_not_a_trigger(make_task, agent_row, json_logs):
    # A person's stop (operator_stop) and the agent's own (agent_stop) are decisions, but no
    # rule of the guard fired: the trigger lines count breaker trips only, as the dashboard and
    # the metrics do (terms.is_trip).
    by_person, by_agent = make_task(), make_task()
    operator.task_stop(task_id=by_person.pk, reason="wrong customer")
    operator.task_stop(task_id=by_agent.pk, agent=agent_row)

    stops = json_logs("stop")
    assert [line["reason"] for line in stops] == ["operator_stop", "agent_stop"]
    assert json_logs("guard_trigger") == []


def test_a_secret_in_an_operation_key_is_masked_in_the_log_as_in_the_console(
    make_task, agent_row, json_logs
):
    task = make_task()
    key = "charge-card-4111111111111111"
    runner.tool_call_request(
        task_id=task.pk, agent=agent_row, tool="charge", args={"n": 1}, effect=terms.WRITE,
        operation_key=key,
    )  # fmt: skip

    [line] = json_logs("tool_call")
    assert "4111111111111111" not in line["operation_key"]
    assert line["operation_key"].startswith("charge-card-")
