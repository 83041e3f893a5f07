"""pydantic-ai with LoopwardenCapability, a scripted FunctionModel, a live server."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from loopwarden_client import Client, TaskStopped  # noqa: E402
from loopwarden_client.guard import write  # noqa: E402
from loopwarden_client.pydantic_ai import LoopwardenCapability  # noqa: E402
from pydantic_ai import Agent, ModelRetry  # noqa: E402
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart  # noqa: E402
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel  # noqa: E402
from pydantic_ai.usage import RequestUsage  # noqa: E402
from scenarios import PAY, SEARCH, Tools, model_calls, operation_state, tool_decisions  # noqa: E402


class Script:
    """A FunctionModel's function: each turn a list of (tool, args) calls, or a final text."""

    def __init__(self, turns: list[Any]) -> None:
        self.turns, self.calls = turns, 0

    def __call__(self, messages: list[Any], info: AgentInfo) -> ModelResponse:
        turn = self.turns[min(self.calls, len(self.turns) - 1)]
        self.calls += 1
        usage = RequestUsage(input_tokens=120, output_tokens=30)
        if isinstance(turn, str):
            return ModelResponse(parts=[TextPart(content=turn)], usage=usage)
        parts = [ToolCallPart(tool_name=name, args=args, tool_call_id=f"c{self.calls}-{i}")
                 for i, (name, args) in enumerate(turn)]  # fmt: skip
        return ModelResponse(parts=parts, usage=usage)

    async def stream(self, messages: list[Any], info: AgentInfo):
        """The same turns, streamed (FunctionModel then estimates the usage itself)."""
        turn = self.turns[min(self.calls, len(self.turns) - 1)]
        self.calls += 1
        if isinstance(turn, str):
            yield turn
            return
        yield {i: DeltaToolCall(name=name, json_args=json.dumps(args),
                                tool_call_id=f"c{self.calls}-{i}")
               for i, (name, args) in enumerate(turn)}  # fmt: skip


def guarded(turns: list[Any], tools: Tools, session: Any) -> tuple[Script, Agent, Any]:
    script = Script(turns)
    capability = LoopwardenCapability(session, tools=PAY)
    model = FunctionModel(script, stream_function=script.stream)
    agent = Agent(model, tools=tools.all, capabilities=[capability])
    return script, agent, capability


@pytest.fixture
def session(lw):
    def make(goal: str = "pydantic-ai task", **limits: Any):
        return lw.session(lw.create_task(goal, limits=limits or None)["id"])

    return make


def test_a_repeated_read_is_blocked_then_stopped_and_ran_only_when_executed(lw, session):
    tools, s = Tools(), session()
    _, agent, _ = guarded([[SEARCH], [SEARCH, SEARCH], [SEARCH], "done"], tools, s)
    with pytest.raises(TaskStopped) as caught:
        agent.run_sync("refund policy?")
    assert (caught.value.state, caught.value.reason) == ("PARTIAL", "same_call")
    decisions = tool_decisions(lw, s.task_id)
    assert sorted(decisions) == sorted(["EXECUTE", "EXECUTE", "BLOCK", "STOP"])
    assert len(tools.ran) == decisions.count("EXECUTE") == 2


def test_a_committed_write_asked_again_is_reused_and_runs_once(lw, operator, session, unique):
    tools, s = Tools(), session()
    pay = ("pay", {"invoice": f"INV-{unique}", "amount": "12.00"})
    _, agent, _ = guarded([[pay], [pay], "paid"], tools, s)
    assert agent.run_sync("pay it").output == "paid"
    assert tool_decisions(lw, s.task_id) == ["EXECUTE", "REUSE"]
    assert tools.ran == ["pay"]
    assert operation_state(operator, f"pay-INV-{unique}") == "COMMITTED"


def test_a_lost_write_response_ends_needs_human(lw, operator, session, unique):
    tools, s = Tools(lose_payment=True), session()
    pay = ("pay", {"invoice": f"INV-{unique}", "amount": "12.00"})
    _, agent, _ = guarded([[pay], [pay], "paid"], tools, s)
    with pytest.raises(TaskStopped) as caught:
        agent.run_sync("pay it")
    assert (caught.value.state, caught.value.reason) == ("NEEDS_HUMAN", "unknown_commit")
    assert isinstance(caught.value.__cause__, TimeoutError)
    assert tools.ran == ["pay"]
    assert operation_state(operator, f"pay-INV-{unique}") == "UNKNOWN"


