"""LangChain v1 `create_agent` with LoopwardenMiddleware, a scripted model, a live server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langchain")

import scenarios  # noqa: E402
from langchain.agents import create_agent  # noqa: E402
from langchain.agents.middleware import ToolRetryMiddleware  # noqa: E402
from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langchain_core.tools import StructuredTool, ToolException, tool  # noqa: E402
from loopwarden_client import Client, TaskStopped  # noqa: E402
from loopwarden_client.guard import write  # noqa: E402
from loopwarden_client.langchain import LoopwardenMiddleware  # noqa: E402
from scenarios import PAY, SEARCH, model_calls, operation_state, tool_decisions  # noqa: E402


class ScriptedModel(BaseChatModel):
    """Answers from a script: each turn a list of (tool, args) calls, or a final text."""

    script: list[Any]
    usage: dict[str, int] | None = {"input_tokens": 120, "output_tokens": 30, "total_tokens": 150}
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:  # fmt: skip
        turn = self.script[min(self.calls, len(self.script) - 1)]
        self.calls += 1
        if isinstance(turn, str):
            message = AIMessage(content=turn, usage_metadata=self.usage)
        else:
            tool_calls = [{"name": name, "args": args, "id": f"call-{self.calls}-{i}"}
                          for i, (name, args) in enumerate(turn)]  # fmt: skip
            message = AIMessage(content="", tool_calls=tool_calls, usage_metadata=self.usage)
        return ChatResult(generations=[ChatGeneration(message=message)])


class Tools(scenarios.Tools):
    wrap = staticmethod(tool)


def agent_for(script: list[Any], tools: Tools, guard: LoopwardenMiddleware, *extra: Any):
    model = ScriptedModel(script=script)
    return model, create_agent(model, tools.all, middleware=[guard, *extra])


@pytest.fixture
def session(lw):
    def make(goal: str = "langchain task", **limits: Any):
        return lw.session(lw.create_task(goal, limits=limits or None)["id"])

    return make


def test_a_repeated_read_is_blocked_then_stopped_and_ran_only_when_executed(lw, session):
    tools, s = Tools(), session()
    _, agent = agent_for([[SEARCH], [SEARCH, SEARCH], [SEARCH], "done"], tools,
                         LoopwardenMiddleware(s, tools=PAY))  # fmt: skip
    with pytest.raises(TaskStopped) as caught:
        agent.invoke({"messages": [{"role": "user", "content": "refund policy?"}]})
    assert (caught.value.state, caught.value.reason) == ("PARTIAL", "same_call")
    decisions = tool_decisions(lw, s.task_id)
    assert sorted(decisions) == sorted(["EXECUTE", "EXECUTE", "BLOCK", "STOP"])
    assert len(tools.ran) == decisions.count("EXECUTE") == 2


def test_a_committed_write_asked_again_is_reused_and_runs_once(lw, operator, session, unique):
    tools, s = Tools(), session()
    pay = ("pay", {"invoice": f"INV-{unique}", "amount": "12.00"})
    _, agent = agent_for([[pay], [pay], "paid"], tools, LoopwardenMiddleware(s, tools=PAY))
    result = agent.invoke({"messages": [{"role": "user", "content": "pay it"}]})
    assert result["messages"][-1].content == "paid"
    assert tool_decisions(lw, s.task_id) == ["EXECUTE", "REUSE"]
    assert tools.ran == ["pay"]
    assert '"reused": true' in result["messages"][-2].content
    assert operation_state(operator, f"pay-INV-{unique}") == "COMMITTED"


def test_a_lost_write_response_ends_needs_human(lw, operator, session, unique):
    tools, s = Tools(lose_payment=True), session()
    pay = ("pay", {"invoice": f"INV-{unique}", "amount": "12.00"})
    _, agent = agent_for([[pay], [pay], "paid"], tools, LoopwardenMiddleware(s, tools=PAY))
    with pytest.raises(TaskStopped) as caught:
        agent.invoke({"messages": [{"role": "user", "content": "pay it"}]})
    assert (caught.value.state, caught.value.reason) == ("NEEDS_HUMAN", "unknown_commit")
    assert caught.value.report["operations"] == [{"key": f"pay-INV-{unique}", "state": "UNKNOWN"}]
    assert tools.ran == ["pay"]
    assert operation_state(operator, f"pay-INV-{unique}") == "UNKNOWN"


def test_a_model_stop_ends_the_run_cleanly_with_the_report(lw, session):
    tools, s = Tools(), session(max_model_calls=2)
    guard = LoopwardenMiddleware(s, tools=PAY)
    model, agent = agent_for([[("fetch_page", {"page": n})] for n in range(1, 9)], tools, guard)
    result = agent.invoke({"messages": [{"role": "user", "content": "export"}]})
    final = result["messages"][-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    assert final.response_metadata["loopwarden"]["reason"] == "model_budget"
    assert "PARTIAL/model_budget" in final.content
    assert guard.report["state"] == "PARTIAL" and model.calls == 2
    assert lw.get_task(s.task_id)["state"] == "PARTIAL"


def test_usage_reaches_the_server_with_the_models_token_counts(lw, session):
    tools, s = Tools(), session()
    _, agent = agent_for([[("fetch_page", {"page": 1})], "done"], tools,
                         LoopwardenMiddleware(s, tools=PAY))  # fmt: skip
    agent.invoke({"messages": [{"role": "user", "content": "one page"}]})
    calls = model_calls(lw, s.task_id)
    assert [(c["prompt_tokens"], c["completion_tokens"]) for c in calls] == [(120, 30)] * 2
    assert lw.get_task(s.task_id)["usage"]["tokens"] == 300


def test_a_model_without_usage_reports_none_and_keeps_its_reservation(lw, session):
    tools, s = Tools(), session()
    model = ScriptedModel(script=["nothing to do"], usage=None)
    agent = create_agent(model, tools.all, middleware=[LoopwardenMiddleware(s)])
    agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
    [call] = model_calls(lw, s.task_id)
    assert call["settled_at"] is None and call["prompt_tokens"] is None


def test_a_fifteen_step_task_with_fresh_data_runs_to_the_end(lw, session):
    tools, s = Tools(), session()
    script = [[("fetch_page", {"page": n})] for n in range(1, 16)] + ["exported 15 pages"]
    _, agent = agent_for(script, tools, LoopwardenMiddleware(s, tools=PAY))
    result = agent.invoke({"messages": [{"role": "user", "content": "export"}]},
                          {"recursion_limit": 100})  # fmt: skip
    assert result["messages"][-1].content == "exported 15 pages"
    assert tools.ran == ["fetch_page"] * 15
    task = lw.get_task(s.task_id)
    assert task["usage"]["tool_executions"] == 15
    # ended with its answer: finished, never left to wait out its deadline
    assert (task["state"], task["reason"]) == ("PARTIAL", "goal_unverified")


def test_a_retry_middleware_after_the_guard_never_retries_a_stop(lw, session):
    tools, s = Tools(), session()
    retry = ToolRetryMiddleware(max_retries=3, initial_delay=0, jitter=False)
    _, agent = agent_for([[SEARCH], [SEARCH, SEARCH], [SEARCH], "done"], tools,
                         LoopwardenMiddleware(s, tools=PAY), retry)  # fmt: skip
    with pytest.raises(TaskStopped):
        agent.invoke({"messages": [{"role": "user", "content": "refund policy?"}]})
    decisions = tool_decisions(lw, s.task_id)
    assert decisions.count("STOP") == 1 and len(decisions) == 4
    assert lw.get_task(s.task_id)["usage"]["tool_requests"] == 4


def test_streaming_runs_are_guarded_too(lw, session):
    tools, s = Tools(), session()
    _, agent = agent_for([[SEARCH], [SEARCH, SEARCH], [SEARCH], "done"], tools,
                         LoopwardenMiddleware(s, tools=PAY))  # fmt: skip
    with pytest.raises(TaskStopped) as caught:
        for _ in agent.stream({"messages": [{"role": "user", "content": "refund policy?"}]}):
            pass
    assert caught.value.reason == "same_call" and len(tools.ran) == 2


@pytest.mark.parametrize("flavour", ["async session", "sync session"])
def test_async_runs_are_guarded_with_either_session(lw, alw, flavour, unique):
    task_id = lw.create_task("async langchain")["id"]
    s = alw.session(task_id) if flavour == "async session" else lw.session(task_id)
    tools = Tools()
    pay = ("pay", {"invoice": f"INV-{unique}", "amount": "3.00"})
    _, agent = agent_for([[pay], [pay], [SEARCH], [SEARCH, SEARCH], [SEARCH]], tools,
                         LoopwardenMiddleware(s, tools=PAY))  # fmt: skip

    async def main() -> None:
        try:
            await agent.ainvoke({"messages": [{"role": "user", "content": "go"}]})
        finally:
            await alw.aclose()

    with pytest.raises(TaskStopped) as caught:
        asyncio.run(main())
    assert caught.value.reason == "same_call"
    assert tools.ran == ["pay", "search", "search"]
    assert tool_decisions(lw, task_id)[:2] == ["EXECUTE", "REUSE"]


def test_a_write_without_a_key_is_refused_at_setup(lw, session):
    with pytest.raises(ValueError, match="key"):
        LoopwardenMiddleware(session(), tools={"pay": "write"})
    with pytest.raises(ValueError, match="key"):
        write(key="")


@pytest.mark.parametrize(("guard_first", "stops_seen"), [(True, 1), (False, 3)])
def test_the_documented_order_is_what_keeps_a_stop_from_being_retried(
    live, guard_first, stops_seen
):
    """Guard first: one STOP, raised. Retry first: the STOP is retried (and then swallowed)."""
    stops: list[str] = []

    def seen(endpoint: str, request: dict, answer: dict) -> None:
        if endpoint == "request_tool" and answer["decision"] == "STOP":
            stops.append(answer["report"]["reason"])

    with Client(live.api, live.agent_token, on_decision=seen) as client:
        s = client.session(client.create_task("retry order")["id"])
        guard = LoopwardenMiddleware(s, tools=PAY)
        retry = ToolRetryMiddleware(max_retries=2, initial_delay=0, jitter=False)
        order = [guard, retry] if guard_first else [retry, guard]
        model = ScriptedModel(script=[[SEARCH], [SEARCH, SEARCH], [SEARCH], "done"])
        agent = create_agent(model, Tools().all, middleware=order)
        try:
            agent.invoke({"messages": [{"role": "user", "content": "refund policy?"}]})
        except TaskStopped:
            assert guard_first
    assert stops == ["same_call"] * stops_seen


def test_identical_results_still_trip_no_progress_under_novelty(lw, session):
    """New arguments each step, but the same data back: no progress, and the task stops."""
    s = session()

    @tool
    def lookup(n: int) -> str:
        """Look something up."""
        return "nothing new"

    script = [[("lookup", {"n": n})] for n in range(1, 10)]
    agent = create_agent(ScriptedModel(script=script), [lookup],
                         middleware=[LoopwardenMiddleware(s)])  # fmt: skip
    with pytest.raises(TaskStopped) as caught:
        agent.invoke({"messages": [{"role": "user", "content": "look"}]})
    assert (caught.value.state, caught.value.reason) == ("PARTIAL", "no_progress")


def test_a_read_stamped_with_a_fresh_fetched_at_still_stops_under_novelty(lw, session):
    """Issue 13: the stamp is not new data; the same read is nudged, then the loop stops
    (here the model's third identical plan, repeated_output, comes first)."""
    s = session()
    clock = iter(range(100))

    @tool
    def invoice(number: int) -> dict:
        """Read an invoice."""
        return {"number": number, "total": 120, "fetched_at": f"10:00:{next(clock):02}"}

    script = [[("invoice", {"number": 7})] for _ in range(9)]
    agent = create_agent(ScriptedModel(script=script), [invoice],
                         middleware=[LoopwardenMiddleware(s)])  # fmt: skip
    agent.invoke({"messages": [{"role": "user", "content": "total?"}]})
    task = lw.get_task(s.task_id)
    # Before issue 13 each stamp was new data: every read ran, the script ran out.
    assert (task["state"], task["code"]) == ("PARTIAL", "GUARD_LOOP_DETECTED"), task["reason"]
    assert tool_decisions(lw, s.task_id) == ["EXECUTE", "EXECUTE", "BLOCK"]


def test_without_the_novelty_profile_fresh_data_is_not_progress(live):
    """Why adapters without a verifier name the novelty profile: the default is strict."""
    with Client(live.api, live.strict_token) as strict:
        s = strict.session(strict.create_task("evidence mode")["id"])
        tools = Tools()
        script = [[("fetch_page", {"page": n})] for n in range(1, 16)] + ["done"]
        _, agent = agent_for(script, tools, LoopwardenMiddleware(s))
        with pytest.raises(TaskStopped) as caught:
            agent.invoke({"messages": [{"role": "user", "content": "export"}]},
                         {"recursion_limit": 100})  # fmt: skip
    assert caught.value.reason == "no_progress" and len(tools.ran) == 3


def test_evidence_from_the_verifier_decides_and_can_complete_the_task(lw, session):
    s = session()
    tools = Tools()

    def verify(tool_name: str, args: dict, data: Any) -> dict:
        return {
            "revision": args["page"],
            "done": args["page"] == 3,
            "milestone": f"p{args['page']}",
        }

    script = [[("fetch_page", {"page": n})] for n in range(1, 9)]
    guard = LoopwardenMiddleware(s, tools=PAY, evidence=verify)
    _, agent = agent_for(script, tools, guard)
    result = agent.invoke({"messages": [{"role": "user", "content": "export"}]})
    assert result["messages"][-1].content.startswith("Loopwarden: the task is COMPLETED/goal_met")
    assert tools.ran == ["fetch_page"] * 3
    task = lw.get_task(s.task_id)
    assert (task["state"], task["report"]["completed"]) == ("COMPLETED", ["p1", "p2", "p3"])


def test_a_keyed_write_called_without_its_key_argument_is_answered_to_the_model(lw, session):
    tools, s = Tools(), session()
    _, agent = agent_for([[("pay", {"amount": "12.00"})], "I need the invoice number."], tools,
                         LoopwardenMiddleware(s, tools=PAY))  # fmt: skip
    result = agent.invoke({"messages": [{"role": "user", "content": "pay it"}]})
    answer = result["messages"][-2]
    assert answer.status == "error" and "INVALID_TOOL_ARGUMENTS" in answer.content
    assert "invoice" in answer.content
    assert result["messages"][-1].content == "I need the invoice number."
    assert tools.ran == [] and tool_decisions(lw, s.task_id) == []
    task = lw.get_task(s.task_id)  # not stopped: finished by the final answer
    assert (task["state"], task["reason"]) == ("PARTIAL", "goal_unverified")


@pytest.mark.parametrize(
    "invoice", ["I-" + "9" * 400, "I-1\u200b2"], ids=["key_too_long", "key_with_a_zero_width"]
)
def test_a_key_the_server_refuses_is_answered_to_the_model(lw, session, invoice):
    """Arguments whose operation key the server refuses (past 300 characters, an invisible
    character) are the model's mistake as a missing one is: they ended the whole run with a
    400 LoopwardenError, the task left RUNNING."""
    tools, s = Tools(), session()
    _, agent = agent_for([[("pay", {"invoice": invoice, "amount": "1"})], "I need the number."],
                         tools, LoopwardenMiddleware(s, tools=PAY))  # fmt: skip
    result = agent.invoke({"messages": [{"role": "user", "content": "pay it"}]})
    answer = result["messages"][-2]
    assert answer.status == "error" and "INVALID_TOOL_ARGUMENTS" in answer.content
    assert "operation key" in answer.content
    assert tools.ran == [] and tool_decisions(lw, s.task_id) == []
    task = lw.get_task(s.task_id)
    assert (task["state"], task["reason"]) == ("PARTIAL", "goal_unverified")


def test_after_an_operators_resume_the_same_agent_calls_the_model_again(lw, operator, session):
    tools, s = Tools(), session(max_model_calls=2)
    guard = LoopwardenMiddleware(s, tools=PAY)
    script = [[("fetch_page", {"page": n})] for n in range(1, 4)] + ["done"]
    model, agent = agent_for(script, tools, guard)
    first = agent.invoke({"messages": [{"role": "user", "content": "export"}]})
    assert first["messages"][-1].response_metadata["loopwarden"]["reason"] == "model_budget"
    assert model.calls == 2
    operator.resume(s.task_id, reason="budget raised", grant={"model_calls": 2})
    second = agent.invoke({"messages": [{"role": "user", "content": "go on"}]})
    assert model.calls == 4 and second["messages"][-1].content == "done"
    assert guard.report["reason"] == "goal_unverified"  # the resumed phase ended with "done"
    task = lw.get_task(s.task_id)
    assert (task["state"], task["usage"]["model_calls"]) == ("PARTIAL", 4)


def test_an_all_zero_usage_is_no_usage_and_keeps_the_reservation(lw, session):
    tools, s = Tools(), session()
    zero = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    model = ScriptedModel(script=["nothing to do"], usage=zero)
    agent = create_agent(model, tools.all, middleware=[LoopwardenMiddleware(s)])
    agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
    [call] = model_calls(lw, s.task_id)
    assert call["settled_at"] is None and call["prompt_tokens"] is None


def test_a_retry_middleware_after_the_guard_never_runs_a_write_twice(lw, operator, session, unique):
    """The documented order (guard first, retry after it) retries inside one EXECUTE: a write
    whose first try timed out must not run again blind, whatever the retry middleware does."""
    s, ran = session(), []

    @tool
    def pay(invoice: str, amount: str) -> str:
        """Pay an invoice."""
        ran.append("pay")
        if len(ran) == 1:
            raise TimeoutError("the payment provider did not answer")
        return f"paid {invoice}"

    pay_call = ("pay", {"invoice": f"INV-{unique}", "amount": "12.00"})
    retry = ToolRetryMiddleware(max_retries=3, initial_delay=0, jitter=False)
    agent = create_agent(ScriptedModel(script=[[pay_call], "paid"]), [pay],
                         middleware=[LoopwardenMiddleware(s, tools=PAY), retry])  # fmt: skip
    with pytest.raises(TaskStopped) as caught:
        agent.invoke({"messages": [{"role": "user", "content": "pay it"}]})
    assert (caught.value.state, caught.value.reason) == ("NEEDS_HUMAN", "unknown_commit")
    assert ran == ["pay"]
    assert operation_state(operator, f"pay-INV-{unique}") == "UNKNOWN"


def test_arguments_the_tool_schema_refuses_are_answered_to_the_model(lw, operator, session, unique):
    """A write called with arguments its schema refuses never ran: the model is told, as for a
    key it cannot derive; the write is not left UNKNOWN for a human to reconcile."""
    tools, s = Tools(), session()
    bad = ("pay", {"invoice": f"INV-{unique}", "amount": {"not": "a string"}})
    _, agent = agent_for([[bad], "I could not pay."], tools, LoopwardenMiddleware(s, tools=PAY))
    result = agent.invoke({"messages": [{"role": "user", "content": "pay it"}]})
    assert result["messages"][-1].content == "I could not pay."
    assert result["messages"][-2].status == "error" and tools.ran == []
    task = lw.get_task(s.task_id)  # not stopped: finished by the final answer
    assert (task["state"], task["reason"]) == ("PARTIAL", "goal_unverified")
    assert not [op for op in operator.list_operations() if op["key"] == f"pay-INV-{unique}"]


# -- the run's end (issue 37): a run that ended with its answer finishes the task


def test_a_run_that_ends_with_its_answer_finishes_the_task_under_the_default_profile(live):
    with Client(live.api, live.strict_token) as strict:
        s = strict.session(strict.create_task("default profile")["id"])
        guard = LoopwardenMiddleware(s, tools=PAY)
        _, agent = agent_for([[SEARCH], "Refunds take 5 days."], Tools(), guard)
        result = agent.invoke({"messages": [{"role": "user", "content": "refund policy?"}]})
        task = strict.get_task(s.task_id)
    assert result["messages"][-1].content == "Refunds take 5 days."
    assert (task["state"], task["reason"]) == ("PARTIAL", "goal_unverified")
    assert guard.report == task["report"]


def test_the_verifiers_latest_evidence_goes_with_the_finish(lw, session):
    s = session()

    def verify(tool_name: str, args: dict, data: Any) -> dict:
        return {"revision": args["page"], "done": False, "milestone": f"p{args['page']}"}

    script = [[("fetch_page", {"page": 1})], [("fetch_page", {"page": 2})], "two pages"]
    guard = LoopwardenMiddleware(s, evidence=verify)
    _, agent = agent_for(script, Tools(), guard)
    asyncio.run(agent.ainvoke({"messages": [{"role": "user", "content": "export"}]}))
    task = lw.get_task(s.task_id)
    assert (task["state"], task["reason"], task["revision"]) == ("PARTIAL", "goal_unverified", 2)
    assert task["report"]["completed"] == ["p1", "p2"]


def test_keep_open_leaves_the_task_running_for_the_next_run(lw, session):
    s = session()
    guard = LoopwardenMiddleware(s, keep_open=True)
    _, agent = agent_for([[SEARCH], "found"], Tools(), guard)
    agent.invoke({"messages": [{"role": "user", "content": "refund policy?"}]})
    assert lw.get_task(s.task_id)["state"] == "RUNNING" and guard.report is None
    s.finish(answer="all runs done")
    assert lw.get_task(s.task_id)["reason"] == "goal_unverified"


# -- declarations (issue 37): by the name the model sees, and never of a missing tool


def test_a_declaration_naming_a_tool_the_agent_does_not_have_is_refused(lw, session, unique):
    tools, s = Tools(), session()
    pay = ("pay", {"invoice": f"INV-{unique}", "amount": "12.00"})
    misnamed = LoopwardenMiddleware(s, tools={"pay_invoice": write(key="pay-{invoice}")})
    _, agent = agent_for([[pay], [pay], "paid"], tools, misnamed)
    with pytest.raises(ValueError, match=r"does not have: \['pay_invoice'\]"):
        agent.invoke({"messages": [{"role": "user", "content": "pay it"}]})
    assert tools.ran == [] and lw.get_task(s.task_id)["usage"]["model_calls"] == 0


def test_a_renamed_tool_is_declared_by_the_name_the_model_sees(lw, operator, session, unique):
    s, ran = session(), []

    @tool("pay_invoice")
    def pay(invoice: str, amount: str) -> str:
        """Pay an invoice."""
        ran.append("pay")
        return f"paid {invoice}"

    call = ("pay_invoice", {"invoice": f"INV-{unique}", "amount": "12.00"})
    guard = LoopwardenMiddleware(s, tools={"pay_invoice": write(key="pay-{invoice}")})
    agent = create_agent(ScriptedModel(script=[[call], [call], "paid"]), [pay], middleware=[guard])
    agent.invoke({"messages": [{"role": "user", "content": "pay it"}]})
    assert ran == ["pay"] and tool_decisions(lw, s.task_id) == ["EXECUTE", "REUSE"]
    assert operation_state(operator, f"pay-INV-{unique}") == "COMMITTED"
    with pytest.raises(ValueError, match="does not have"):  # its Python name is not the tool's
        guarded = LoopwardenMiddleware(session(), tools={"pay": write(key="pay-{invoice}")})
        create_agent(ScriptedModel(script=["hi"]), [pay], middleware=[guarded]).invoke(
            {"messages": [{"role": "user", "content": "hi"}]}
        )


# -- the framework's own "try again" (issue 37)


def test_a_tool_error_the_framework_handles_goes_back_to_the_model_and_counts(lw, session):
    s, asked = session(), []

    def lookup(order: str) -> str:
        """Look an order up."""
        asked.append(order)
        if not order.startswith("A-"):
            raise ToolException("order numbers look like A-123")
        return f"order {order}: shipped"

    handled = StructuredTool.from_function(lookup, handle_tool_error=True)
    script = [[("lookup", {"order": "123"})], [("lookup", {"order": "A-123"})], "It shipped."]
    agent = create_agent(ScriptedModel(script=script), [handled],
                         middleware=[LoopwardenMiddleware(s)])  # fmt: skip
    result = agent.invoke({"messages": [{"role": "user", "content": "where is order 123?"}]})
    assert result["messages"][-1].content == "It shipped." and asked == ["123", "A-123"]
    error = result["messages"][2]
    assert error.status == "error" and error.content == "order numbers look like A-123"
    task = lw.get_task(s.task_id)
    assert (task["state"], task["reason"]) == ("PARTIAL", "goal_unverified")
    assert (task["usage"]["tool_executions"], task["usage"]["retries"]) == (2, 1)


def test_a_handled_error_of_a_write_leaves_its_operation_unknown(lw, operator, session, unique):
    s = session()

    def pay(invoice: str, amount: str) -> str:
        """Pay an invoice."""
        raise ToolException("the provider refused the amount")

    handled = StructuredTool.from_function(pay, handle_tool_error=True)
    call = ("pay", {"invoice": f"INV-{unique}", "amount": "12"})
    agent = create_agent(ScriptedModel(script=[[call], "paid"]), [handled],
                         middleware=[LoopwardenMiddleware(s, tools=PAY)])  # fmt: skip
    with pytest.raises(TaskStopped) as caught:
        agent.invoke({"messages": [{"role": "user", "content": "pay it"}]})
    assert (caught.value.state, caught.value.reason) == ("NEEDS_HUMAN", "unknown_commit")
    assert operation_state(operator, f"pay-INV-{unique}") == "UNKNOWN"


def test_a_read_answering_a_lone_surrogate_is_reported_and_the_run_finishes(lw, session):
    """Text cut inside an emoji's surrogate pair has no UTF-8 form: hashing it for novelty
    raised inside the tool call, which was reported NO_RESULT and failed the task."""
    s = session()

    @tool
    def search(query: str) -> str:
        """Search the knowledge base."""
        return "Refunds take 5 days \ud83d"

    model = ScriptedModel(script=[[SEARCH], "done"])
    agent = create_agent(model, [search], middleware=[LoopwardenMiddleware(s)])
    agent.invoke({"messages": [{"role": "user", "content": "refund policy?"}]})
    [call] = [c for c in lw.trace(s.task_id)["calls"] if c["type"] == "tool_call"]
    assert (call["decision"], call["result_kind"]) == ("EXECUTE", "SUCCESS")
    task = lw.get_task(s.task_id)
    assert (task["state"], task["reason"]) == ("PARTIAL", "goal_unverified")


@pytest.mark.parametrize("text", ["Refunds take 5 days.\x00", "Refunds take 5 days \ud83d"],
                         ids=["nul", "lone_surrogate"])  # fmt: skip
def test_a_final_answer_the_database_cannot_hold_still_finishes_the_task(lw, session, text):
    """The answer goes with `finish`, which the server refuses (400 UNSUPPORTED_TEXT) for a
    NUL or a lone surrogate: the run that had ended well raised, its task left RUNNING until
    its deadline. The answer is sent with U+FFFD in their place."""
    tools, s = Tools(), session()
    _, agent = agent_for([[SEARCH], text], tools, LoopwardenMiddleware(s))
    result = agent.invoke({"messages": [{"role": "user", "content": "refund policy?"}]})
    assert result["messages"][-1].content == text  # the agent's own answer is untouched
    task = lw.get_task(s.task_id)
    assert (task["state"], task["reason"]) == ("PARTIAL", "goal_unverified")
