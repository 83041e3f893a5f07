"""Behind a reverse proxy, a backend that restarts answers the proxy's own 502 or 504 page, not
the API's envelope. A decision carries a `request_id`, so it is sent again as a lost answer is:
the tool that ran is reported, not raised away with its write left IN_FLIGHT."""

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


@pytest.fixture
def restarting(live) -> Iterator[tuple[str, list[str]]]:
    """(a proxy's API URL, the paths it is to answer 502 the next time it sees them)."""
    upstream = urlsplit(live.api)
    failing: list[str] = []

    class Proxy(BaseHTTPRequestHandler):
        def forward(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if failed := [suffix for suffix in failing if self.path.endswith(suffix)]:
                failing.remove(failed[0])
                self.send_response(502)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(BAD_GATEWAY)))
                self.end_headers()
                self.wfile.write(BAD_GATEWAY)
                return
            headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
            answer = httpx.request(self.command, f"{upstream.scheme}://{upstream.netloc}{self.path}",
                                   headers=headers, content=body, timeout=30)  # fmt: skip
            self.send_response(answer.status_code)
            for name in ("Content-Type", "Retry-After"):
                if name in answer.headers:
                    self.send_header(name, answer.headers[name])
            self.send_header("Content-Length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

        do_GET = do_POST = forward

        def log_message(self, *args: object) -> None:
            pass

    proxy = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{proxy.server_address[1]}{upstream.path}", failing
    finally:
        proxy.shutdown()
        proxy.server_close()


def committed(data: object) -> dict:
    return {"revision": 0, "done": False, "committed": True}


@pytest.mark.parametrize("path", ["/tool-calls", "/result"], ids=["request", "result"])
def test_a_decision_answered_by_a_gateway_error_is_sent_again_and_the_write_commits(
    live, operator, restarting, unique, path
):
    url, failing = restarting
    ran: list[dict] = []
    with Client(url, live.agent_token, sleep=lambda seconds: None) as client:
        session = client.session(client.create_task(f"pay through a proxy {unique}")["id"])
        failing.append(path)
        message = session.tool("pay", {"invoice": unique}, ran.append, effect="write",
                               operation_key=f"pay-{unique}", inspect=committed)  # fmt: skip
    assert message["success"] is True and len(ran) == 1 and failing == []
    assert operation_state(operator, f"pay-{unique}") == "COMMITTED"


def test_a_gateway_error_is_raised_for_what_is_no_decision(live, restarting, unique):
    """A task's creation has no `request_id`: sent again, it could make a second task."""
    url, failing = restarting
    failing.append("/tasks")
    with (
        Client(url, live.agent_token, sleep=lambda seconds: None) as client,
        pytest.raises(LoopwardenError) as caught,
    ):
        client.create_task(f"create through a proxy {unique}")
    assert str(caught.value) == "502 HTTP_502: 502 Bad Gateway"
