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
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

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


class ScriptedModel(Model):
    """Asks for the same tool call: again and again (the loop Loopwarden exists to stop), or
    once, then gives its answer."""

    def __init__(self, name: str, args: dict[str, Any], answer: str | None) -> None:
        self.name, self.args, self.answer, self.asked = name, args, answer, 0

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        usage = Usage(requests=1, input_tokens=900, output_tokens=40, total_tokens=940)
        self.asked += 1
        if self.answer is not None and self.asked > 1:
            text = ResponseOutputText(text=self.answer, type="output_text", annotations=[])
            message = ResponseOutputMessage(id=f"msg_{uuid.uuid4().hex[:8]}", content=[text],
                                            role="assistant", status="completed",
                                            type="message")  # fmt: skip
            return ModelResponse(output=[message], usage=usage, response_id=None)
        call = ResponseFunctionToolCall(
            call_id=f"call_{uuid.uuid4().hex[:8]}",
            name=self.name,
            arguments=json.dumps(self.args),
            type="function_call",
        )
        return ModelResponse(output=[call], usage=usage, response_id=None)

    async def stream_response(self, *args: Any, **kwargs: Any):
        raise NotImplementedError("this example does not stream")
        yield


def build(session: TaskSession, name: str, args: dict[str, Any], answer: str | None):
    tools = [function_tool(_demo.search), function_tool(_demo.pay)]
    agent = Agent(name="clerk", model=ScriptedModel(name, args, answer), tools=tools)
    agent = guard_agent(agent, session, tools=_demo.TOOLS)
    return agent.loopwarden, lambda goal: asyncio.run(Runner.run(agent, goal, max_turns=20))


_demo.main(build)
