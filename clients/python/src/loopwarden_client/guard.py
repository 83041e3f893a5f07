"""What every framework adapter shares: tool declarations and the guard around one agent run.

An adapter (`loopwarden_client.langchain`, `.openai_agents`, `.pydantic_ai`) translates its
framework's hooks into the three questions of docs/DESIGN.md section 4, asked through a `Guard`:

- before each model call, `gate()`: ALLOW runs the model; STOP ends the run with a final
  message carrying the report (`Guard.report`, `Guard.stop_message()`);
- after it, `usage(...)` with the framework's own token counts (nothing when the provider
  gave none: the reservation is then charged);
- around each tool call, `tool(...)`: EXECUTE runs the tool and reports its result (an
  exception is NO_RESULT; an error the framework hands back to the model, `handed_back`, is
  a read's RETRYABLE and a write's NO_RESULT); REUSE and BLOCK answer with the stored result
  or the nudge and never run it; WAIT is slept out; STOP raises TaskStopped.

Tools are declared once, at setup: `read()` (the default for undeclared tools) or
`write(key=...)`, where `key` derives the operation key from the call's arguments. A write
without a key is refused when it is declared, never at run time; a declaration naming a tool
the agent does not have (by the name the model sees) is refused by `check_tools`, at setup or
at the first model call.

The end: when the framework's run ends with the agent's final answer, the adapter finishes
the task (`Guard.finish`) with the verifier's latest evidence, if it gave any: COMPLETED when
that says done, else PARTIAL/goal_unverified. A run that ended well never waits out its
deadline. `keep_open=True` leaves the task RUNNING instead, for several framework runs under
one task (finish it with `session.finish(...)`).

Progress: given an `evidence(tool, args, data)` callback (the application's verifier), its
answer is sent with each result. Without one, each result carries its `data_hash`, so a task
under a profile with `progress_mode: novelty` (the built-in `novelty` profile) counts new data
as progress; and a write that returned normally is reported committed at the task's current
revision (its own code confirmed it; an exception leaves it UNKNOWN).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypedDict

from loopwarden_client._core import REQUESTS
from loopwarden_client._flows import Flow, Invoke, adrive
from loopwarden_client.client import AsyncTaskSession, TaskSession
from loopwarden_client.errors import LoopwardenError, TaskStopped
from loopwarden_client.novelty import result_hash
from loopwarden_client.types import (
    COMPLETED,
    INVALID,
    JSON,
    READ,
    RETRYABLE,
    SUCCESS,
    WRITE,
    ToolOutcome,
    ToolReport,
    check_evidence,
    jsonable,
)

MAX_ANSWER = 4000  # characters of the final answer sent with `finish`
# What the server's database cannot hold (NUL, lone surrogates), refused in a finish's answer
# (400 UNSUPPORTED_TEXT): the answer is the agent's words for a person, sent with U+FFFD there.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def answer_text(output: Any) -> str:
    """A framework run's final output as the answer `finish` sends: text as it is, anything
    else (structured output) as JSON."""
    return output if isinstance(output, str) else json.dumps(jsonable(output))


Evidence = Callable[[str, Mapping[str, Any], Any], Mapping[str, Any] | None]
KeyRule = str | Callable[[Mapping[str, Any]], str]


@dataclass(frozen=True)
class ToolSpec:
    """How the guard sees one tool: its effect and, for a write, its operation key rule.

    `key` is a format string over the arguments (`"pay-{invoice}"`) or a function of them.
    `job_id` (a function of the arguments) marks a status-poll tool. `committed(data)` decides,
    without an evidence callback, whether a write's normal return confirms its commit (default:
    it does).
    """

    effect: str = READ
    key: KeyRule | None = None
    job_id: Callable[[Mapping[str, Any]], str | None] | None = None
    committed: Callable[[Any], bool] | None = None

    def __post_init__(self) -> None:
        if self.effect not in (READ, WRITE):
            raise ValueError(f"effect must be 'read' or 'write', not {self.effect!r}")
        if self.effect == WRITE and not self.key:
            raise ValueError(
                "a write tool needs key=: how its operation key derives from its arguments"
            )

    def operation_key(self, args: Mapping[str, Any]) -> str | None:
        """The call's operation key; `InvalidArguments` when its arguments cannot derive one."""
        if self.key is None:
            return None
        try:
            return str(self.key(args)) if callable(self.key) else self.key.format(**args)
        except Exception as exc:  # noqa: BLE001 - a model's arguments can break any rule
            raise InvalidArguments(f"its operation key ({_rule(self.key)})", exc) from exc

    def poll_job(self, args: Mapping[str, Any]) -> str | None:
        """The job this call polls, if it is a status poll; `InvalidArguments` as above."""
        if self.job_id is None:
            return None
        try:
            return self.job_id(args)
        except Exception as exc:  # noqa: BLE001
            raise InvalidArguments(f"the job it polls ({_rule(self.job_id)})", exc) from exc


