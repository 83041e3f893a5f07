"""The OpenAI Agents SDK (`agents`) with guard_agent, a scripted model, a live server."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest

pytest.importorskip("agents")

import scenarios  # noqa: E402
from loopwarden_client import Client, TaskStopped  # noqa: E402
from loopwarden_client import openai_agents as lw_agents  # noqa: E402
from loopwarden_client.guard import write  # noqa: E402
from loopwarden_client.openai_agents import AgentTaskStopped, guard_agent  # noqa: E402
from openai.types.responses import (  # noqa: E402
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseUsage,
)
from openai.types.responses.response_usage import (  # noqa: E402
    InputTokensDetails,
    OutputTokensDetails,
)
from scenarios import PAY, SEARCH, model_calls, operation_state, tool_decisions  # noqa: E402

from agents import (  # noqa: E402
    Agent,
    Handoff,
    Model,
    ModelProvider,
    ModelResponse,
    RunConfig,
    Runner,
    Usage,
    WebSearchTool,
    function_tool,
    handoff,
    set_tracing_disabled,
)

set_tracing_disabled(True)  # no trace export: no network, no API key


class ScriptedModel(Model):
    """Answers from a script: each turn a list of (tool, args) calls, or a final text."""

    def __init__(self, script: list[Any], usage: tuple[int, int] | None = (120, 30)) -> None:
        self.script, self.usage, self.calls = script, usage, 0

    def _output(self) -> list[Any]:
        turn = self.script[min(self.calls, len(self.script) - 1)]
        self.calls += 1
        if isinstance(turn, str):
            text = ResponseOutputText(text=turn, type="output_text", annotations=[])
            return [
                ResponseOutputMessage(
                    id=f"msg_{self.calls}",
                    content=[text],
                    role="assistant",
                    status="completed",
                    type="message",
                )
            ]
        return [ResponseFunctionToolCall(call_id=f"call_{self.calls}_{i}_{uuid.uuid4().hex[:6]}",
                                         name=name, arguments=json.dumps(args),
                                         type="function_call")
                for i, (name, args) in enumerate(turn)]  # fmt: skip

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        output = self._output()
        usage = Usage(requests=1, input_tokens=self.usage[0], output_tokens=self.usage[1],
                      total_tokens=sum(self.usage)) if self.usage else Usage()  # fmt: skip
        return ModelResponse(output=output, usage=usage, response_id=None)

    async def stream_response(self, *args: Any, **kwargs: Any):
        output = self._output()
        usage = ResponseUsage(
            input_tokens=self.usage[0], output_tokens=self.usage[1],
            total_tokens=sum(self.usage),
            input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
            output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
        )  # fmt: skip
        response = Response(id=f"resp_{self.calls}", created_at=0, model="scripted",
                            object="response", output=output, parallel_tool_calls=True,
                            tool_choice="auto", tools=[], usage=usage)  # fmt: skip
        yield ResponseCompletedEvent(response=response, sequence_number=0,
                                     type="response.completed")  # fmt: skip


class Tools(scenarios.Tools):
    wrap = staticmethod(function_tool)


def guarded(script: list[Any], tools: Tools, session: Any, **model: Any) -> tuple[Any, Any]:
    scripted = ScriptedModel(script, **model)
    agent = Agent(name="clerk", instructions="Help.", model=scripted, tools=tools.all)
    return scripted, guard_agent(agent, session, tools=PAY)


def run(agent: Any, text: str = "go", **kwargs: Any) -> Any:
    return asyncio.run(Runner.run(agent, text, max_turns=40, **kwargs))


@pytest.fixture
def session(lw):
    def make(goal: str = "openai agents task", **limits: Any):
        return lw.session(lw.create_task(goal, limits=limits or None)["id"])

    return make


def test_a_repeated_read_is_blocked_then_stopped_and_ran_only_when_executed(lw, session):
    tools, s = Tools(), session()
    _, agent = guarded([[SEARCH], [SEARCH, SEARCH], [SEARCH], "done"], tools, s)
    with pytest.raises(TaskStopped) as caught:
        run(agent)
    assert type(caught.value) is AgentTaskStopped  # not wrapped in the SDK's UserError
    assert (caught.value.state, caught.value.reason) == ("PARTIAL", "same_call")
    decisions = tool_decisions(lw, s.task_id)
    assert sorted(decisions) == sorted(["EXECUTE", "EXECUTE", "BLOCK", "STOP"])
    assert len(tools.ran) == decisions.count("EXECUTE") == 2


@pytest.mark.parametrize("name", sorted(scenarios.SHARED))
def test_the_shared_scenarios_end_as_the_table_says(lw, operator, session, unique, name):
    """clients/scenarios.json: the TypeScript adapters' tests play the same table."""
    expected, invoice = scenarios.SHARED[name], f"INV-{unique}"
    tools, s = Tools(lose_payment=expected.get("lose_payment", False)), session()
    _, agent = guarded(scenarios.shared_script(name, invoice), tools, s)
    if "stop" in expected:
        with pytest.raises(TaskStopped) as caught:
            run(agent)
        assert [caught.value.state, caught.value.reason] == expected["stop"]
    else:
        assert run(agent).final_output == expected["final"]
        task = lw.get_task(s.task_id)
        assert [task["state"], task["reason"]] == expected["task"]
    assert sorted(tool_decisions(lw, s.task_id)) == sorted(expected["decisions"])
    assert tools.ran == expected["ran"]
    if "operation" in expected:
        assert operation_state(operator, f"pay-{invoice}") == expected["operation"]


