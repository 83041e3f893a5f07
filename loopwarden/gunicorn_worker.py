"""gunicorn's threaded worker, spreading kept-alive connections over the workers.

    worker_class = "loopwarden.gunicorn_worker.SpreadingThreadWorker"   (gunicorn.conf.py)

A gthread worker keeps every connection it accepted for as long as the client keeps it alive,
and agents' clients do (httpx, so the thin client; nginx's upstream pool too). gunicorn's own
worker accepts whenever its event loop wakes, so the connections a burst of clients opens pile
up on whichever workers woke first, and stay there: 8 kept-alive clients were seen spread 7,
1, 0 and 0 over 4 workers (two workers idle for the whole run while one served seven clients
one request at a time), and 24 spread 11, 8, 3 and 2.

This worker takes a new connection at once only while it holds none. Holding some, it takes
the next one no sooner than `ACCEPT_SPACING_MS` (10 ms) after its last, which leaves a burst's
connections to the workers that have fewer: when every worker holds connections, a new one
waits that long at most. Everything else is gunicorn's worker as it is.
"""

from __future__ import annotations

import time

from gunicorn.workers.gthread import ThreadWorker

from loopwarden.env import env_int

# The least time between two connections one worker accepts while it holds any (seconds).
ACCEPT_SPACING_SECONDS = env_int("ACCEPT_SPACING_MS", 10) / 1000


class SpreadingThreadWorker(ThreadWorker):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.last_accept = float("-inf")  # when this worker last took a connection

    def accept(self, listener) -> None:
        held = self.nr_conns
        super().accept(listener)
        if self.nr_conns > held:  # one was taken (not EAGAIN: another worker got it first)
            self.last_accept = time.monotonic()
            super().set_accept_enabled(False)  # until `set_accept_enabled` lets it again

    def _spacing_left(self) -> float:
        if not self.nr_conns:
            return 0.0
        return self.last_accept + ACCEPT_SPACING_SECONDS - time.monotonic()

    def set_accept_enabled(self, enabled: bool) -> None:
        # gunicorn's event loop asks for accepting on every turn it may (below its
        # connection cap): it is let only once the spacing is over.
        if enabled and self._spacing_left() > 0:
            return
        super().set_accept_enabled(enabled)

    def wait_for_and_dispatch_events(self, timeout: float) -> None:
        # Wake when the spacing ends, so that a waiting connection is taken then.
        if self.alive and not self._accepting:
            left = self._spacing_left()
            if left > 0:
                timeout = min(timeout, left)
        super().wait_for_and_dispatch_events(timeout)
