"""gunicorn settings for Loopwarden. gunicorn reads this file from its working directory, so
`gunicorn loopwarden.wsgi -b 0.0.0.0:8000` in the repository root uses it (or pass `-c`).

Slow and stalled clients. A client that declares a body and then stops sending holds whatever
is reading that body. With gunicorn's default sync workers that is a whole worker process until
the worker timeout kills it (two such clients stopped two workers for 30 s); with threaded
workers alone it is a thread for as long as the client keeps the connection open. So:

- threaded workers (`gthread`): a stalled client holds one thread, not a process, and the
  idle wait for a request happens in the worker's event loop, in no thread at all;
- a read and write timeout on every client socket (`CLIENT_TIMEOUT_SECONDS`): a client that
  sends nothing for that long while its headers or body are being read (or reads nothing of
  its answer) is cut off, and a body that stalled answers 408 `BODY_TIMEOUT`. Set in the
  kernel on the listening socket (SO_RCVTIMEO/SO_SNDTIMEO), which every accepted connection
  inherits, so it holds in whichever thread the connection is served.

That bounds how long a client can hold a thread, not how many threads many clients can hold
at once: a client that trickles one byte just inside the timeout keeps its thread. Exposed
to the internet, run a buffering reverse proxy in front (nginx, or a load balancer that
buffers requests): it holds slow connections cheaply and hands gunicorn only complete
requests. See "Deploying beyond one machine" in the README.

Every value comes from the environment, parsed strictly like the Django settings.
"""

from __future__ import annotations

import os
import socket
import struct

from loopwarden.env import env_int, read_env_file

# The multiprocess metrics folder: the files of ended processes dropped when the master starts,
# a dead worker's gauges when it exits (see loopwarden/gunicorn_metrics.py).
from loopwarden.gunicorn_metrics import child_exit, on_starting  # noqa: F401
from loopwarden.startup import one_line_on_config_error

with one_line_on_config_error(3):
    read_env_file()  # the settings read it too; here for the values read before them

# Processes and threads per process. Each thread may hold a database connection while it
# serves a request: workers x threads x web machines must stay under PostgreSQL's
# max_connections.
with one_line_on_config_error(3):  # a bad value: one line, not a traceback
    workers = env_int("WEB_CONCURRENCY", max(2, os.cpu_count() or 1), minimum=1)
# gunicorn's threaded worker (gthread), a new connection going to the worker that holds the
# fewest (loopwarden/gunicorn_worker.py; ACCEPT_SPACING_MS): kept-alive connections stay with
# the worker that accepted them.
worker_class = "loopwarden.gunicorn_worker.SpreadingThreadWorker"
with one_line_on_config_error(3):
    threads = env_int("WEB_THREADS", 8, minimum=1)

# Seconds a client may stay silent while a request is read or an answer written.
with one_line_on_config_error(3):
    CLIENT_TIMEOUT_SECONDS = env_int("CLIENT_TIMEOUT_SECONDS", 10, minimum=1)
# A gthread worker's main loop answers the heartbeat even while its threads are busy: this
# only restarts a worker that hangs as a whole.
timeout = 30
graceful_timeout = 30
# Seconds an idle kept-alive connection waits for its next request (in the event loop, in no
# thread). Longer than any client or proxy in front keeps one idle (httpx, so the thin client:
# 5 s; nginx's upstream pool: 60 s; a cloud load balancer: typically 60 s): the end that closes
# an idle connection must be the one that would send on it, or a request sent just as the
# server closes gets no answer (a 502 from nginx, which does not send a POST again).
with one_line_on_config_error(3):
    keepalive = env_int("KEEPALIVE_SECONDS", 75, minimum=1)


def _timeval(seconds: int) -> bytes:
    return struct.pack("ll", seconds, 0)


def post_fork(server, worker) -> None:
    """Give the listening sockets the client timeout; accepted connections inherit it.

    The listeners are shared by every worker; setting the option again is harmless.
    """
    for listener in worker.sockets:
        for option in (socket.SO_RCVTIMEO, socket.SO_SNDTIMEO):
            listener.sock.setsockopt(socket.SOL_SOCKET, option, _timeval(CLIENT_TIMEOUT_SECONDS))