def test_a_committed_write_asked_again_is_reused_and_runs_once(lw, operator, session, unique):
    tools, s = Tools(), session()
    pay = ("pay", {"invoice": f"INV-{unique}", "amount": "12.00"})
    _, agent = guarded([[pay], [pay], "paid"], tools, s)
    result = run(agent)
    assert result.final_output == "paid"
    assert tool_decisions(lw, s.task_id) == ["EXECUTE", "REUSE"]
    assert tools.ran == ["pay"]
    assert operation_state(operator, f"pay-INV-{unique}") == "COMMITTED"


def test_a_lost_write_response_ends_needs_human(lw, operator, session, unique):
    tools, s = Tools(lose_payment=True), session()
    pay = ("pay", {"invoice": f"INV-{unique}", "amount": "12.00"})
    _, agent = guarded([[pay], [pay], "paid"], tools, s)
    with pytest.raises(TaskStopped) as caught:
        run(agent)
    assert (caught.value.state, caught.value.reason) == ("NEEDS_HUMAN", "unknown_commit")
    assert isinstance(caught.value.__cause__.__cause__, TimeoutError)
    assert tools.ran == ["pay"]
    assert operation_state(operator, f"pay-INV-{unique}") == "UNKNOWN"


def test_a_model_stop_ends_the_run_cleanly_with_the_report(lw, session):
    tools, s = Tools(), session(max_model_calls=2)
    model, agent = guarded([[("fetch_page", {"page": n})] for n in range(1, 9)], tools, s)
    result = run(agent)
    assert result.final_output.startswith("Loopwarden stopped this task: PARTIAL/model_budget")
    report = json.loads(result.final_output.split("\n", 1)[1])
    assert report == agent.loopwarden.report and report["reason"] == "model_budget"
    assert model.calls == 2 and lw.get_task(s.task_id)["state"] == "PARTIAL"


def test_usage_reaches_the_server_with_the_models_token_counts(lw, session):
    tools, s = Tools(), session()
    _, agent = guarded([[("fetch_page", {"page": 1})], "done"], tools, s)
    run(agent)
    calls = model_calls(lw, s.task_id)
    assert [(c["prompt_tokens"], c["completion_tokens"]) for c in calls] == [(120, 30)] * 2
    assert lw.get_task(s.task_id)["usage"]["tokens"] == 300


def test_a_model_without_usage_reports_none_and_keeps_its_reservation(lw, session):
    tools, s = Tools(), session()
    _, agent = guarded(["nothing to do"], tools, s, usage=None)
    run(agent)
    [call] = model_calls(lw, s.task_id)
    assert call["settled_at"] is None and call["prompt_tokens"] is None