def test_a_model_stop_ends_the_run_cleanly_with_the_report(lw, session):
    tools, s = Tools(), session(max_model_calls=2)
    script, agent, capability = guarded(
        [[("fetch_page", {"page": n})] for n in range(1, 9)], tools, s
    )
    output = agent.run_sync("export").output
    assert output.startswith("Loopwarden stopped this task: PARTIAL/model_budget")
    assert json.loads(output.split("\n", 1)[1]) == capability.report
    assert script.calls == 2 and lw.get_task(s.task_id)["state"] == "PARTIAL"


def test_usage_reaches_the_server_with_the_models_token_counts(lw, session):
    tools, s = Tools(), session()
    _, agent, _ = guarded([[("fetch_page", {"page": 1})], "done"], tools, s)
    agent.run_sync("one page")
    calls = model_calls(lw, s.task_id)
    assert [(c["prompt_tokens"], c["completion_tokens"]) for c in calls] == [(120, 30)] * 2
    assert lw.get_task(s.task_id)["usage"]["tokens"] == 300


def test_a_fifteen_step_task_with_fresh_data_runs_to_the_end(lw, session):
    tools, s = Tools(), session()
    turns = [[("fetch_page", {"page": n})] for n in range(1, 16)] + ["exported 15 pages"]
    _, agent, _ = guarded(turns, tools, s)
    assert agent.run_sync("export").output == "exported 15 pages"
    assert tools.ran == ["fetch_page"] * 15
    task = lw.get_task(s.task_id)
    assert task["usage"]["tool_executions"] == 15
    # ended with its answer: finished, never left to wait out its deadline
    assert (task["state"], task["reason"]) == ("PARTIAL", "goal_unverified")


def test_streamed_runs_are_guarded_too(lw, session):
    tools, s = Tools(), session()
    _, agent, _ = guarded([[SEARCH], [SEARCH, SEARCH], [SEARCH], "done"], tools, s)

    async def main() -> None:
        async with agent.run_stream_events("refund policy?") as events:
            async for _ in events:
                pass

    with pytest.raises(TaskStopped) as caught:
        asyncio.run(main())
    assert caught.value.reason == "same_call" and len(tools.ran) == 2


def test_a_streamed_model_stop_ends_cleanly(lw, session):
    tools, s = Tools(), session(max_model_calls=1)
    _, agent, _ = guarded([[("fetch_page", {"page": n})] for n in range(1, 9)], tools, s)

    async def main() -> Any:
        async with agent.run_stream("export") as run:
            return await run.get_output()

    assert asyncio.run(main()).startswith("Loopwarden stopped this task: PARTIAL/model_budget")


def test_an_async_session_works_as_well(lw, alw, unique):
    task_id = lw.create_task("async pydantic-ai")["id"]
    tools = Tools()
    pay = ("pay", {"invoice": f"INV-{unique}", "amount": "3.00"})
    _, agent, _ = guarded([[pay], [pay], "paid"], tools, alw.session(task_id))

    async def main() -> Any:
        async with alw:
            return (await agent.run("go")).output

    assert asyncio.run(main()) == "paid"
    assert tools.ran == ["pay"] and tool_decisions(lw, task_id) == ["EXECUTE", "REUSE"]


def test_a_write_without_a_key_is_refused_at_setup(session):
    with pytest.raises(ValueError, match="key"):
        LoopwardenCapability(session(), tools={"pay": "write"})


def test_a_keyed_write_called_without_its_key_argument_is_answered_to_the_model(lw, session):
    """The key names an optional argument the model left out: validation passes, no key."""
    s, ran = session(), []

    def refund(order: str, reason: str = "") -> str:
        """Refund an order."""
        ran.append("refund")
        return f"refunded {order}"

    script = Script([[("refund", {"order": "A-1"})], "I need a reason."])
    capability = LoopwardenCapability(s, tools={"refund": write(key="refund-{order}-{reason}")})
    agent = Agent(FunctionModel(script), tools=[refund], capabilities=[capability])
    result = agent.run_sync("refund A-1")
    assert result.output == "I need a reason." and ran == []
    [answer] = [part.content for message in result.all_messages() for part in message.parts
                if getattr(part, "part_kind", "") == "tool-return"]  # fmt: skip
    assert answer["code"] == "INVALID_TOOL_ARGUMENTS" and "reason" in answer["message"]
    assert tool_decisions(lw, s.task_id) == []
    task = lw.get_task(s.task_id)  # not stopped: finished by the final answer
    assert (task["state"], task["reason"]) == ("PARTIAL", "goal_unverified")


