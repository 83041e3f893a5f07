"""The client's errors: the API refused a request, the guard stopped the task, or the
application wrote evidence the guard would refuse."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class LoopwardenError(Exception):
    """The API refused the request (HTTP 4xx/5xx, or a redirect), e.g. a bad envelope, a 404.

    `code` is the error envelope's code (`TRIGGER_LOOP` on a 429 at task creation),
    `HTTP_<status>` when the answer carried no envelope, or `REDIRECTED` for a 3xx (the server
    did nothing: its URL is another); `fields` maps field names to problems.
    """

    def __init__(
        self, status: int, code: str, message: str, fields: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.fields: dict[str, Any] = dict(fields or {})

    def __reduce__(self) -> tuple[Any, ...]:
        # Four arguments: the default pickling (the message alone) cannot rebuild it, and a
        # process pool that got it from a worker broke whole instead of raising it.
        return (type(self), (self.status, self.code, self.message, self.fields))


class TaskStopped(Exception):
    """The guard answered STOP: the task is terminal; `report` is its stored stop report.

    Not meant to be caught and retried. A stop is sticky: every later call answers the same
    report, and only an operator's resume opens a new phase. Let it reach the top of the agent
    and show `state`, `reason`, `code` and the report's `resume_condition` to a human.
    """

    def __init__(self, report: Mapping[str, Any] | None, *, task_id: str | None = None) -> None:
        self.report: dict[str, Any] = dict(report or {})
        self.task_id = task_id
        self.state: str | None = self.report.get("state")
        self.reason: str | None = self.report.get("reason")
        self.code: str | None = self.report.get("code")
        suffix = f" ({self.code})" if self.code else ""
        super().__init__(f"task {task_id} stopped: {self.state}/{self.reason}{suffix}")

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only task_id: the default pickling (args only) would lose it.
        return (_rebuild_stop, (type(self), self.report, self.task_id))


def _rebuild_stop(cls: type[TaskStopped], report: dict[str, Any], task_id: str | None):
    return cls(report, task_id=task_id)


class InvalidEvidence(ValueError):
    """Evidence that is not `{"revision": int, "done": bool, "committed"?: bool, "milestone"?:
    str}`, refused where it is written (a `ToolReport`, a `Plan`, `finish`), before anything is
    sent; the message names the field. Sent, it would stop the task with invalid_evidence."""
