"""A request of the bench's references that fails is an error in the report, not a thread that
dies unseen.

A 32-agent run against threaded workers once had a kept-alive baseline connection closed by
the server (its keep-alive timeout) just as the next request went out: the exception ended that
client's thread, its samples were lost, and the report said "errors: 0". Here a real server on
a local socket reads each request and hangs up without answering.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import pytest

from devtools.management.commands import bench


@pytest.fixture
def hanging_up() -> Iterator[str]:
    """The API root of a server that reads each request and closes without an answer."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(1)
                with contextlib.suppress(OSError):
                    conn.recv(65536)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/api/v1/"
    done.set()
    thread.join()
    listener.close()


# Each phase lasts long enough for its threads to start and send a request on a busy machine
# (0.3 s once saw no request at all): a worker starts no request after the phase's end.
PHASE_SECONDS = 2.0


def test_baseline_requests_the_server_drops_are_counted_as_errors(hanging_up):
    run = bench.drive_baseline(hanging_up, ["token-a", "token-b"], PHASE_SECONDS)

    assert len(run.samples["baseline"]) >= 2
    assert run.errors == len(run.samples["baseline"])


def test_floor_requests_the_server_drops_are_counted_as_errors(hanging_up):
    tasks = {"token-a": "00000000-0000-0000-0000-000000000001"}
    run = bench.drive_floor(hanging_up, ["token-a"], PHASE_SECONDS, tasks)

    assert len(run.samples["floor"]) >= 1
    assert run.errors == len(run.samples["floor"])


def test_any_other_failure_of_a_client_thread_fails_the_phase():
    def broken(token: str, stop_at: float, run: bench.Run) -> None:
        raise RuntimeError(f"{token} broke")

    with pytest.raises(RuntimeError, match="token-a broke"):
        bench.for_seconds(broken, ["token-a"], 0.1)