def test_a_model_stop_of_an_agent_with_structured_output_raises_task_stopped(lw, session):
    """A stop text is no valid structured output: pydantic-ai would retry it and fail with
    UnexpectedModelBehavior; the run must end with the report instead."""
    from pydantic import BaseModel

    class Invoice(BaseModel):
        number: str

    tools, s = Tools(), session(max_model_calls=1)
    script = Script([[("fetch_page", {"page": n})] for n in range(1, 9)])
    agent = Agent(FunctionModel(script), tools=tools.all, output_type=Invoice,
                  capabilities=[LoopwardenCapability(s, tools=PAY)])  # fmt: skip
    with pytest.raises(TaskStopped) as caught:
        agent.run_sync("export")
    assert (caught.value.state, caught.value.reason) == ("PARTIAL", "model_budget")
    assert script.calls == 1


def test_an_output_function_is_a_tool_execution_and_passes_the_gate(lw, operator, session, unique):
    """An output function (`output_type=fn`) runs the model's arguments like a tool: a write
    done there must be asked for and reach the ledger."""
    s, sent = session(), []

    def send_invoice(invoice: str) -> str:
        """Send the invoice and finish."""
        sent.append(invoice)
        return f"sent {invoice}"

    def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
        [output_tool] = info.output_tools
        call = ToolCallPart(tool_name=output_tool.name, args={"invoice": f"INV-{unique}"})
        return ModelResponse(parts=[call], usage=RequestUsage(input_tokens=10, output_tokens=5))

    guard = LoopwardenCapability(s, tools={"send_invoice": write(key="send-{invoice}")})
    agent = Agent(FunctionModel(model), output_type=send_invoice, capabilities=[guard])
    assert agent.run_sync("send it").output == f"sent INV-{unique}"
    assert sent == [f"INV-{unique}"]
    assert tool_decisions(lw, s.task_id) == ["EXECUTE"]
    assert operation_state(operator, f"send-INV-{unique}") == "COMMITTED"


def test_the_tokens_of_a_response_a_model_fallback_rejected_are_reported(lw, session):
    """ModelFallback moves on from a cut-off response (billed) inside one model request: its
    usage is on the answer's failed_attempts, not in its usage, and must be reported too."""
    from pydantic_ai.capabilities import ModelFallback

    s = session()

    def cut_off(messages: list[Any], info: AgentInfo) -> ModelResponse:
        usage = RequestUsage(input_tokens=1000, output_tokens=4000)
        return ModelResponse(parts=[TextPart(content="...")], usage=usage, finish_reason="length")

    def answers(messages: list[Any], info: AgentInfo) -> ModelResponse:
        usage = RequestUsage(input_tokens=100, output_tokens=10)
        return ModelResponse(parts=[TextPart(content="done")], usage=usage)

    agent = Agent(FunctionModel(cut_off), capabilities=[
        LoopwardenCapability(s), ModelFallback(FunctionModel(answers)),
    ])  # fmt: skip
    result = agent.run_sync("go")
    assert result.output == "done" and result.usage.total_tokens == 5110
    assert lw.get_task(s.task_id)["usage"]["tokens"] == 5110


# -- the run's end (issue 37): a run that ended with its answer finishes the task


def test_a_run_that_ends_with_its_answer_finishes_the_task_under_the_default_profile(live):
    with Client(live.api, live.strict_token) as strict:
        s = strict.session(strict.create_task("default profile")["id"])
        _, agent, capability = guarded([[SEARCH], "Refunds take 5 days."], Tools(), s)
        assert agent.run_sync("refund policy?").output == "Refunds take 5 days."
        task = strict.get_task(s.task_id)
    assert (task["state"], task["reason"]) == ("PARTIAL", "goal_unverified")
    assert capability.report == task["report"]


def test_a_streamed_run_that_ends_with_its_answer_finishes_the_task(lw, session):
    s = session()
    _, agent, _ = guarded([[SEARCH], "found"], Tools(), s)

    async def main() -> Any:
        async with agent.run_stream("refund policy?") as run:
            return await run.get_output()

    assert asyncio.run(main()) == "found"
    assert lw.get_task(s.task_id)["reason"] == "goal_unverified"


def test_keep_open_leaves_the_task_running_for_the_next_run(lw, session):
    s = session()
    agent = Agent(FunctionModel(Script([[SEARCH], "found"])), tools=Tools().all,
                  capabilities=[LoopwardenCapability(s, keep_open=True)])  # fmt: skip
    agent.run_sync("refund policy?")
    assert lw.get_task(s.task_id)["state"] == "RUNNING"


