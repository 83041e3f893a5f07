"""Loopwarden's thin client: ask before every paid model call and every tool execution.

Depends on httpx only and never imports Django. The framework adapters live in
`loopwarden_client.langchain`, `loopwarden_client.openai_agents` and
`loopwarden_client.pydantic_ai`, each behind an extra of the same name.
"""

from loopwarden_client._version import VERSION as __version__
from loopwarden_client.client import AsyncClient, AsyncTaskSession, Client, TaskSession, arun, run
from loopwarden_client.errors import InvalidEvidence, LoopwardenError, TaskStopped
from loopwarden_client.types import ModelCall, Plan, ToolOutcome, ToolReport

__all__ = [
    "AsyncClient",
    "AsyncTaskSession",
    "Client",
    "InvalidEvidence",
    "LoopwardenError",
    "ModelCall",
    "Plan",
    "TaskSession",
    "TaskStopped",
    "ToolOutcome",
    "ToolReport",
    "__version__",
    "arun",
    "run",
]
