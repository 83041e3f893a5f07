"""An OpenAI Agents SDK agent guarded by Loopwarden, with a scripted model (no network, no key).

Needs `pip install './clients/python[openai-agents]'` (./dev has done it in .venv). The story,
and how to run it against a running `./dev run`, are in `_demo.py`.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path
from typing import Any

from loopwarden_client import TaskSession
from loopwarden_client.openai_agents import guard_agent
from openai.types.responses import ResponseFunctionToolCall

from agents import (
    Agent,
    Model,
    ModelResponse,
    Runner,
    Usage,
    function_tool,
    set_tracing_disabled,
)

# _demo.py, beside this file, holds the story and its tools (found under `python -P` too).
sys.path.insert(0, str(Path(__file__).resolve().parent))
import _demo  # noqa: E402

set_tracing_disabled(True)  # nothing leaves this machine


class LoopingModel(Model):
    """Always asks for the same tool call: the loop Loopwarden exists to stop."""

    def __init__(self, name: str, args: dict[str, Any]) -> None:
        self.name, self.args = name, args

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        call = ResponseFunctionToolCall(
            call_id=f"call_{uuid.uuid4().hex[:8]}",
            name=self.name,
            arguments=json.dumps(self.args),
            type="function_call",
        )
        usage = Usage(requests=1, input_tokens=900, output_tokens=40, total_tokens=940)
        return ModelResponse(output=[call], usage=usage, response_id=None)

    async def stream_response(self, *args: Any, **kwargs: Any):
        raise NotImplementedError("this example does not stream")
        yield


def build(session: TaskSession, name: str, args: dict[str, Any]):
    tools = [function_tool(_demo.search), function_tool(_demo.pay)]
    agent = Agent(name="clerk", model=LoopingModel(name, args), tools=tools)
    agent = guard_agent(agent, session, tools=_demo.TOOLS)
    return agent.loopwarden, lambda goal: asyncio.run(Runner.run(agent, goal, max_turns=20))


_demo.main(build)