# -- declarations (issue 37): by the name the model sees, and never of a missing tool


def test_a_declaration_naming_a_tool_the_agent_does_not_have_is_refused(lw, session, unique):
    tools, s = Tools(), session()
    pay = ("pay", {"invoice": f"INV-{unique}", "amount": "12.00"})
    misnamed = LoopwardenCapability(s, tools={"pay_invoice": write(key="pay-{invoice}")})
    agent = Agent(FunctionModel(Script([[pay], [pay], "paid"])), tools=tools.all,
                  capabilities=[misnamed])  # fmt: skip
    with pytest.raises(ValueError, match=r"does not have: \['pay_invoice'\]"):
        agent.run_sync("pay it")
    assert tools.ran == [] and lw.get_task(s.task_id)["usage"]["model_calls"] == 0


def test_a_renamed_tool_is_declared_by_the_name_the_model_sees(lw, operator, session, unique):
    from pydantic_ai import Tool

    s, ran = session(), []

    def pay(invoice: str, amount: str) -> str:
        """Pay an invoice."""
        ran.append("pay")
        return f"paid {invoice}"

    call = ("pay_invoice", {"invoice": f"INV-{unique}", "amount": "12.00"})
    guard = LoopwardenCapability(s, tools={"pay_invoice": write(key="pay-{invoice}")})
    agent = Agent(FunctionModel(Script([[call], [call], "paid"])),
                  tools=[Tool(pay, name="pay_invoice")], capabilities=[guard])  # fmt: skip
    assert agent.run_sync("pay it").output == "paid"
    assert ran == ["pay"] and tool_decisions(lw, s.task_id) == ["EXECUTE", "REUSE"]
    assert operation_state(operator, f"pay-INV-{unique}") == "COMMITTED"


# -- the framework's own "try again" (issue 37)


def test_a_model_retry_from_a_read_goes_back_to_the_model_and_counts(lw, session):
    s, asked = session(), []

    def lookup(order: str) -> str:
        """Look an order up."""
        asked.append(order)
        if not order.startswith("A-"):
            raise ModelRetry("order numbers look like A-123")
        return f"order {order}: shipped"

    script = Script([[("lookup", {"order": "123"})], [("lookup", {"order": "A-123"})],
                     "It shipped."])  # fmt: skip
    agent = Agent(FunctionModel(script), tools=[lookup], capabilities=[LoopwardenCapability(s)])
    result = agent.run_sync("where is order 123?")
    assert result.output == "It shipped." and asked == ["123", "A-123"]
    [retry] = [part for message in result.all_messages() for part in message.parts
               if getattr(part, "outcome", "") == "retried"]  # fmt: skip
    assert "order numbers look like A-123" in retry.model_response_str()
    task = lw.get_task(s.task_id)
    assert (task["state"], task["reason"]) == ("PARTIAL", "goal_unverified")
    assert (task["usage"]["tool_executions"], task["usage"]["retries"]) == (2, 1)


def test_a_model_retry_from_a_write_leaves_its_operation_unknown(lw, operator, session, unique):
    s = session()

    def pay(invoice: str, amount: str) -> str:
        """Pay an invoice."""
        raise ModelRetry("amount must have two decimals")

    call = ("pay", {"invoice": f"INV-{unique}", "amount": "12"})
    agent = Agent(FunctionModel(Script([[call], "paid"])), tools=[pay],
                  capabilities=[LoopwardenCapability(s, tools=PAY)])  # fmt: skip
    with pytest.raises(TaskStopped) as caught:
        agent.run_sync("pay it")
    assert (caught.value.state, caught.value.reason) == ("NEEDS_HUMAN", "unknown_commit")
    assert operation_state(operator, f"pay-INV-{unique}") == "UNKNOWN"


def test_a_declared_tool_its_prepare_hides_from_the_first_request_is_not_refused(lw, session):
    from pydantic_ai import Tool

    s = session()

    def pay(invoice: str, amount: str) -> str:
        """Pay an invoice."""
        return f"paid {invoice}"

    async def later(ctx: Any, tool_def: Any) -> Any:
        return tool_def if ctx.run_step > 1 else None

    guard = LoopwardenCapability(s, tools={"pay_invoice": write(key="pay-{invoice}")})
    hidden = Tool(pay, name="pay_invoice", prepare=later)
    agent = Agent(FunctionModel(Script(["nothing to pay"])), tools=[hidden], capabilities=[guard])
    assert agent.run_sync("pay it").output == "nothing to pay"