class InvalidArguments(Exception):
    """A tool call's arguments cannot derive what its declaration needs: the model's mistake,
    answered to the model as the tool's message; nothing is asked and nothing runs."""

    def __init__(self, needed: str, cause: Exception) -> None:
        missing = f"the argument {cause.args[0]!r}" if isinstance(cause, KeyError) else None
        self.detail = missing or f"{type(cause).__name__}: {cause}"
        super().__init__(f"cannot derive {needed}: {self.detail}")

    def tool_message(self, tool: str) -> JSON:
        """Shaped like the guard's BLOCK observation."""
        return {
            "success": False,
            "code": "INVALID_TOOL_ARGUMENTS",
            "retryable": False,
            "message": f"{tool} was not run: {self}. Call it again with complete arguments.",
        }


def _rule(rule: Any) -> str:
    return rule if isinstance(rule, str) else getattr(rule, "__name__", "a function")


def read(*, job_id: Callable[[Mapping[str, Any]], str | None] | None = None) -> ToolSpec:
    """A tool without side effects; `job_id(args)` marks it as a status poll of that job."""
    return ToolSpec(READ, job_id=job_id)


def write(key: KeyRule, *, committed: Callable[[Any], bool] | None = None) -> ToolSpec:
    """A tool with a side effect, executed at most once per operation key."""
    return ToolSpec(WRITE, key=key, committed=committed)


def tool_specs(tools: Mapping[str, ToolSpec | str] | None) -> dict[str, ToolSpec]:
    """Declarations checked at setup: `"read"`, or a `ToolSpec`; a bare `"write"` is refused."""
    specs: dict[str, ToolSpec] = {}
    for name, spec in (tools or {}).items():
        if isinstance(spec, str):
            if spec == WRITE:
                raise ValueError(
                    f"tool {name!r} is a write: declare it as write(key=...) so its operation "
                    "key can be derived from its arguments"
                )
            spec = ToolSpec(spec)
        if not isinstance(spec, ToolSpec):
            raise TypeError(f"tool {name!r}: expected read(), write(key=...) or 'read'")
        specs[name] = spec
    return specs


def handed_back(message: str) -> ToolReport:
    """A read's error that the framework hands back to the model as it intends (pydantic-ai's
    `ModelRetry`, a LangChain tool error the user asked it to handle): the call is no
    failure of the task, but it ran and counts. Reported RETRYABLE, which draws on the retry
    budget as well as the execution and stagnation counts; the wait is the least the server
    takes, since the retry is the model's next turn. A write's is NO_RESULT instead: its
    tool ran and raised, and nothing says whether it acted first."""
    return ToolReport(kind=RETRYABLE, code="HANDED_BACK", error=message[:2000], wait_ms=1)


def data_hash(data: Any) -> str:
    """The `novelty` hash of a result, without the built-in volatile keys (`fetched_at`,
    `request_id`, `etag`, ...) as the server takes it. Sent beside the data, which the server
    hashes itself with the tool policy's rules (see `loopwarden_client.novelty`)."""
    return result_hash(data)


