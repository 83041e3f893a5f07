"""Behind a reverse proxy that rewrites `Host` (nginx's `proxy_set_header Host ...`), the
server's `next` links name a host the client never chose: the pages still come from the base
URL, and the agent's token goes nowhere else."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import httpx
import pytest
from loopwarden_client import Client


def serve(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


@pytest.fixture
def proxied(live) -> Iterator[tuple[str, list[str]]]:
    """(the proxy's API URL, the Authorization headers a bystander on the rewritten host got)."""
    upstream = urlsplit(live.api)
    stolen: list[str] = []

    class Bystander(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            stolen.append(self.headers.get("Authorization", ""))
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    bystander, bystander_port = serve(Bystander)

    class Proxy(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            answer = httpx.get(
                f"{upstream.scheme}://{upstream.netloc}{self.path}",
                headers={"Authorization": self.headers["Authorization"],
                         "Host": f"localhost:{bystander_port}"},
            )  # fmt: skip
            self.send_response(answer.status_code)
            self.send_header("Content-Type", answer.headers["Content-Type"])
            self.send_header("Content-Length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

        def log_message(self, *args: object) -> None:
            pass

    proxy, proxy_port = serve(Proxy)
    try:
        yield f"http://127.0.0.1:{proxy_port}{upstream.path}", stolen
    finally:
        for server in (proxy, bystander):
            server.shutdown()
            server.server_close()


def test_every_page_comes_through_the_base_url_and_the_token_goes_nowhere_else(
    live, lw, proxied, unique
):
    url, stolen = proxied
    made = {lw.create_task(f"paged {unique} {n}")["id"] for n in range(3)}
    with Client(url, live.agent_token, max_throttle_tries=1) as client:
        listed = {task["id"] for task in client.list_tasks(page_size=1)}
    assert made <= listed
    assert stolen == []
