"""The SQL statements one decision issues on the ALLOW/EXECUTE path, counted (not estimated):
each statement a decision issues divides the number of agents one database can serve, so a
regression fails here rather than in a benchmark nobody runs. SAVEPOINTs are left out: they
exist only because the test runs inside a transaction (in production the request's
transaction is BEGIN/COMMIT, sent by the driver, not as statements of their own)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.models import Event, LimitProfile, ModelPrice, Phase, SeenHash, ToolCall, ToolPolicy
from tests.api.helpers import evidence, finish, gate, new_task, report, request_tool, settle

# Statements per decision kind, the token's check included. Before the lean hot path (issue 11)
# they were, on SQLite: gate 10, usage 8, read tool request 6, write tool request 9, read
# result 5, write result 7. The ceiling is 5 for gates, tool requests and results.
# A write's claim was 3 statements of its own (lock the key's row, insert or update it, point
# it at the call once inserted) and its settle 2 (lock the row, update it): now the task lock
# also reads the key's row id (and whether the request's model call is the task's), the claim
# is one INSERT (or one conditional UPDATE of a NOT_COMMITTED row) naming the call by its seq,
# the result locks the call with the task and settles by one conditional UPDATE, and a usage
# report locks its model call with the task. On PostgreSQL the writes that end a decision (the
# trace row, the task row, the agent's day on a usage report) go as one statement
# (`agents.db.prepared.writes_together`). See "What a decision does" in docs/BENCHMARKS.md.
#
# A read's result on a task judging progress by novelty (no evidence) reads, besides: whether
# the task saw the data's hash, and the key digests of the call's earlier result (which keys
# made a new result new). One statement for all three (it was three: the hash lookup and up to
# two key reads), and the new hash's row is one more of the writes that end the decision.
#
# The token: the lock checks it in its own statement (`agents.taskrow.AgentClaim`), so no
# decision of these reads a token row before its lock (one statement each before that).
MOST = {
    "sqlite": {"gate": 4, "usage": 4, "read": 3, "write": 4, "read_result": 3, "write_result": 4,
               "novel_result": 5},
    "postgresql": {
        "gate": 3, "usage": 2, "read": 2, "write": 3, "read_result": 2, "write_result": 3,
        "novel_result": 3,
    },
}[connection.vendor]  # fmt: skip


def statements(call, *args, **kwargs):
    with CaptureQueriesContext(connection) as captured:
        answer = call(*args, **kwargs)
    sql = [q["sql"] for q in captured.captured_queries if "SAVEPOINT" not in q["sql"]]
    return answer, sql


@pytest.fixture
def running_task(agent_api):
    """A task past its first decisions (the day row exists, the token was used recently)."""
    ModelPrice.objects.create(
        model="*", input_per_million=Decimal("3"), output_per_million=Decimal("15")
    )
    ToolPolicy.objects.create(tool="search", ignore_fields=["request_id"])
    task = new_task(agent_api)["id"]
    allowed = gate(agent_api, task, model="m", est_prompt_tokens=100, max_output_tokens=50)
    settle(agent_api, task, allowed["model_call"])
    return task


def test_a_model_call_gate_that_allows(agent_api, running_task):
    answer, sql = statements(gate, agent_api, running_task, model="m", est_prompt_tokens=100,
                             max_output_tokens=50)  # fmt: skip

    assert answer["decision"] == "ALLOW"
    assert len(sql) <= MOST["gate"], "\n".join(sql)


def test_a_usage_report(agent_api, running_task):
    allowed = gate(agent_api, running_task, model="m", est_prompt_tokens=100, max_output_tokens=50)

    answer, sql = statements(settle, agent_api, running_task, allowed["model_call"])

    assert answer["decision"] == "CONTINUE"
    assert len(sql) <= MOST["usage"], "\n".join(sql)


def test_a_read_tool_request_that_executes(agent_api, running_task):
    answer, sql = statements(request_tool, agent_api, running_task, "search", {"q": "invoices"})

    assert answer["decision"] == "EXECUTE"
    assert len(sql) <= MOST["read"], "\n".join(sql)


def test_a_write_tool_request_that_claims_its_key(agent_api, running_task):
    answer, sql = statements(request_tool, agent_api, running_task, "send_email", {"to": "a"},
                             "write", operation_key="invoice-1")  # fmt: skip

    assert answer["decision"] == "EXECUTE"
    assert len(sql) <= MOST["write"], "\n".join(sql)


def test_a_read_result_that_continues(agent_api, running_task):
    call = request_tool(agent_api, running_task, "search", {"q": "invoices"})["tool_call"]

    answer, sql = statements(report, agent_api, running_task, call, data={"rows": 3},
                             evidence=evidence(1))  # fmt: skip

    assert answer["decision"] == "CONTINUE"
    assert len(sql) <= MOST["read_result"], "\n".join(sql)


def test_a_write_result_that_commits(agent_api, running_task):
    call = request_tool(agent_api, running_task, "send_email", {"to": "a"}, "write",
                        operation_key="invoice-1")["tool_call"]  # fmt: skip

    answer, sql = statements(report, agent_api, running_task, call,
                             evidence=evidence(1, committed=True))  # fmt: skip

    assert answer["decision"] == "CONTINUE"
    assert len(sql) <= MOST["write_result"], "\n".join(sql)


def test_a_write_tool_request_that_claims_a_not_committed_key_again(agent_api, running_task):
    other = new_task(agent_api)["id"]  # the failed attempt was another task's
    first = request_tool(agent_api, other, "send_email", {"to": "a"}, "write",
                         operation_key="invoice-1")  # fmt: skip
    failed = report(agent_api, other, first["tool_call"], "RETRYABLE", wait_ms=10,
                    evidence=evidence(0, committed=False))  # fmt: skip
    assert failed["decision"] == "CONTINUE", failed

    answer, sql = statements(request_tool, agent_api, running_task, "send_email", {"to": "a"},
                             "write", operation_key="invoice-1")  # fmt: skip

    assert answer["decision"] == "EXECUTE"
    assert len(sql) <= MOST["write"], "\n".join(sql)


def test_a_novel_read_result_on_a_novelty_task(agent_api, agent, running_task):
    LimitProfile.objects.filter(name="novelty").update(progress_mode="novelty")
    agent[1].default_profile = LimitProfile.objects.get(name="novelty")
    agent[1].save()
    task = new_task(agent_api)["id"]
    first = request_tool(agent_api, task, "search", {"q": "invoices"})["tool_call"]
    report(agent_api, task, first, data={"rows": 3, "page": 1})
    call = request_tool(agent_api, task, "search", {"q": "invoices", "page": 2})["tool_call"]

    answer, sql = statements(report, agent_api, task, call, data={"rows": 3, "page": 2})

    assert answer["decision"] == "CONTINUE"
    assert len(sql) <= MOST["novel_result"], "\n".join(sql)
    seen = SeenHash.objects.filter(task_id=task).count()
    assert seen == 2  # the new data's hash was kept, with the first result's
    # Judged against the tool's first result (another call: other args): only `page` changed.
    assert ToolCall.objects.get(pk=call).novel_keys == ["page"]


# With a request_id the lock's statement also reads the id's kept answer (a subquery), and the
# answer is one more row of the decision's writes: sent with the others on PostgreSQL, on its
# own on SQLite. A repeat reads the lock, the kept answer and the id of the call it names.
WITH_REQUEST_ID = {"sqlite": 1, "postgresql": 0}[connection.vendor]
REPEAT = 3


def _decisions(api, task):
    """Each decision kind with a request_id: (name, send) pairs, in an order that works."""
    holder = {}

    def gate_():
        holder["mc"] = gate(api, task, model="m", est_prompt_tokens=100, max_output_tokens=50,
                            request_id="g")["model_call"]  # fmt: skip
        return holder["mc"]

    def usage_():
        return settle(api, task, holder["mc"], request_id="u")

    def read_():
        holder["read"] = request_tool(api, task, "search", {"q": "i"}, request_id="r")
        return holder["read"]

    def read_result_():
        return report(api, task, holder["read"]["tool_call"], data={"rows": 3},
                      evidence=evidence(1), request_id="rr")  # fmt: skip

    def write_():
        holder["write"] = request_tool(api, task, "send_email", {"to": "a"}, "write",
                                       operation_key="invoice-1", request_id="w")  # fmt: skip
        return holder["write"]

    def write_result_():
        return report(api, task, holder["write"]["tool_call"],
                      evidence=evidence(2, committed=True), request_id="wr")  # fmt: skip

    return [("gate", gate_), ("usage", usage_), ("read", read_), ("read_result", read_result_),
            ("write", write_), ("write_result", write_result_)]  # fmt: skip


def test_a_decision_with_a_request_id(agent_api, running_task):
    for name, send in _decisions(agent_api, running_task):
        _answer, sql = statements(send)

        assert len(sql) <= MOST[name] + WITH_REQUEST_ID, (name, "\n".join(sql))


def test_a_repeated_decision(agent_api, running_task):
    for name, send in _decisions(agent_api, running_task):
        first = send()

        again, sql = statements(send)

        assert again == first
        assert len(sql) <= REPEAT, (name, "\n".join(sql))


# A task's ends, once per task and not on the ALLOW path, but every bench task has both: the
# creation (lock the agent, its profile, the task, phase and event rows) and a finish that
# completes (lock, the finish event, the ledger rows the report lists, then the phase's end,
# the stop event and the task row). Before their writes went together they were, on
# PostgreSQL: create 6, finish 8 (with the answer's profile read after the commit).
ENDS = {
    "sqlite": {"create": 6, "finish": 8},
    "postgresql": {"create": 4, "finish": 6},
}[connection.vendor]


def test_a_task_creation(agent_api, running_task):
    answer, sql = statements(new_task, agent_api)

    assert answer["state"] == "RUNNING" and answer["profile"] == "default"
    assert len(sql) <= ENDS["create"], "\n".join(sql)
    assert Phase.objects.filter(task_id=answer["id"], number=1, reason="created").exists()
    assert Event.objects.filter(task_id=answer["id"], kind="task_created").exists()


def test_a_finish_that_completes(agent_api, running_task):
    call = request_tool(agent_api, running_task, "send_email", {"to": "a"}, "write",
                        operation_key="invoice-1")["tool_call"]  # fmt: skip
    report(agent_api, running_task, call, evidence=evidence(1, committed=True))

    answer, sql = statements(finish, agent_api, running_task, evidence=evidence(2, done=True))

    assert (answer["state"], answer["reason"]) == ("COMPLETED", "goal_met")
    assert len(sql) <= ENDS["finish"], "\n".join(sql)
    phase = Phase.objects.get(task_id=running_task, number=1)
    assert (phase.end_state, phase.end_reason) == ("COMPLETED", "goal_met")
    assert phase.report == answer["report"]
    assert answer["report"]["operations"] == [{"key": "invoice-1", "state": "COMMITTED"}]
    kinds = list(Event.objects.filter(task_id=running_task).order_by("id")
                 .values_list("kind", flat=True))  # fmt: skip
    assert kinds[-2:] == ["finish_requested", "task_completed"]
