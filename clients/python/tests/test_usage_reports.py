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
