"""Loopwarden's thin client: ask before every paid model call and every tool execution.

Depends on httpx only and never imports Django. The framework adapters live in
`loopwarden_client.langchain`, `loopwarden_client.openai_agents` and
`loopwarden_client.pydantic_ai`, each behind an extra of the same name.

The public names load on first use (PEP 562): the server's guard core imports the pure
`loopwarden_client.novelty` and `loopwarden_client.evidence`, and must not load httpx with them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from loopwarden_client._version import VERSION as __version__

if TYPE_CHECKING:
    from loopwarden_client.client import (
        AsyncClient,
        AsyncTaskSession,
        Client,
        TaskSession,
        arun,
        run,
    )
    from loopwarden_client.errors import InvalidEvidence, LoopwardenError, TaskStopped
    from loopwarden_client.types import ModelCall, Plan, ToolOutcome, ToolReport

_HOMES = {
    "AsyncClient": "loopwarden_client.client",
    "AsyncTaskSession": "loopwarden_client.client",
    "Client": "loopwarden_client.client",
    "TaskSession": "loopwarden_client.client",
    "arun": "loopwarden_client.client",
    "run": "loopwarden_client.client",
    "InvalidEvidence": "loopwarden_client.errors",
    "LoopwardenError": "loopwarden_client.errors",
    "TaskStopped": "loopwarden_client.errors",
    "ModelCall": "loopwarden_client.types",
    "Plan": "loopwarden_client.types",
    "ToolOutcome": "loopwarden_client.types",
    "ToolReport": "loopwarden_client.types",
}

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


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