class GuardOptions(TypedDict, total=False):
    """What every adapter (and `Guard`) takes beside the session.

    `tools`: per tool name, `read()` (the default) or `write(key=...)`. `evidence(tool, args,
    data)`: the application's verifier; without it each result is sent with its data hash
    (run the agent under the `novelty` profile). `est_prompt_tokens` and `max_output_tokens`
    go to every model gate. `keep_open`: leave the task RUNNING when the run ends with its
    final answer (default: finish it).
    """

    tools: Mapping[str, ToolSpec | str] | None
    evidence: Evidence | None
    est_prompt_tokens: int | None
    max_output_tokens: int | None
    keep_open: bool


def needs_extra(module: str, extra: str) -> ImportError:
    """The error an adapter raises when its framework is not installed: it names the extra."""
    return ImportError(
        f"{module} needs the {extra!r} extra: pip install 'loopwarden-client[{extra}]'"
    )


def provider_counts(prompt: int | None, completion: int | None) -> tuple[int | None, int | None]:
    """A provider's token counts, or (None, None) when it sent none (both zero or missing):
    nothing is reported then, and the gate's reservation is charged."""
    if not prompt and not completion:
        return None, None
    return prompt, completion


# What `Guard.model_turn` answers when the task was stopped (the model was not called, or its
# usage report stopped the task): the adapter ends the run with its stop message.
class _Stopped:
    def __repr__(self) -> str:
        return "STOPPED"


STOPPED = _Stopped()


def stop_text(report: Mapping[str, Any]) -> str:
    """The final message a framework run ends with when the guard stopped the task."""
    state, reason, code = report.get("state"), report.get("reason"), report.get("code")
    if state == COMPLETED:
        return f"Loopwarden: the task is {state}/{reason}; nothing more to do."
    text = f"Loopwarden stopped this task: {state}/{reason}"
    if code:
        text += f" ({code})"
    if report.get("resume_condition"):
        text += f". {report['resume_condition']}"
    return text


class Adapter:
    """What the adapters' objects share: their `Guard`, and its stop report as `report`."""

    guard: Guard

    @property
    def report(self) -> JSON | None:
        """The stop report, once the task ended."""
        return self.guard.report


