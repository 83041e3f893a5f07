"""A LangChain v1 agent guarded by Loopwarden, with a scripted model (no network, no API key).

Needs `pip install './clients/python[langchain]'` (./dev has done it in .venv). The story,
and how to run it against a running `./dev run`, are in `_demo.py`.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from loopwarden_client import TaskSession
from loopwarden_client.langchain import LoopwardenMiddleware

# _demo.py, beside this file, holds the story and its tools (found under `python -P` too).
sys.path.insert(0, str(Path(__file__).resolve().parent))
import _demo  # noqa: E402


class ScriptedModel(BaseChatModel):
    """Asks for the same tool call: again and again (the loop Loopwarden exists to stop), or
    once, then gives its answer."""

    call: dict[str, Any]
    answer: str | None = None
    asked: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:  # fmt: skip
        usage = {"input_tokens": 900, "output_tokens": 40, "total_tokens": 940}
        self.asked += 1
        if self.answer is not None and self.asked > 1:
            message = AIMessage(content=self.answer, usage_metadata=usage)
        else:
            call = {**self.call, "id": f"call-{uuid.uuid4().hex[:8]}"}
            message = AIMessage(content="", tool_calls=[call], usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=message)])


def build(session: TaskSession, name: str, args: dict[str, Any], answer: str | None):
    guard = LoopwardenMiddleware(session, tools=_demo.TOOLS)
    model = ScriptedModel(call={"name": name, "args": args}, answer=answer)
    agent = create_agent(model, [tool(_demo.search), tool(_demo.pay)], middleware=[guard])
    return guard, lambda goal: agent.invoke({"messages": [{"role": "user", "content": goal}]})


_demo.main(build)
