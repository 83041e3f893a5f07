"""A model call's usage is money spent: its report reaches the server however Python let the
counts be written (a token estimate divided out as a float), never refused for its type."""

from __future__ import annotations


def test_usage_counted_as_floats_is_reported_rounded_up(lw):
    s = lw.session(lw.create_task("usage as floats")["id"])
    prompt = "refund policy " * 100
    with s.model_call(model="gpt-x", est_prompt_tokens=500) as call:
        call.usage(len(prompt) / 4, 20.0)  # an estimate where the provider gave none
    [model_call] = [c for c in lw.trace(s.task_id)["calls"] if c["type"] == "model_call"]
    assert (model_call["prompt_tokens"], model_call["completion_tokens"]) == (350, 20)


def test_tool_calls_whose_arguments_are_the_providers_json_text_are_reported(lw):
    """OpenAI's chat API gives a tool call's arguments as JSON text: reported as given, the
    usage of a paid call raised ValueError out of the `with` block and was never recorded."""
    s = lw.session(lw.create_task("usage with raw tool calls")["id"])
    raw = [{"name": "search", "args": '{"q": "order 7"}'}, {"name": "ping", "args": "not json"}]
    with s.model_call(model="gpt-x", est_prompt_tokens=500) as call:
        call.usage(480, 20, tool_calls=raw)
    [model_call] = [c for c in lw.trace(s.task_id)["calls"] if c["type"] == "model_call"]
    assert model_call["prompt_tokens"] == 480
    assert model_call["tool_calls"] == [
        {"name": "search", "args": {"q": "order 7"}},
        {"name": "ping", "args": {"arguments": "not json"}},
    ]


def test_run_takes_a_plans_tool_call_arguments_as_json_text(lw):
    """`run` returns the task however the loop ends: a plan carrying the provider's JSON
    text as a call's arguments raised ValueError out of it, the task left RUNNING."""
    from loopwarden_client import Plan, run

    task_id = lw.create_task("run with raw tool calls")["id"]
    steps = iter([Plan(tool_calls=[{"name": "search", "args": '{"q": "order 7"}'}]),
                  Plan(answer="found it")])  # fmt: skip
    ran: list[dict] = []
    task = run(lw, task_id, lambda history: next(steps),
               lambda name, args: ran.append(args) or {"hits": 1})  # fmt: skip
    assert ran == [{"q": "order 7"}]
    assert (task["state"], task["reason"]) == ("PARTIAL", "goal_unverified")