def test_a_fifteen_step_task_with_fresh_data_runs_to_the_end(lw, session):
    tools, s = Tools(), session()
    script = [[("fetch_page", {"page": n})] for n in range(1, 16)] + ["exported 15 pages"]
    _, agent = guarded(script, tools, s)
    assert run(agent).final_output == "exported 15 pages"
    assert tools.ran == ["fetch_page"] * 15
    task = lw.get_task(s.task_id)
    assert task["usage"]["tool_executions"] == 15
    # ended with its answer: finished, never left to wait out its deadline
    assert (task["state"], task["reason"]) == ("PARTIAL", "goal_unverified")


def test_streamed_runs_are_guarded_too(lw, session):
    tools, s = Tools(), session()
    _, agent = guarded([[SEARCH], [SEARCH, SEARCH], [SEARCH], "done"], tools, s)

    async def main() -> None:
        result = Runner.run_streamed(agent, "go", max_turns=40)
        async for _ in result.stream_events():
            pass

    with pytest.raises(TaskStopped) as caught:
        asyncio.run(main())
    assert caught.value.reason == "same_call" and len(tools.ran) == 2
    calls = model_calls(lw, s.task_id)
    assert {(c["prompt_tokens"], c["completion_tokens"]) for c in calls} == {(120, 30)}


def test_a_streamed_model_stop_ends_cleanly(lw, session):
    tools, s = Tools(), session(max_model_calls=1)
    _, agent = guarded([[("fetch_page", {"page": n})] for n in range(1, 9)], tools, s)

    async def main() -> Any:
        result = Runner.run_streamed(agent, "go", max_turns=40)
        async for _ in result.stream_events():
            pass
        return result.final_output

    assert asyncio.run(main()).startswith("Loopwarden stopped this task: PARTIAL/model_budget")


def test_an_async_session_works_as_well(lw, alw, unique):
    task_id = lw.create_task("async openai agents")["id"]
    tools = Tools()
    pay = ("pay", {"invoice": f"INV-{unique}", "amount": "3.00"})
    _, agent = guarded([[pay], [pay], "paid"], tools, alw.session(task_id))

    async def main() -> Any:
        async with alw:
            return await Runner.run(agent, "go")

    assert asyncio.run(main()).final_output == "paid"
    assert tools.ran == ["pay"] and tool_decisions(lw, task_id) == ["EXECUTE", "REUSE"]


def test_setup_refuses_a_keyless_write_and_an_unknown_tool(session):
    agent = Agent(name="clerk", model=ScriptedModel(["hi"]), tools=Tools().all)
    with pytest.raises(ValueError, match="key"):
        guard_agent(agent, session(), tools={"pay": "write"})
    with pytest.raises(ValueError, match="does not have"):
        guard_agent(agent, session(), tools={"refund": write(key="r-{order}")})


def test_run_sync_is_guarded_with_a_sync_session(lw, session, unique):
    tools, s = Tools(), session()
    pay = ("pay", {"invoice": f"INV-{unique}", "amount": "7.00"})
    _, agent = guarded([[pay], [pay], "paid"], tools, s)
    assert Runner.run_sync(agent, "go").final_output == "paid"
    assert tools.ran == ["pay"] and tool_decisions(lw, s.task_id) == ["EXECUTE", "REUSE"]


def test_a_handoff_targets_model_and_tool_calls_are_guarded_too(lw, session):
    tools, s = Tools(), session()
    pages = [[("fetch_page", {"page": n})] for n in range(1, 4)]
    specialist = Agent(name="specialist", model=ScriptedModel([*pages, "exported"]),
                       tools=tools.all)  # fmt: skip
    triage = Agent(name="triage", model=ScriptedModel([[("transfer_to_specialist", {})]]),
                   handoffs=[specialist])  # fmt: skip
    specialist.handoffs = [triage]  # a cycle: each is cloned once
    result = run(guard_agent(triage, s, tools=PAY))
    assert result.final_output == "exported" and tools.ran == ["fetch_page"] * 3
    usage = lw.get_task(s.task_id)["usage"]
    assert (usage["model_calls"], usage["tool_requests"]) == (5, 3)
    assert tool_decisions(lw, s.task_id) == ["EXECUTE"] * 3


