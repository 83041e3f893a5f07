"""A pydantic-ai agent guarded by Loopwarden, with a scripted model (no network, no API key).

Needs `pip install './clients/python[pydantic-ai]'` (./dev has done it in .venv). The story,
and how to run it against a running `./dev run`, are in `_demo.py`.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

from loopwarden_client import TaskSession
from loopwarden_client.pydantic_ai import LoopwardenCapability
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

# _demo.py, beside this file, holds the story and its tools (found under `python -P` too).
sys.path.insert(0, str(Path(__file__).resolve().parent))
import _demo  # noqa: E402


def scripted_model(tool: str, args: dict[str, Any], answer: str | None) -> FunctionModel:
    """Asks for the same tool call: again and again (the loop Loopwarden exists to stop), or
    once, then gives its answer."""
    asked: list[int] = []

    def respond(messages: list[Any], info: AgentInfo) -> ModelResponse:
        usage = RequestUsage(input_tokens=900, output_tokens=40)
        asked.append(1)
        if answer is not None and len(asked) > 1:
            return ModelResponse(parts=[TextPart(content=answer)], usage=usage)
        call = ToolCallPart(tool_name=tool, args=args, tool_call_id=uuid.uuid4().hex[:8])
        return ModelResponse(parts=[call], usage=usage)

    return FunctionModel(respond)


def build(session: TaskSession, tool: str, args: dict[str, Any], answer: str | None):
    guard = LoopwardenCapability(session, tools=_demo.TOOLS)
    model = scripted_model(tool, args, answer)
    agent = Agent(model, tools=[_demo.search, _demo.pay], capabilities=[guard])
    return guard, agent.run_sync


_demo.main(build)
