"""gunicorn's threaded worker, spreading kept-alive connections over the workers.

    worker_class = "loopwarden.gunicorn_worker.SpreadingThreadWorker"   (gunicorn.conf.py)

A gthread worker keeps every connection it accepted for as long as the client keeps it alive,
and agents' clients do (httpx, so the thin client; nginx's upstream pool too). gunicorn's own
worker accepts whenever its event loop wakes, so the connections a burst of clients opens pile
up on whichever workers woke first, and stay there: 8 kept-alive clients were seen spread 7,
1, 0 and 0 over 4 workers (two workers idle for the whole run while one served seven clients
one request at a time), and 24 spread 11, 8, 3 and 2.

This worker takes a new connection at once only while no other worker holds fewer
connections than it does. The workers tell each other how many they hold through a small
table of shared memory made by the master before it forks them (a worker's slot: its pid and
its count). A worker that holds more leaves a waiting connection to one that holds fewer,
and takes it itself only once it has waited `ACCEPT_SPACING_MS` (10 ms): a connection never
waits longer than that for a worker with fewer connections to get to it, and the least loaded
worker takes one at once, so clients that open a connection per request are not slowed.

It also says `Connection: close` on an answer that leaves more of its request's body unread
than gunicorn will drain (`_closing_when_body_left`): a body over the size limit is refused
before it is read (413), and gunicorn, which drains at most 64 KiB of what an application left,
otherwise answered "keep-alive" and then closed the connection under the client's next request.

A request gunicorn refuses before the application runs (a request line over 4 KB, headers too
large, a NUL or control byte in the path or a header, a bad Content-Length, both framing
headers) is answered, when it was going to `/api/`, with the API's error envelope instead of
gunicorn's HTML page (`handle_error`): same status, same one log line.

Everything else is gunicorn's worker as it is.
"""

from __future__ import annotations

import json
import mmap
import os
import re
import select
import struct
import time

from gunicorn import util
from gunicorn.http import parser as _gunicorn_parser
from gunicorn.http.errors import ParseException
from gunicorn.http.message import Request
from gunicorn.http.parser import RequestParser
from gunicorn.workers.gthread import ThreadWorker

from agents.errors import error_body
from loopwarden.env import env_int
from loopwarden.processes import alive
from loopwarden.startup import one_line_on_config_error

# The longest a worker that holds more connections than another leaves a new one to it (s).
with one_line_on_config_error(3):
    ACCEPT_SPACING_SECONDS = env_int("ACCEPT_SPACING_MS", 10) / 1000

# The workers' table: made when the master imports this module (it loads the worker class
# before forking), so every worker maps the same memory. Slot `age % SLOTS` holds a worker's
# pid and its connection count; a slot whose pid is gone is not read.
SLOTS = 256
_SLOT = struct.Struct("qq")
_TABLE = mmap.mmap(-1, SLOTS * _SLOT.size)
_TABLE_READS_SECONDS = 0.001  # how often a worker leaving a connection to others reads it


# What gunicorn drains of a body an application left unread before it serves the next request
# on the connection (gunicorn 23+; 64 KiB).
_DRAINED_BYTES = getattr(_gunicorn_parser, "_DRAIN_MAX_BYTES", 64 * 1024)


def _left_unread(environ: dict) -> int:
    """The bytes of the request's body nobody read yet (0 when gunicorn does not say)."""
    reader = getattr(environ.get("wsgi.input"), "reader", None)
    if getattr(reader, "parser", None) is not None:
        # A chunked body not read to its end: only one over the size limit is left so
        # (loopwarden.middleware.BodyFramingMiddleware), and how much follows is unknown.
        return _DRAINED_BYTES + 1
    left = getattr(reader, "length", 0)  # a Content-Length body's reader counts down
    return left if isinstance(left, int) else 0


def _closing_when_body_left(app):
    """`app`, whose answer closes the connection when more of the request's body is left than
    gunicorn drains: the client then sends its next request on a new connection instead of
    one the server is about to close."""

    def closing(environ, start_response):
        def start(status, headers, exc_info=None):
            if _left_unread(environ) > _DRAINED_BYTES:
                answer = getattr(start_response, "__self__", None)  # gunicorn's Response
                if hasattr(answer, "force_close"):
                    answer.force_close()
            return start_response(status, headers, exc_info)

        return app(environ, start)

    return closing


# A request line whose target is under /api/, in origin form or absolute form.
_API_TARGET = re.compile(rb"[^ ]* +(?:[A-Za-z][A-Za-z0-9+.-]*://[^/ ]*)?/api/")

# The envelope's code for each status gunicorn refuses with (else its reason, in capitals).
_CODES = {400: "BAD_REQUEST", 414: "URI_TOO_LONG", 431: "HEADERS_TOO_LARGE", 500: "SERVER_ERROR"}


