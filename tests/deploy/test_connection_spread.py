"""Kept-alive connections spread over gunicorn's workers (`loopwarden/gunicorn_worker.py`).

A gthread worker keeps each connection it accepted for as long as the client keeps it alive.
gunicorn's own worker accepts whenever its event loop wakes, so the connections of clients
arriving together piled up on whichever workers woke first: in the bench, 8 agents' kept-alive
connections were spread 5, 2, 1 and 0 over 4 workers (a worker idle for the whole run while
another answered five agents one request at a time), and the decisions' throughput against
the baseline's changed from run to run with the spread each drew.
"""

from __future__ import annotations

import socket
import time
from contextlib import contextmanager
from urllib.parse import urlsplit

import pytest
from django.db import connection

from devtools.cpu import connections_by_child
from tests.deploy.test_keepalive import request
from tests.live import database_url, gunicorn_server

# Slow (gunicorn processes): `./dev test` leaves it out, CI runs it.
pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

WORKERS = 4
CLIENTS = 8
SPACING_MS = 300  # long beside the gaps between clients, so the test does not race the clock


@contextmanager
def spreading_server():
    """gunicorn as deployed, 4 workers of one thread, the spacing long; its launcher's warm-up
    connections closed before it is handed over."""
    with gunicorn_server(
        database_url=database_url(connection.settings_dict),
        workers=WORKERS,
        threads=1,
        env={"DB_CONN_MAX_AGE": "0", "ACCEPT_SPACING_MS": str(SPACING_MS)},
    ) as server:
        time.sleep(2 * SPACING_MS / 1000)
        yield server


def open_clients(server, token: str, count: int, gap: float) -> list[socket.socket]:
    """`count` clients, one after another `gap` s apart, each with one answered request and
    its connection kept open."""
    parts = urlsplit(server.url)
    host = f"{parts.hostname}:{parts.port}"
    socks = []
    for _ in range(count):
        sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
        socks.append(sock)
        assert request(sock, host, token) == b"HTTP/1.1 200 OK"
        time.sleep(gap)
    return socks


def test_clients_arriving_together_are_spread_evenly_and_a_late_one_is_still_served(make_agent):
    _, token = make_agent("spread", namespace="ns-spread")
    with spreading_server() as server:
        port = urlsplit(server.url).port
        socks = open_clients(server, token, CLIENTS, gap=0.02)
        try:
            spread = connections_by_child(server.process.pid, port)
            # Every worker holds connections now: a newcomer waits one spacing at most.
            started = time.monotonic()
            socks += open_clients(server, token, 1, gap=0)
            waited = time.monotonic() - started
        finally:
            for sock in socks:
                sock.close()

    assert spread == [CLIENTS // WORKERS] * WORKERS
    assert waited < SPACING_MS / 1000 + 2.0


def test_a_client_with_a_connection_per_request_is_not_held_up(make_agent):
    # Every worker holds two kept-alive clients; a new connection goes at once to a worker
    # that holds no more than the others, whichever it is, so nothing waits for the spacing.
    # (Were the spacing a pause between any one worker's accepts, 40 requests on 4 workers
    # would take 10 spacings.)
    _, token = make_agent("one-shot", namespace="ns-one-shot")
    requests = 40
    with spreading_server() as server:
        held = open_clients(server, token, CLIENTS, gap=0.02)
        try:
            started = time.monotonic()
            for _ in range(requests):
                (one_shot,) = open_clients(server, token, 1, gap=0)
                one_shot.close()
            took = time.monotonic() - started
        finally:
            for sock in held:
                sock.close()

    assert took < requests * SPACING_MS / 1000 / 10, f"{requests} requests took {took:.2f} s"
