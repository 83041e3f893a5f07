"""Small builders for guard-core tests: a running task, requests, results, evidence."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from agents.guard import core
from agents.guard.terms import (
    EXECUTE,
    READ,
    RUNNING,
    SUCCESS,
    WRITE,
    AgentView,
    Limits,
    OperationView,
    Outcome,
    TaskState,
    ToolCallView,
    ToolRequest,
    ToolResult,
)

NOW = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


def make_task(*, state: str = RUNNING, deadline_in: int = 900, **limits: Any) -> TaskState:
    """A task in phase 1 created at NOW, with Limits defaults overridden by `limits`."""
    return TaskState(
        state=state,
        phase=1,
        limits=Limits(**limits),
        deadline_at=NOW + timedelta(seconds=deadline_in),
    )


def agent(**kw: Any) -> AgentView:
    return AgentView(**kw)


def read(tool: str = "search", job_id: str | None = None, **args: Any) -> ToolRequest:
    return ToolRequest(tool=tool, args=args, effect=READ, job_id=job_id)


def write(tool: str = "send_mail", key: str | None = "op-1", **args: Any) -> ToolRequest:
    return ToolRequest(tool=tool, args=args, effect=WRITE, operation_key=key)


def call_of(req: ToolRequest) -> ToolCallView:
    """The ToolCallView the service would build for an EXECUTE'd request."""
    fp, text = core.fingerprint(req.tool, req.args, req.ignore_fields)
    return ToolCallView(
        tool=req.tool, effect=req.effect, fingerprint=fp, args_text=text, job_id=req.job_id
    )


def ev(revision: int, done: bool = False, **extra: Any) -> dict[str, Any]:
    return {"revision": revision, "done": done, **extra}


def ok(data: Any = None, evidence: Any = None, **kw: Any) -> ToolResult:
    return ToolResult(kind=SUCCESS, data=data, evidence=evidence, **kw)


def step(
    task: TaskState,
    req: ToolRequest,
    result: ToolResult | None = None,
    *,
    operation: OperationView | None = None,
    now: datetime = NOW,
) -> tuple[Outcome, Outcome | None]:
    """Request a tool; if the guard says EXECUTE, report `result` (default: bare SUCCESS)."""
    asked = core.request_tool(task, req, operation, agent(), now)
    if asked.decision != EXECUTE:
        return asked, None
    return asked, core.report_result(task, call_of(req), result or ok(), now)