class _RecordingRequest(Request):
    """gunicorn's request, which tells a refusal while parsing whether it was going to the API."""

    def __init__(self, cfg, unreader, peer_addr, req_number=1):
        self._line: bytearray | None = None  # the buffer the request line is read into
        try:
            super().__init__(cfg, unreader, peer_addr, req_number)
        except ParseException as exc:
            exc.to_api = _API_TARGET.match(self._start()) is not None  # type: ignore[attr-defined]
            raise

    def read_into(self, unreader, buf, stop=False):
        if self._line is None:
            self._line = buf
        super().read_into(unreader, buf, stop)

    def _start(self) -> bytes:
        if self.uri is not None:  # the request line was split: its target
            return b"- " + self.uri.encode("latin-1", "replace")
        return bytes((self._line or b"")[:256])


def _to_api(req, exc) -> bool:
    to_api = getattr(exc, "to_api", None)
    if to_api is not None:
        return to_api
    path = getattr(req, "path", None)
    return isinstance(path, str) and path.startswith("/api/")


class _Page:
    """Stands for the client's socket while gunicorn writes its error page, to read its status."""

    def __init__(self) -> None:
        self.written = b""

    def gettimeout(self) -> float:
        return 0.0

    def sendall(self, data: bytes) -> None:
        self.written += data

    def status(self) -> tuple[int, str]:
        line = self.written.split(b"\r\n", 1)[0].decode("latin-1")  # HTTP/1.1 414 URI Too Long
        _, status, reason = line.split(" ", 2)
        return int(status), reason


def _envelope_page(status: int, reason: str, exc: BaseException) -> bytes:
    code = _CODES.get(status) or re.sub(r"\W+", "_", reason).upper()
    message = f"The request could not be read ({reason}): {exc}"[:300]
    body = json.dumps(error_body(code, message)).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("latin-1") + body


class SpreadingThreadWorker(ThreadWorker):
    def handle(self, conn):
        if not conn.initialized:
            init = conn.init

            def init_recording():
                init()
                if type(conn.parser) is RequestParser:
                    conn.parser.mesg_class = _RecordingRequest

            conn.init = init_recording
        return super().handle(conn)

    def handle_error(self, req, client, addr, exc):
        """gunicorn's refusal (its status, its log line), in the error envelope on /api/."""
        if not _to_api(req, exc):
            return super().handle_error(req, client, addr, exc)
        page = _Page()
        super().handle_error(req, page, addr, exc)
        status, reason = page.status()
        try:
            util.write_nonblock(client, _envelope_page(status, reason, exc))
        except Exception:
            self.log.debug("Failed to send error message.")

    def load_wsgi(self) -> None:
        super().load_wsgi()
        self.wsgi = _closing_when_body_left(self.wsgi)

    def init_process(self) -> None:
        self.slot = self.age % SLOTS
        self.pending_since: float | None = None  # since when a connection waits for another
        self.holding = False  # not accepting: a connection is left to a worker with fewer
        self._tell(0)
        super().init_process()

    def _tell(self, count: int) -> None:
        _SLOT.pack_into(_TABLE, self.slot * _SLOT.size, os.getpid(), count)

    def _waited_enough(self, now: float) -> bool:
        return self.pending_since is not None and (
            now - self.pending_since >= ACCEPT_SPACING_SECONDS
        )

    def fewer_elsewhere(self) -> bool:
        """Whether a live worker other than this one holds fewer connections."""
        mine = self.nr_conns
        if not mine:
            return False
        me = os.getpid()
        for pid, count in _SLOT.iter_unpack(_TABLE):
            if count < mine and pid > 0 and pid != me and alive(pid):
                return True
        return False

    def accept(self, listener) -> None:
        now = time.monotonic()
        if self.fewer_elsewhere():
            if self.pending_since is None:
                self.pending_since = now
            if not self._waited_enough(now):
                # Leave it to a worker with fewer; look again when it has waited long enough.
                self.holding = True
                super().set_accept_enabled(False)
                return
        self.pending_since = None
        held = self.nr_conns
        super().accept(listener)
        if self.nr_conns > held:
            self._tell(self.nr_conns)

    def set_accept_enabled(self, enabled: bool) -> None:
        # gunicorn's event loop asks for accepting on every turn it may (below its
        # connection cap): a hold ends when this worker holds no more than the rest, or when
        # the connection has waited long enough.
        if enabled and self.holding:
            early = not self._waited_enough(time.monotonic())
            if early and self.fewer_elsewhere():
                return
            if early or not any(map(_waiting, self.sockets)):
                self.pending_since = None  # no more loaded than the rest, or it was taken
            self.holding = False
        super().set_accept_enabled(enabled)

    def wait_for_and_dispatch_events(self, timeout: float) -> None:
        self._tell(self.nr_conns)  # connections closed since the last turn count too
        if self.alive and self.holding and self.pending_since is not None:
            # Read the table again soon (a worker that held fewer may have caught up), and
            # wake when the wait is over.
            left = self.pending_since + ACCEPT_SPACING_SECONDS - time.monotonic()
            timeout = min(timeout, max(min(left, _TABLE_READS_SECONDS), 0.0))
        super().wait_for_and_dispatch_events(timeout)


def _waiting(listener) -> bool:
    """Whether a connection waits on the listening socket to be accepted."""
    readable, _, _ = select.select([listener], [], [], 0)
    return bool(readable)
