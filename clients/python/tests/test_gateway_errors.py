"""A backend that restarts: behind a reverse proxy it answers the proxy's own 502 or 504 page,
not the API's envelope, and without one it is not there at all. A decision carries a
`request_id`, so it is sent again as a lost answer is: the tool that ran is reported, whole,
not raised away with its write left IN_FLIGHT or committed without its result."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import httpx
import pytest
from loopwarden_client import Client, LoopwardenError
from scenarios import operation_state

BAD_GATEWAY = b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"


class Proxy:
    """A reverse proxy before the live server, on one port: `failing` holds the path endings it
    is to answer 502 the next time it sees them, `dropping` those whose answer it is to drop
    (the request reaches the server, the connection closes unanswered); `down()` and `up()`
    stop and restart it."""

    def __init__(self, api: str) -> None:
        upstream = urlsplit(api)
        self.failing: list[str] = []
        self.dropping: list[str] = []
        failing, dropping = self.failing, self.dropping

        class Handler(BaseHTTPRequestHandler):
            def forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if failed := [suffix for suffix in failing if self.path.endswith(suffix)]:
                    failing.remove(failed[0])
                    self.answer(502, "text/html", BAD_GATEWAY)
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                answer = httpx.request(
                    self.command, f"{upstream.scheme}://{upstream.netloc}{self.path}",
                    headers=headers, content=body, timeout=30,
                )  # fmt: skip
                if lost := [suffix for suffix in dropping if self.path.endswith(suffix)]:
                    dropping.remove(lost[0])
                    self.close_connection = True
                    return
                self.answer(answer.status_code, answer.headers["Content-Type"], answer.content)

            def answer(self, status: int, content_type: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = forward

            def log_message(self, *args: object) -> None:
                pass

        self.handler = Handler
        self.server: ThreadingHTTPServer | None = None
        self.port = 0
        self.up()
        self.url = f"http://127.0.0.1:{self.port}{upstream.path}"

    def up(self) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), self.handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def down(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


@pytest.fixture
def proxy(live) -> Iterator[Proxy]:
    proxy = Proxy(live.api)
    try:
        yield proxy
    finally:
        proxy.down()


def committed(data: object) -> dict:
    return {"revision": 0, "done": False, "committed": True}


@pytest.mark.parametrize("path", ["/tool-calls", "/result"], ids=["request", "result"])
def test_a_decision_answered_by_a_gateway_error_is_sent_again_and_the_write_commits(
    live, operator, proxy, unique, path
):
    ran: list[dict] = []
    with Client(proxy.url, live.agent_token, sleep=lambda seconds: None) as client:
        session = client.session(client.create_task(f"pay through a proxy {unique}")["id"])
        proxy.failing.append(path)
        message = session.tool("pay", {"invoice": unique}, ran.append, effect="write",
                               operation_key=f"pay-{unique}", inspect=committed)  # fmt: skip
    assert message["success"] is True and len(ran) == 1 and proxy.failing == []
    assert operation_state(operator, f"pay-{unique}") == "COMMITTED"


def test_a_gateway_error_is_raised_for_what_is_no_decision(live, proxy, unique):
    """A task's creation has no `request_id`: sent again, it could make a second task."""
    proxy.failing.append("/tasks")
    with (
        Client(proxy.url, live.agent_token, sleep=lambda seconds: None) as client,
        pytest.raises(LoopwardenError) as caught,
    ):
        client.create_task(f"create through a proxy {unique}")
    assert str(caught.value) == "502 HTTP_502: 502 Bad Gateway"


def test_a_writes_result_is_kept_when_the_server_is_down_longer_than_one_round_of_sends(
    live, operator, proxy, unique
):
    """A server restarting for longer than one round of sends (0.5 + 1 + 2 + 4 s): its body
    was never the matter, so the result is sent again whole and the ledger keeps it, rather
    than committed without its data and REUSE answering null."""
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 6:  # the server is back while the second round is under way
            proxy.up()

    def pay(args: dict) -> dict:
        proxy.down()  # the payment is made, then the server goes away before its report
        return {"payment": f"pay-{unique}"}

    key = f"pay-{unique}"
    with Client(proxy.url, live.agent_token, sleep=sleep) as client:
        session = client.session(client.create_task(f"pay during a restart {unique}")["id"])
        session.tool("pay", {"invoice": unique}, pay, effect="write", operation_key=key,
                     inspect=committed)  # fmt: skip
        again = session.tool("pay", {"invoice": unique}, pay, effect="write",
                             operation_key=key, inspect=committed)  # fmt: skip
    assert operation_state(operator, key) == "COMMITTED"
    assert again == {"success": True, "reused": True, "data": {"payment": key}}


def test_a_result_whose_answers_were_all_lost_is_answered_by_the_first_that_arrived(
    live, operator, proxy, unique
):
    """Every answer to a write's report lost (the report itself arrived and committed): the
    resend without data under the same `request_id` is another body, which the server
    refuses 409 REQUEST_ID_REUSED; raised, it failed a call whose write was committed."""
    key = f"pay-{unique}"
    with Client(proxy.url, live.agent_token, sleep=lambda seconds: None) as client:
        session = client.session(client.create_task(f"pay, answers lost {unique}")["id"])
        proxy.dropping.extend(["/result"] * client.max_throttle_tries)
        message = session.tool("pay", {"invoice": unique}, lambda args: {"paid": key},
                               effect="write", operation_key=key, inspect=committed)  # fmt: skip
    assert message == {"success": True, "data": {"paid": key}}
    assert operation_state(operator, key) == "COMMITTED"
    [op] = [o for o in operator.list_operations() if o["key"] == key]
    assert op["result"] == {"paid": key}