def test_a_handoff_object_is_guarded_and_one_whose_target_is_out_of_reach_is_refused(lw, session):
    tools, s = Tools(), session()
    specialist = Agent(name="specialist", model=ScriptedModel([[SEARCH], "found"]),
                       tools=tools.all)  # fmt: skip
    triage = Agent(name="triage", model=ScriptedModel([[("transfer_to_specialist", {})]]),
                   handoffs=[handoff(specialist)])  # fmt: skip
    assert run(guard_agent(triage, s)).final_output == "found"
    assert lw.get_task(s.task_id)["usage"]["model_calls"] == 3
    assert tool_decisions(lw, s.task_id) == ["EXECUTE"]

    async def somewhere(context: Any, arguments: str) -> Agent[Any]:
        return specialist

    opaque = Handoff(tool_name="transfer", tool_description="", input_json_schema={},
                     on_invoke_handoff=somewhere, agent_name="specialist")  # fmt: skip
    with pytest.raises(ValueError, match="handoff"):
        guard_agent(Agent(name="triage", handoffs=[opaque]), session())
    hosted = Agent(name="researcher", tools=[WebSearchTool()])
    with pytest.raises(TypeError, match="cannot be guarded"):
        guard_agent(Agent(name="triage", handoffs=[hosted]), session())


