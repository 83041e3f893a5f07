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
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

# _demo.py, beside this file, holds the story and its tools (found under `python -P` too).
sys.path.insert(0, str(Path(__file__).resolve().parent))
import _demo  # noqa: E402


def looping_model(tool: str, args: dict[str, Any]) -> FunctionModel:
    """Always asks for the same tool call: the loop Loopwarden exists to stop."""

    def answer(messages: list[Any], info: AgentInfo) -> ModelResponse:
        call = ToolCallPart(tool_name=tool, args=args, tool_call_id=uuid.uuid4().hex[:8])
        return ModelResponse(parts=[call], usage=RequestUsage(input_tokens=900, output_tokens=40))

    return FunctionModel(answer)


def build(session: TaskSession, tool: str, args: dict[str, Any]):
    guard = LoopwardenCapability(session, tools=_demo.TOOLS)
    agent = Agent(looping_model(tool, args), tools=[_demo.search, _demo.pay], capabilities=[guard])
    return guard, agent.run_sync


_demo.main(build)