class Guard:
    """The guard around one agent run of one task, for framework adapters.

    `session` is a `TaskSession` (works for sync and async runs: async runs send its requests
    from a worker thread) or an `AsyncTaskSession` (async runs only). `model`,
    `est_prompt_tokens` and `max_output_tokens` go to every model gate.
    """

    def __init__(
        self,
        session: TaskSession | AsyncTaskSession,
        *,
        tools: Mapping[str, ToolSpec | str] | None = None,
        evidence: Evidence | None = None,
        model: str | None = None,
        est_prompt_tokens: int | None = None,
        max_output_tokens: int | None = None,
        keep_open: bool = False,
    ) -> None:
        if not isinstance(session, TaskSession | AsyncTaskSession):
            raise TypeError("session must be a TaskSession or AsyncTaskSession")
        self.session = session
        self.tools = tool_specs(tools)
        self.evidence = evidence
        self.model = model
        self.est_prompt_tokens = est_prompt_tokens
        self.max_output_tokens = max_output_tokens
        self.keep_open = keep_open
        self.report: JSON | None = None  # the stop report, once the task ended
        self.verified: Mapping[str, Any] | None = None  # the verifier's latest evidence
        self._revision: int | None = None

    @property
    def task_id(self) -> str:
        return self.session.task_id

    def spec(self, tool: str) -> ToolSpec:
        return self.tools.get(tool) or ToolSpec()

    def check_tools(self, names: Iterable[str]) -> None:
        """Refuse a declaration naming a tool the agent does not have: tools are matched by the
        name the model sees (`@tool("pay_invoice")`, `Tool(fn, name=...)`), and a misnamed
        write would otherwise be guarded as a read, its key never asked for."""
        have = set(names)
        unknown = set(self.tools) - have
        if unknown:
            raise ValueError(
                f"declared tools the agent does not have: {sorted(unknown)}; declare each "
                f"by the name the model sees: {sorted(have)}"
            )

    # -- drivers

    def run(self, flow: Flow[Any]) -> Any:
        """Run a flow in a synchronous framework hook."""
        if isinstance(self.session, TaskSession):
            return self.session.drive(flow)
        flow.close()
        raise TypeError("a synchronous run needs a TaskSession (Client.session), not an async one")

    async def arun(self, flow: Flow[Any]) -> Any:
        """Run a flow in an asynchronous framework hook. A `TaskSession`'s requests and its
        `sleep` (a WAIT's) run in a worker thread, off the event loop."""
        if isinstance(self.session, AsyncTaskSession):
            return await self.session.drive(flow)
        send, sleep = self.session.client._send, self.session.sleep
        return await adrive(
            flow,
            lambda request: asyncio.to_thread(send, request),
            lambda seconds: asyncio.to_thread(sleep, seconds),
        )

    # -- the three questions, as flows

    def gate(self, model: str | None = None) -> Flow[int | None]:
        """The model gate: the allowed model call's id, or None when the task is stopped.

        Asked every time, even after a stop: only the server knows whether an operator has
        resumed the task since (a stop is sticky there, and asking counts nothing).
        """
        try:
            answer = yield REQUESTS.gate_model_call(
                self.task_id,
                model=model or self.model,
                est_prompt_tokens=self.est_prompt_tokens,
                max_output_tokens=self.max_output_tokens,
            )
        except TaskStopped as stop:
            self.report = stop.report
            return None
        self.report = None  # resumed: an earlier stop no longer holds
        self.session.last_model_call = int(answer["model_call"])
        return self.session.last_model_call

    def model_turn(
        self,
        model: str | None,
        call_model: Callable[[], Any],
        usage: Callable[[int, Any], Flow[bool]],
    ) -> Flow[Any]:
        """One model call under the guard: the gate, then `call_model()` (sync or async), then
        `usage(model_call, response)` (a flow of `usage`). The response, or `STOPPED` when the
        gate or the usage report stopped the task."""
        model_call = yield from self.gate(model)
        if model_call is None:
            return STOPPED
        response = yield Invoke(call_model, ())
        if not (yield from usage(model_call, response)):
            return STOPPED
        return response

    def usage(
        self,
        model_call: int,
        *,
        prompt_tokens: int | None,
        completion_tokens: int | None,
        tool_calls: list[Mapping[str, Any]] | None = None,
        output_text: str | None = None,
    ) -> Flow[bool]:
        """Settle a model call; False if the report stopped the task (e.g. repeated_output).

        Without token counts (`provider_counts`: none, or all zero) nothing is reported: the
        gate's reservation is charged instead.
        """
        prompt_tokens, completion_tokens = provider_counts(prompt_tokens, completion_tokens)
        if prompt_tokens is None and completion_tokens is None:
            return True
        try:
            yield REQUESTS.report_usage(
                self.task_id,
                model_call,
                prompt_tokens=int(prompt_tokens or 0),
                completion_tokens=int(completion_tokens or 0),
                tool_calls=tool_calls,
                output_text=output_text,
            )
        except TaskStopped as stop:
            self.report = stop.report
            return False
        return True

    def tool(
        self,
        name: str,
        args: Mapping[str, Any],
        execute: Callable[[Mapping[str, Any]], Any],
        *,
        call_id: str | None = None,
    ) -> Flow[ToolOutcome]:
        """One guarded tool call. `execute(args)` runs the framework's tool and returns a
        `ToolReport` (sync or async); it runs only on EXECUTE. STOP raises TaskStopped.

        Arguments that cannot derive the call's operation key (or polled job) are the model's
        mistake, as a schema violation is: the model gets the INVALID outcome's message, the
        tool does not run and nothing is asked. A request without the key would stop the task
        (missing_operation_key) for what the model can fix in its next turn, and the model
        gate and repeated_output still bound a model that keeps making it. After a stop such a
        call raises TaskStopped like any other (the task's state is read: an operator may have
        resumed it since).
        """
        spec = self.spec(name)
        args = dict(args)
        try:
            operation_key, job_id = spec.operation_key(args), spec.poll_job(args)
        except InvalidArguments as invalid:
            if self.report is not None:
                # The task stopped, and a stop is sticky: every later call answers it, whatever
                # its arguments. Its state says whether an operator has resumed it since.
                task = yield REQUESTS.get_task(self.task_id)
                if task.get("state") != "RUNNING":
                    self.report = task.get("report") or self.report
                    raise TaskStopped(self.report, task_id=self.task_id) from None
            return ToolOutcome(invalid.tool_message(name), INVALID)
        inspect: Callable[[Any], Any] | None = None
        if self.evidence is not None:
            inspect = self._verifier(name, args)
        elif spec.effect == WRITE:
            if self._revision is None:
                task = yield REQUESTS.get_task(self.task_id)
                self._revision = int(task.get("revision") or 0)
            inspect = _commit_evidence(spec, self._revision)
        ran: list[bool] = []

        def run(args: Mapping[str, Any]) -> Any:
            ran.append(True)
            return (execute if self.evidence is not None else _with_data_hash(execute))(args)

        try:
            outcome = yield from self.session.tool_flow(
                name,
                args,
                run,
                effect=spec.effect,
                operation_key=operation_key,
                job_id=job_id,
                inspect=inspect,
                call_id=call_id,
            )
        except TaskStopped as stop:
            self.report = stop.report
            raise
        except LoopwardenError as refused:
            # The server refused what the arguments derived (400: a key past its length, an
            # invisible character): the model's mistake too, answered to it as INVALID like
            # a key it cannot derive; the tool did not run.
            derived = {"operation_key": "its operation key", "job_id": "the job it polls"}
            field = next((f for f in derived if f in refused.fields), None)
            if ran or refused.status != 400 or field is None:
                raise
            mistake = InvalidArguments(derived[field], ValueError(refused.fields[field]))
            return ToolOutcome(mistake.tool_message(name), INVALID)
        if outcome.report is not None:
            self.report = outcome.report
        return outcome

    def finish(self, answer: str | None) -> Flow[JSON | None]:
        """The run ended with the agent's final answer: finish the task with the verifier's
        latest evidence (COMPLETED if it says done, else PARTIAL/goal_unverified) and keep
        its report. Nothing is asked when the task already ended or `keep_open` is set. The
        answer's text the database cannot hold (NUL, a lone surrogate) is sent as U+FFFD."""
        if self.keep_open or self.report is not None:
            return None
        answer = _UNSTORABLE.sub("\ufffd", answer[:MAX_ANSWER]) if answer else None
        task = yield REQUESTS.finish(self.task_id, evidence=self.verified, answer=answer)
        self.report = task.get("report")
        return task

    def _verifier(self, name: str, args: Mapping[str, Any]) -> Callable[[Any], Any]:
        """The application's verifier for one call; its evidence is remembered for `finish`."""
        evidence = self.evidence
        assert evidence is not None

        def inspect(data: Any) -> Any:
            verified = evidence(name, args, data)
            if verified is not None:
                check_evidence(verified)
                self.verified = verified
            return verified

        return inspect

    def stop_message(self) -> str:
        return stop_text(self.report or {})


def _commit_evidence(spec: ToolSpec, revision: int):
    def inspect(data: Any) -> JSON | None:
        if spec.committed is not None and not spec.committed(data):
            return None  # not confirmed: the operation becomes UNKNOWN, a human reconciles
        return {"revision": revision, "done": False, "committed": True}

    return inspect


def _with_data_hash(execute: Callable[[Mapping[str, Any]], Any]):
    """Add each SUCCESS's data_hash; works whether `execute` is sync or async."""

    def hashed(report: Any) -> Any:
        if isinstance(report, ToolReport) and report.kind == SUCCESS and not report.data_hash:
            return replace(report, data_hash=data_hash(report.data))
        return report

    def run(args: Mapping[str, Any]) -> Any:
        report = execute(args)
        if asyncio.iscoroutine(report):
            return _await_then(report, hashed)
        return hashed(report)

    return run


async def _await_then(coroutine: Any, then: Callable[[Any], Any]) -> Any:
    return then(await coroutine)