def test_a_run_config_model_passes_the_gate_without_an_api_key(lw, session, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    tools, s = Tools(), session(max_model_calls=2)
    agent = guard_agent(Agent(name="clerk", tools=tools.all), s, tools=PAY)  # model=None
    scripted = ScriptedModel([[("fetch_page", {"page": n})] for n in range(1, 9)])
    config = lw_agents.guard_run_config(RunConfig(model=scripted), agent)
    result = run(agent, run_config=config)
    assert result.final_output.startswith("Loopwarden stopped this task: PARTIAL/model_budget")
    assert scripted.calls == 2 and tools.ran == ["fetch_page"] * 2
    task = lw.get_task(s.task_id)
    assert (task["state"], task["usage"]["model_calls"]) == ("PARTIAL", 2)


class ScriptedProvider(ModelProvider):
    def __init__(self, model: Model) -> None:
        self.model, self.asked = model, []

    def get_model(self, model_name: str | None) -> Model:
        self.asked.append(model_name)
        return self.model


def test_a_model_name_resolves_through_the_runs_provider_and_passes_the_gate(
    lw, session, monkeypatch
):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    tools, s = Tools(), session()
    provider = ScriptedProvider(ScriptedModel([[("fetch_page", {"page": 1})], "done"]))
    agent = guard_agent(Agent(name="clerk", model="llama3", tools=tools.all), s)
    config = lw_agents.guard_run_config(RunConfig(model_provider=provider), agent)
    assert run(agent, run_config=config).final_output == "done"
    assert provider.asked == ["llama3"] and tools.ran == ["fetch_page"]
    assert [c["model"] for c in model_calls(lw, s.task_id)] == ["llama3", "llama3"]


def test_an_unguarded_run_config_model_is_refused_at_run_time(lw, session):
    tools, s = Tools(), session()
    agent = guard_agent(Agent(name="clerk", model=ScriptedModel(["hi"]), tools=tools.all), s)
    with pytest.raises(lw_agents.UnguardedModelCall, match="guard_run_config"):
        run(agent, run_config=RunConfig(model=ScriptedModel(["hi"])))


def test_a_keyed_write_called_without_its_key_argument_is_answered_to_the_model(lw, session):
    tools, s = Tools(), session()
    _, agent = guarded([[("pay", {"amount": "12.00"})], "I need the invoice number."], tools, s)
    result = run(agent)
    assert result.final_output == "I need the invoice number."
    [output] = [item.output for item in result.new_items if item.type == "tool_call_output_item"]
    assert "INVALID_TOOL_ARGUMENTS" in output and "invoice" in output
    assert tools.ran == [] and tool_decisions(lw, s.task_id) == []
    task = lw.get_task(s.task_id)  # not stopped: finished by the final answer
    assert (task["state"], task["reason"]) == ("PARTIAL", "goal_unverified")


def test_an_agent_tool_runs_its_agent_guarded_and_an_unguarded_one_is_refused(lw, session):
    tools, s = Tools(), session()
    researcher = Agent(name="researcher", model=ScriptedModel([[SEARCH], "found it"]),
                       tools=tools.all)  # fmt: skip
    lead = Agent(name="lead", model=ScriptedModel([[("research", {"input": "refunds?"})], "done"]),
                 tools=[researcher.as_tool("research", "Research a question.")])  # fmt: skip
    with pytest.raises(TypeError, match="as_tool"):  # its model calls would not pass the gate
        guard_agent(lead, s)
    assert (tools.ran, lw.get_task(s.task_id)["usage"]["model_calls"]) == ([], 0)

    lead.tools = [guard_agent(researcher, s).as_tool("research", "Research a question.")]
    assert run(guard_agent(lead, s)).final_output == "done"
    assert tools.ran == ["search"]
    usage = lw.get_task(s.task_id)["usage"]
    assert (usage["model_calls"], usage["tool_requests"]) == (4, 2)  # the lead's 2, its agent's 2
    assert tool_decisions(lw, s.task_id) == ["EXECUTE", "EXECUTE"]


# -- the run's end (issue 37): a run that ended with its answer finishes the task


def test_a_run_that_ends_with_its_answer_finishes_the_task_under_the_default_profile(live):
    with Client(live.api, live.strict_token) as strict:
        s = strict.session(strict.create_task("default profile")["id"])
        _, agent = guarded([[SEARCH], "Refunds take 5 days."], Tools(), s)
        assert run(agent).final_output == "Refunds take 5 days."
        task = strict.get_task(s.task_id)
    assert (task["state"], task["reason"]) == ("PARTIAL", "goal_unverified")
    assert agent.loopwarden.report == task["report"]


def test_keep_open_leaves_the_task_running_for_the_next_run(lw, session):
    s = session()
    agent = Agent(name="clerk", model=ScriptedModel([[SEARCH], "found"]), tools=Tools().all)
    guarded_agent = guard_agent(agent, s, keep_open=True)
    run(guarded_agent)
    assert lw.get_task(s.task_id)["state"] == "RUNNING"


def test_an_agent_tools_answer_does_not_finish_the_task_its_callers_does(lw, session):
    tools, s = Tools(), session()
    researcher = Agent(name="researcher", model=ScriptedModel([[SEARCH], "found it"]),
                       tools=tools.all)  # fmt: skip
    lead = Agent(name="lead", model=ScriptedModel([[("research", {"input": "refunds?"})],
                                                   [("fetch_page", {"page": 1})], "done"]),
                 tools=[guard_agent(researcher, s).as_tool("research", "Research."),
                        *tools.all])  # fmt: skip
    assert run(guard_agent(lead, s)).final_output == "done"
    assert tools.ran == ["search", "fetch_page"]
    task = lw.get_task(s.task_id)
    assert (task["state"], task["reason"]) == ("PARTIAL", "goal_unverified")
    assert task["usage"]["model_calls"] == 5  # the lead's 3, its researcher's 2


def test_a_renamed_tool_is_declared_by_the_name_the_model_sees(lw, operator, session, unique):
    s, ran = session(), []

    def pay(invoice: str, amount: str) -> str:
        """Pay an invoice."""
        ran.append("pay")
        return f"paid {invoice}"

    call = ("pay_invoice", {"invoice": f"INV-{unique}", "amount": "12.00"})
    tool = function_tool(pay, name_override="pay_invoice")
    agent = Agent(name="clerk", model=ScriptedModel([[call], [call], "paid"]), tools=[tool])
    with pytest.raises(ValueError, match=r"does not have: \['pay'\]"):
        guard_agent(agent, s, tools={"pay": write(key="pay-{invoice}")})
    run(guard_agent(agent, s, tools={"pay_invoice": write(key="pay-{invoice}")}))
    assert ran == ["pay"] and tool_decisions(lw, s.task_id) == ["EXECUTE", "REUSE"]
    assert operation_state(operator, f"pay-INV-{unique}") == "COMMITTED"


def test_a_streamed_run_that_ends_with_its_answer_finishes_the_task(lw, session):
    s = session()
    _, agent = guarded([[SEARCH], "found"], Tools(), s)

    async def main() -> Any:
        result = Runner.run_streamed(agent, "go", max_turns=40)
        async for _ in result.stream_events():
            pass
        return result.final_output

    assert asyncio.run(main()) == "found"
    assert lw.get_task(s.task_id)["reason"] == "goal_unverified"
