"""Requests refused before Django sees them answer the error envelope on `/api/` paths.

gunicorn refuses what it cannot parse (a path over its 4 KB line limit, headers too large, a
NUL in the path or a header, a negative Content-Length, both framing headers) before the
application runs, with an HTML page of its own; Django refuses a `Host` outside ALLOWED_HOSTS
with an HTML page and a logged traceback. An agent's client reads JSON: on `/api/` each of
these is the envelope, with one log line and no traceback. Sent on raw sockets, since no HTTP
client sends such requests.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

import pytest
from django.db import connection

from tests.live import database_url, gunicorn_server
from tests.raw_http import exchange

# Slow (gunicorn processes): `./dev test` leaves it out, CI runs it.
pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

TARGET = "/api/v1/tasks"


def _malformed(host: str) -> dict[str, tuple[bytes, int]]:
    """What gunicorn refuses before the application runs, and the status it refuses with."""
    h = f"Host: {host}\r\n".encode()
    body = b'{"goal": "x"}'
    return {
        "path over 4 KB": (
            b"GET /api/v1/tasks/" + b"a" * 5000 + b" HTTP/1.1\r\n" + h + b"\r\n", 414
        ),
        "headers too large": (
            b"GET /api/v1/tasks HTTP/1.1\r\n" + h + b"X-Big: " + b"b" * 9000 + b"\r\n\r\n", 431
        ),
        "too many headers": (
            b"GET /api/v1/tasks HTTP/1.1\r\n" + h
            + b"".join(b"X-H%d: v\r\n" % n for n in range(150)) + b"\r\n", 431,
        ),
        "NUL in the raw path": (b"GET /api/v1/ta\x00sks HTTP/1.1\r\n" + h + b"\r\n", 400),
        "control byte in the raw path": (b"GET /api/v1/ta\x01sks HTTP/1.1\r\n" + h + b"\r\n", 400),
        "NUL in a header": (b"GET /api/v1/tasks HTTP/1.1\r\n" + h + b"X-A: a\x00b\r\n\r\n", 400),
        "bad header name": (b"GET /api/v1/tasks HTTP/1.1\r\n" + h + b"X A: a\r\n\r\n", 400),
        "negative Content-Length": (
            b"POST /api/v1/tasks HTTP/1.1\r\n" + h + b"Content-Length: -5\r\n\r\n" + body, 400
        ),
        "Content-Length with Transfer-Encoding": (
            b"POST /api/v1/tasks HTTP/1.1\r\n" + h
            + b"Content-Length: 13\r\nTransfer-Encoding: chunked\r\n\r\n" + body, 400,
        ),
        "absolute-form target": (
            b"GET http://" + host.encode() + b"/api/v1/ta\x00sks HTTP/1.1\r\n" + h + b"\r\n", 400
        ),
    }  # fmt: skip


@pytest.fixture(scope="module")
def gunicorn(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        url = database_url(connection.settings_dict)
    with gunicorn_server(
        database_url=url, workers=1, threads=2, env={"DB_CONN_MAX_AGE": "0"}
    ) as server:
        yield server


def _new_log(server, before: str) -> str:
    text = server.log_path.read_text(errors="replace")
    return text[len(before) :]


@pytest.mark.parametrize("case", list(_malformed("h")))
def test_gunicorn_refuses_a_malformed_api_request_in_the_envelope(gunicorn, case):
    raw, status = _malformed(urlsplit(gunicorn.url).netloc)[case]
    before = gunicorn.log_path.read_text(errors="replace")

    answer = exchange(gunicorn.url, raw)

    assert answer.status == status, answer.describe()
    assert answer.envelope is not None, answer.describe()
    assert answer.closed
    logged = _new_log(gunicorn, before).splitlines()
    assert len(logged) == 1, logged
    assert "Traceback" not in logged[0]


def test_a_malformed_console_request_keeps_gunicorns_own_page(gunicorn):
    host = urlsplit(gunicorn.url).netloc
    answer = exchange(gunicorn.url, f"GET /ta\x00sks HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())

    assert answer.status == 400
    assert answer.envelope is None


def _unknown_host(url: str, target: str = TARGET):
    return exchange(url, f"GET {target} HTTP/1.1\r\nHost: evil.example\r\n\r\n".encode())


def test_an_unknown_host_answers_the_envelope_on_gunicorn(gunicorn):
    before = gunicorn.log_path.read_text(errors="replace")

    answer = _unknown_host(gunicorn.url)

    assert answer.status == 400, answer.describe()
    assert answer.envelope["error"]["code"] == "DISALLOWED_HOST"
    logged = _new_log(gunicorn, before).splitlines()
    assert len(logged) == 1, logged
    assert "evil.example" in logged[0]


def test_an_unknown_host_answers_the_envelope_on_the_embedded_server(live_server, caplog):
    with caplog.at_level(logging.INFO):
        answer = _unknown_host(live_server.url)

    assert answer.status == 400, answer.describe()
    assert answer.envelope["error"]["code"] == "DISALLOWED_HOST"
    logged = [r for r in caplog.records if r.name.startswith("django")]
    assert [r.getMessage() for r in logged] == [answer.envelope["error"]["message"]]
    assert logged[0].exc_info is None


def test_an_unknown_host_on_a_console_page_is_plain_text(live_server):
    answer = _unknown_host(live_server.url, "/")

    assert answer.status == 400
    assert answer.headers["content-type"].startswith("text/plain")


@pytest.mark.parametrize("length", ["-5", "1e3", "0x10", "+2"])
def test_the_embedded_server_refuses_a_content_length_that_is_no_count(live_server, length):
    """Django's server passes on what gunicorn refuses: `-5` would be read as an empty body,
    and the body's bytes as the next request. Refused with the envelope; the connection closes."""
    host = urlsplit(live_server.url).netloc
    raw = (
        f"POST {TARGET} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f'Content-Length: {length}\r\n\r\n{{"goal": "x"}}'
    ).encode()

    answer = exchange(live_server.url, raw)

    assert answer.status == 400, answer.describe()
    assert answer.envelope["error"]["code"] == "BAD_REQUEST"
    assert answer.closed and answer.extra == b"", answer.extra
