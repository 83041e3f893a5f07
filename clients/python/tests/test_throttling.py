"""A 429 THROTTLED is honoured like a WAIT: slept out (Retry-After) and sent again."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading

import httpx
import pytest
from loopwarden_client import AsyncClient, Client, LoopwardenError


def throttled(retry_after: str | None = "2") -> httpx.Response:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    body = {"error": {"code": "THROTTLED", "message": "Slow down."}}
    return httpx.Response(429, json=body, headers=headers)


def scripted(*responses: httpx.Response) -> tuple[list[httpx.Request], object]:
    seen: list[httpx.Request] = []
    answers = iter(responses)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return next(answers)

    return seen, handler


def test_a_throttled_request_is_sent_again_after_its_retry_after():
    ok = httpx.Response(201, json={"id": "t"})
    seen, handler = scripted(throttled("2"), throttled("0.5"), ok)
    slept: list[float] = []
    with Client("http://lw/api/v1/", "tok", transport=httpx.MockTransport(handler),
                sleep=slept.append) as client:  # fmt: skip
        assert client.create_task("goal") == {"id": "t"}
    assert slept == [2.0, 0.5]
    assert len(seen) == 3 and all(r.url.path == "/api/v1/tasks" for r in seen)


def test_a_throttle_without_retry_after_waits_the_default_second():
    _, handler = scripted(throttled(None), httpx.Response(200, json={"id": "t"}))
    slept: list[float] = []
    with Client("http://lw/api/v1/", "tok", transport=httpx.MockTransport(handler),
                sleep=slept.append) as client:  # fmt: skip
        client.get_task("t")
    assert slept == [1.0]


def test_throttling_past_the_tries_is_raised():
    _, handler = scripted(*[throttled("1")] * 3)
    with (
        Client("http://lw/api/v1/", "tok", transport=httpx.MockTransport(handler),
               sleep=lambda s: None, max_throttle_tries=3) as client,
        pytest.raises(LoopwardenError) as caught,
    ):  # fmt: skip
        client.get_task("t")
    assert (caught.value.status, caught.value.code) == (429, "THROTTLED")


def test_a_trigger_loop_429_is_an_answer_and_never_retried():
    body = {"error": {"code": "TRIGGER_LOOP", "message": "Too many tasks for this trigger."}}
    seen, handler = scripted(httpx.Response(429, json=body, headers={"Retry-After": "1"}))
    with (
        Client("http://lw/api/v1/", "tok", transport=httpx.MockTransport(handler),
               sleep=lambda s: pytest.fail("slept")) as client,
        pytest.raises(LoopwardenError) as caught,
    ):  # fmt: skip
        client.create_task("goal", trigger_key="cron")
    assert caught.value.code == "TRIGGER_LOOP" and len(seen) == 1


def test_the_async_client_honours_throttling_too():
    seen, handler = scripted(throttled("3"), httpx.Response(200, json={"id": "t"}))
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async def main() -> dict:
        async with AsyncClient("http://lw/api/v1/", "tok", sleep=sleep,
                               transport=httpx.MockTransport(handler)) as client:  # fmt: skip
            return await client.get_task("t")

    assert asyncio.run(main()) == {"id": "t"}
    assert slept == [3.0] and len(seen) == 2


def database_unavailable() -> httpx.Response:
    # What the server answers when its database did not answer (agents/api/errors.py).
    message = "The database did not answer; send the request again in 2 s."
    body = {"error": {"code": "DATABASE_UNAVAILABLE", "message": message}}
    return httpx.Response(503, json=body, headers={"Retry-After": "2"})


class FirstResultUnavailable(httpx.BaseTransport):
    """The live server, except that the first result report meets a database that is away:
    answered 503 before anything was decided (the server rolls the transaction back)."""

    def __init__(self) -> None:
        self.real = httpx.HTTPTransport()
        self.refused: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/result") and not self.refused:
            self.refused.append(request.url.path)
            return database_unavailable()
        return self.real.handle_request(request)

    def close(self) -> None:
        self.real.close()


def test_a_database_unavailable_503_is_sent_again_after_its_retry_after(live, unique):
    """docs/DESIGN.md: 503 DATABASE_UNAVAILABLE rolled the request back; send it again after
    Retry-After. A write's result refused that way must still reach the ledger, not leave the
    operation IN_FLIGHT until its lease makes it UNKNOWN and the task NEEDS_HUMAN."""
    transport = FirstResultUnavailable()
    slept: list[float] = []
    with Client(live.api, live.agent_token, transport=transport, sleep=slept.append) as lw:
        s = lw.session(lw.create_task("pays while the database blinks")["id"])
        s.tool("pay", {"invoice": unique}, lambda args: "paid", effect="write",
               operation_key=f"pay-{unique}",
               inspect=lambda data: {"revision": 0, "done": False, "committed": True})  # fmt: skip
        task = lw.get_task(s.task_id)
    assert transport.refused and slept == [2.0]
    assert task["state"] == "RUNNING" and task["usage"]["tool_executions"] == 1
    with Client(live.api, live.operator_token) as operator:
        [operation] = [op for op in operator.list_operations() if op["key"] == f"pay-{unique}"]
    assert operation["state"] == "COMMITTED"


def test_a_contended_operation_key_is_asked_again():
    """docs/API.md: 409 OPERATION_CONTENDED (racing claims of one key did not settle; each try
    was rolled back, nothing counted) means "ask again", not a refusal to surface."""
    body = {
        "error": {
            "code": "OPERATION_CONTENDED",
            "message": "The operation key is contended; retry.",
        }
    }
    execute = {"decision": "EXECUTE", "tool_call": 7, "lease_expires_at": None}
    seen, handler = scripted(httpx.Response(409, json=body), httpx.Response(200, json=execute))
    slept: list[float] = []
    with Client("http://lw/api/v1/", "tok", transport=httpx.MockTransport(handler),
                sleep=slept.append) as client:  # fmt: skip
        answer = client.request_tool("t", "pay", {"invoice": 1}, effect="write",
                                     operation_key="pay-1")  # fmt: skip
    assert answer["decision"] == "EXECUTE"
    assert len(seen) == 2 and slept == [1.0]


class LateProxy:
    """A port where nothing listens (connections are refused) until `open()`; then each
    connection is forwarded to the live server. A server restarting looks like this."""

    def __init__(self, target: str) -> None:
        url = httpx.URL(target)
        self.target = (url.host, url.port)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}{url.path}"
        self.listener: socket.socket | None = None

    def open(self, _seconds: float = 0) -> None:
        if self.listener is None:
            self.listener = socket.create_server(("127.0.0.1", self.port))
            threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        assert self.listener is not None
        while True:
            try:
                near, _ = self.listener.accept()
            except OSError:
                return
            far = socket.create_connection(self.target)
            for a, b in ((near, far), (far, near)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        if self.listener is not None:
            self.listener.close()


def test_a_refused_connection_is_tried_again_and_the_request_lands_once(live, unique):
    """A refused connection never reached the server: sending the request again is safe."""
    proxy, slept = LateProxy(live.api), []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        proxy.open()  # the server is back

    try:
        with Client(proxy.url, live.agent_token, sleep=sleep) as client:
            task = client.create_task(f"created across a restart {unique}")
            mine = [t for t in client.list_tasks() if t["goal"].endswith(unique)]
    finally:
        proxy.close()
    assert slept == [0.5] and [t["id"] for t in mine] == [task["id"]]


def test_a_server_that_stays_away_is_raised_after_the_tries():
    proxy, slept = LateProxy("http://127.0.0.1:9/api/v1/"), []
    with Client(proxy.url, "tok", sleep=slept.append) as client, pytest.raises(httpx.ConnectError):
        client.create_task("goal")
    assert slept == [0.5, 1.0, 2.0, 4.0]  # five tries (max_throttle_tries)


def test_the_async_client_tries_a_refused_connection_again(live, unique):
    proxy, slept = LateProxy(live.api), []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        proxy.open()

    async def create() -> dict:
        async with AsyncClient(proxy.url, live.agent_token, sleep=sleep) as client:
            return await client.create_task(f"async across a restart {unique}")

    try:
        task = asyncio.run(create())
    finally:
        proxy.close()
    assert slept == [0.5] and task["goal"].endswith(unique)


class AnswerLost(httpx.BaseTransport):
    """The live server, except that the answer to the first request whose path ends with
    `suffix` is lost on the way back: the server got it and acted, the client sees a read
    error (a load balancer's idle timeout, a dropped connection)."""

    def __init__(self, suffix: str) -> None:
        self.real, self.suffix, self.lost = httpx.HTTPTransport(), suffix, []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.real.handle_request(request)
        if request.url.path.endswith(self.suffix) and not self.lost:
            response.read()
            self.lost.append(response.json())
            raise httpx.ReadError("the connection dropped before the answer came")
        return response

    def close(self) -> None:
        self.real.close()


def test_a_result_whose_answer_was_lost_is_sent_again_and_the_write_is_committed_once(live, unique):
    """The result report is safe to send again: under its request_id the server answers the
    repeat with the first answer and changes nothing. Before, the read error left the tool
    call (and a write) open."""
    transport, slept, runs = AnswerLost("/result"), [], []
    with Client(live.api, live.agent_token, transport=transport, sleep=slept.append) as lw:
        s = lw.session(lw.create_task(f"pays across a dropped answer {unique}")["id"])
        message = s.tool("pay", {"invoice": unique}, lambda args: runs.append(1) or "paid",
                         effect="write", operation_key=f"pay-{unique}",
                         inspect=lambda data: {"revision": 0, "done": False,
                                               "committed": True})  # fmt: skip
        task = lw.get_task(s.task_id)
    assert [a["decision"] for a in transport.lost] == ["CONTINUE"]
    assert slept == [0.5] and runs == [1]
    assert message and task["state"] == "RUNNING"
    assert task["usage"]["tool_executions"] == 1
    with Client(live.api, live.operator_token) as operator:
        [operation] = [op for op in operator.list_operations() if op["key"] == f"pay-{unique}"]
    assert operation["state"] == "COMMITTED"


def test_a_result_that_stopped_the_task_is_still_a_stop_when_its_answer_was_lost(live, unique):
    transport, slept = AnswerLost("/result"), []
    with Client(live.api, live.agent_token, transport=transport, sleep=slept.append) as lw:
        s = lw.session(lw.create_task(f"done across a dropped answer {unique}")["id"])
        s.tool("search", {"q": unique}, lambda args: {"rows": [1]},
               inspect=lambda data: {"revision": 1, "done": True})  # fmt: skip
        task = lw.get_task(s.task_id)
    assert transport.lost[0]["decision"] == "STOP" and slept == [0.5]
    assert task["state"] == "COMPLETED" and s.report == task["report"]


def test_a_usage_report_whose_answer_was_lost_is_counted_once(live, unique):
    transport, slept = AnswerLost("/usage"), []
    with Client(live.api, live.agent_token, transport=transport, sleep=slept.append) as lw:
        task_id = lw.create_task(f"usage across a dropped answer {unique}")["id"]
        gate = lw.gate_model_call(task_id, model="gpt-x", est_prompt_tokens=100)
        answer = lw.report_usage(task_id, gate["model_call"], prompt_tokens=120,
                                 completion_tokens=30)  # fmt: skip
        task = lw.get_task(task_id)
    assert transport.lost == [{"decision": "CONTINUE"}] and answer == {"decision": "CONTINUE"}
    assert slept == [0.5] and task["usage"]["tokens"] == 150


def test_a_tool_request_whose_answer_was_lost_is_sent_again_and_counted_once(live, unique):
    """Sent again under its request_id, the tool request is answered its first answer (the
    same call) and counts once."""
    transport, slept = AnswerLost("/tool-calls"), []
    with Client(live.api, live.agent_token, transport=transport, sleep=slept.append) as lw:
        task_id = lw.create_task(f"asks across a dropped answer {unique}")["id"]
        answer = lw.request_tool(task_id, "search", {"q": unique})
        task = lw.get_task(task_id)
    assert transport.lost == [answer] and answer["decision"] == "EXECUTE"
    assert slept == [0.5] and task["usage"]["tool_requests"] == 1
