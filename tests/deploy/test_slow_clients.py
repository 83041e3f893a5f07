"""Clients that declare a body and then stall cannot starve the web workers.

The app runs the way the README deploys it: gunicorn with `gunicorn.conf.py` (threaded workers,
and a read/write timeout on every client socket). A stalled client holds one thread for at most
`CLIENT_TIMEOUT_SECONDS` and then gets a 408; the other threads keep answering meanwhile.
"""

from __future__ import annotations

import json
import runpy
import socket
import time
from urllib.parse import urlsplit

import httpx
import pytest
from django.db import connection

from tests.live import ROOT, database_url, gunicorn_server

# Slow (gunicorn processes): `./dev test` leaves it out, CI runs it.
pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CONFIG = ROOT / "gunicorn.conf.py"


def stall(server_url: str, token: str, count: int) -> list[socket.socket]:
    """Open `count` connections that send headers and part of a declared 1000-byte body."""
    parts = urlsplit(server_url)
    head = (
        "POST /api/v1/tasks HTTP/1.1\r\n"
        f"Host: {parts.hostname}:{parts.port}\r\n"
        f"Authorization: Bearer {token}\r\n"
        "Content-Type: application/json\r\n"
        "Content-Length: 1000\r\n\r\n"
        '{"goal": "'
    ).encode()
    stalled = []
    for _ in range(count):
        sock = socket.create_connection((parts.hostname, parts.port), timeout=30)
        sock.sendall(head)
        stalled.append(sock)
    time.sleep(1.0)  # let the server hand them to its threads, which start reading the body
    return stalled


def timed_get(url: str, token: str) -> tuple[int, float]:
    started = time.monotonic()
    response = httpx.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=20)
    return response.status_code, time.monotonic() - started


def answer_of(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_two_stalled_bodies_leave_the_documented_server_answering(make_agent):
    documented = runpy.run_path(str(CONFIG))
    _, token = make_agent("slow-a", namespace="ns-slow")
    with gunicorn_server(
        database_url=database_url(connection.settings_dict),
        workers=2,
        threads=documented["threads"],
        env={"DB_CONN_MAX_AGE": "0"},
    ) as server:
        stalled = stall(server.url, token, 2)
        try:
            status, seconds = timed_get(server.api + "tasks", token)
        finally:
            for sock in stalled:
                sock.close()

    assert status == 200
    assert seconds < 5, f"a third request waited {seconds:.1f}s behind two stalled clients"


def test_stalled_clients_are_cut_off_even_when_they_hold_every_thread(make_agent):
    """Two workers of one thread each (the two sync workers of the report): the stalled
    clients are answered 408 after the client timeout, and the third request gets through."""
    _, token = make_agent("slow-b", namespace="ns-slow")
    with gunicorn_server(
        database_url=database_url(connection.settings_dict),
        workers=2,
        threads=1,
        env={"DB_CONN_MAX_AGE": "0", "CLIENT_TIMEOUT_SECONDS": "2"},
    ) as server:
        stalled = stall(server.url, token, 2)
        try:
            status, seconds = timed_get(server.api + "tasks", token)
            answers = [answer_of(sock) for sock in stalled]
        finally:
            for sock in stalled:
                sock.close()

    assert status == 200
    assert seconds < 10, f"a third request waited {seconds:.1f}s behind two stalled clients"
    for answer in answers:
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408"), answer[:300]
        assert json.loads(body)["error"]["code"] == "BODY_TIMEOUT"
