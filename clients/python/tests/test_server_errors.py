"""A server error without the JSON envelope reaches the caller as one line, never a page."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from loopwarden_client import Client, LoopwardenError

# What Django's debug view answers a client that does not accept HTML: a whole traceback.
DEBUG_PAGE = (
    "ZeroDivisionError at /api/v1/tasks\n"
    "division by zero\n\n"
    "Request Method: POST\n"
    "Request URL: http://127.0.0.1/api/v1/tasks\n"
    + "".join(f'  File "/srv/app/module{n}.py", line {n}, in handler\n' for n in range(80))
)


# ... and one that accepts HTML: a page whose first line says nothing.
HTML_PAGE = (
    '<!DOCTYPE html>\n<html lang="en">\n<head>\n  <title>ZeroDivisionError\n'
    "          at /api/v1/tasks</title>\n</head>\n<body>" + "<p>frame</p>\n" * 80 + "</body>"
)
PAGES = {"text/plain": DEBUG_PAGE, "text/html": HTML_PAGE}


class DebugPageServer(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        content_type = self.path.rsplit("/", 2)[-2].replace("-", "/")  # .../text-html/tasks
        body = PAGES[content_type].encode()
        self.send_response(500)
        self.send_header("Content-Type", f"{content_type}; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def failing_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), DebugPageServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/api/v1/"
    finally:
        server.shutdown()
        server.server_close()


def test_a_non_json_server_error_is_its_status_and_the_first_line_of_its_body(failing_server):
    client = Client(failing_server + "text-plain/", "tok")
    with client, pytest.raises(LoopwardenError) as caught:
        client.create_task("goal")
    error = caught.value
    assert (error.status, error.code) == (500, "HTTP_500")
    assert error.message == "ZeroDivisionError at /api/v1/tasks"
    assert str(error) == "500 HTTP_500: ZeroDivisionError at /api/v1/tasks"


def test_an_html_error_page_is_its_title(failing_server):
    client = Client(failing_server + "text-html/", "tok")
    with client, pytest.raises(LoopwardenError) as caught:
        client.create_task("goal")
    assert str(caught.value) == "500 HTTP_500: ZeroDivisionError"
