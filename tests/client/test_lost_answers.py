"""A decision whose answer is lost after the server acted (a dropped connection, a read
timeout, a 503 after the commit): the client sends it again under the same request_id and the
server answers the first answer, so nothing counts twice, for every decision kind."""

from __future__ import annotations

from decimal import Decimal

import httpx
import pytest
from loopwarden_client import AsyncClient, Client, ToolReport

from agents.models import ModelCall, ModelPrice, RequestAnswer, Task, ToolCall
from ledger.models import Operation

KINDS = ["/model-calls", "/usage", "/tool-calls", "/result", "/finish"]


def _lose(mode: str, request: httpx.Request) -> httpx.Response:
    if mode == "read error":
        raise httpx.ReadError("the connection dropped before the answer came", request=request)
    if mode == "read timeout":
        raise httpx.ReadTimeout("no answer within the timeout", request=request)
    # The commit went through but the answer says the database was away.
    return httpx.Response(
        503, headers={"Retry-After": "0"}, request=request,
        json={"error": {"code": "DATABASE_UNAVAILABLE", "message": "away", "fields": {}}},
    )  # fmt: skip


class AnswerLost(httpx.BaseTransport):
    """The live server, except that the answer to the first request whose path ends with
    `suffix` is lost on the way back, after the server got the request and acted on it."""

    def __init__(self, suffix: str | None, mode: str = "read error") -> None:
        self.real, self.suffix, self.mode, self.lost = httpx.HTTPTransport(), suffix, mode, []
        self.sent: list[dict] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.real.handle_request(request)
        if request.method == "POST":
            self.sent.append({"path": request.url.path, "body": request.content})
        if self.suffix and request.url.path.endswith(self.suffix) and not self.lost:
            response.read()
            self.lost.append(response.json())
            return _lose(self.mode, request)
        return response

    def close(self) -> None:
        self.real.close()


class AsyncAnswerLost(httpx.AsyncBaseTransport):
    def __init__(self, suffix: str, mode: str) -> None:
        self.real, self.suffix, self.mode, self.lost = httpx.AsyncHTTPTransport(), suffix, mode, []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.real.handle_async_request(request)
        if request.url.path.endswith(self.suffix) and not self.lost:
            await response.aread()
            self.lost.append(response.json())
            return _lose(self.mode, request)
        return response

    async def aclose(self) -> None:
        await self.real.aclose()


@pytest.fixture
def priced(db):
    ModelPrice.objects.create(
        model="*", input_per_million=Decimal("3"), output_per_million=Decimal("15")
    )


def _a_task_run(api_url, token, transport, unique):
    """Gate and report a model call, run a write once, finish: what the task counted."""
    runs, answers = [], {}
    with Client(api_url, token, transport=transport, sleep=lambda s: None,
                on_decision=lambda name, _req, answer: answers.setdefault(name, answer),
                ) as lw:  # fmt: skip
        task_id = lw.create_task(f"pay invoice {unique}")["id"]
        session = lw.session(task_id)
        with session.model_call(model="m", est_prompt_tokens=100) as call:
            call.usage(120, 30, tool_calls=[{"name": "pay", "args": {"invoice": unique}}])
        session.tool(
            "pay", {"invoice": unique},
            lambda args: runs.append(1) or ToolReport(
                data={"paid": unique}, evidence={"revision": 1, "done": False, "committed": True}),
            effect="write", operation_key=f"pay-{unique}",
        )  # fmt: skip
        answers["finish"] = session.finish(evidence={"revision": 2, "done": True})
    return task_id, runs, answers


def _counted(task_id):
    task = Task.objects.get(pk=task_id)
    return {
        "state": task.state,
        "model_calls": task.model_calls,
        "tool_requests": task.tool_requests,
        "tool_executions": task.tool_executions,
        "tokens": task.tokens_used,
        "cost": task.cost_spent,
        "reserved": (task.tokens_reserved, task.cost_reserved),
        "revision": task.revision,
        "model_call_rows": ModelCall.objects.filter(task=task).count(),
        "tool_call_rows": ToolCall.objects.filter(task=task).count(),
        "operations": list(
            Operation.objects.filter(task=task).values_list("operation_key", "state")
        ),
    }


@pytest.mark.parametrize("mode", ["read error", "read timeout", "503"])
@pytest.mark.parametrize("suffix", KINDS)
def test_a_lost_answer_is_sent_again_and_counted_once(api_url, agent_token, priced, suffix, mode):
    clean_task, clean_runs, _ = _a_task_run(api_url, agent_token, None, "clean")
    transport = AnswerLost(suffix, mode)

    task_id, runs, answers = _a_task_run(api_url, agent_token, transport, "lossy")

    assert runs == clean_runs == [1]
    counted, clean = _counted(task_id), _counted(clean_task)
    assert counted["operations"] == [("pay-lossy", "COMMITTED")]
    clean["operations"] = counted["operations"]
    assert counted == clean
    assert counted["state"] == "COMPLETED" and counted["model_calls"] == 1
    assert counted["tokens"] == 150 and counted["cost"] > 0
    # The resend carried the first send's request_id, and was answered the lost answer.
    (lost,) = transport.lost
    sends = [s for s in transport.sent if s["path"].endswith(suffix)]
    assert len(sends) == 2 and sends[0]["body"] == sends[1]["body"]
    assert b'"request_id"' in sends[0]["body"]
    seen = {
        "/model-calls": "gate_model_call",
        "/usage": "report_usage",
        "/tool-calls": "request_tool",
        "/result": "report_result",
        "/finish": "finish",
    }
    assert answers[seen[suffix]] == lost
    assert RequestAnswer.objects.filter(task_id=task_id).count() == 5


@pytest.mark.parametrize("suffix", KINDS)
def test_the_async_client_sends_a_lost_answer_again(api_url, agent_token, priced, suffix):
    import asyncio

    async def scenario():
        transport = AsyncAnswerLost(suffix, "read error")

        async def nap(seconds):
            return None

        async with AsyncClient(api_url, agent_token, transport=transport, sleep=nap) as lw:
            task_id = (await lw.create_task("async lossy"))["id"]
            session = lw.session(task_id)
            async with session.model_call(model="m", est_prompt_tokens=100) as call:
                call.usage(120, 30)
            await session.tool(
                "pay", {"n": 1},
                lambda args: ToolReport(data={"paid": 1},
                                        evidence={"revision": 1, "done": False,
                                                  "committed": True}),
                effect="write", operation_key="pay-async",
            )  # fmt: skip
            await session.finish(evidence={"revision": 2, "done": True})
        return task_id, transport.lost

    task_id, lost = asyncio.run(scenario())

    assert len(lost) == 1
    counted = _counted(task_id)
    assert (counted["model_calls"], counted["tool_requests"], counted["tool_executions"],
            counted["tokens"], counted["state"]) == (1, 1, 1, 150, "COMPLETED")  # fmt: skip
    assert (counted["model_call_rows"], counted["tool_call_rows"]) == (1, 1)


def test_each_decision_has_an_id_of_its_own(api_url, agent_token, priced):
    transport = AnswerLost(None)

    _a_task_run(api_url, agent_token, transport, "ids")

    decisions = [s for s in transport.sent if not s["path"].endswith("/tasks")]
    ids = [httpx.Response(200, content=s["body"]).json()["request_id"] for s in decisions]
    assert len(ids) == 5 and len(set(ids)) == 5
