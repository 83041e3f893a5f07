"""API throttling per token: a ceiling on calls per window that a working agent never meets.

It is there for the client that went wrong, an agent retrying in a tight loop or a script
hammering the API, not to pace agents: the guard does that with WAIT and its limits.
"""

from __future__ import annotations

from django.conf import settings
from django.core.cache import cache
from rest_framework.throttling import SimpleRateThrottle


class TokenRateThrottle(SimpleRateThrottle):
    """At most `settings.API_THROTTLE_RATE` calls per token in each fixed window.

    A counter per token and window, incremented atomically in the cache, instead of DRF's list
    of timestamps: one cheap operation per call, exact under concurrent calls of one token, and
    shared by every web process when the cache is (CACHE_URL). A fixed window lets a burst of
    up to twice the rate straddle a boundary; for a ceiling this generous that is acceptable.
    """

    scope = "token"
    cache = cache

    def get_rate(self) -> str | None:
        # Read per request, not frozen at import, so a test or a settings change takes effect.
        return settings.API_THROTTLE_RATE

    def get_cache_key(self, request, view) -> str | None:
        token = request.auth
        if token is None:  # no token: nothing to count (the view answers 401 or is public)
            return None
        # The token's hash: the decision endpoints know no more of it before their task lock
        # (`agents.api.auth.TokenCheckedByLock`), and a token counts as one on every endpoint.
        return self.cache_format % {"scope": self.scope, "ident": token.key_hash}

    def allow_request(self, request, view) -> bool:
        if self.rate is None:  # API_THROTTLE_RATE=off
            return True
        key = self.get_cache_key(request, view)
        if key is None:
            return True
        now = self.timer()
        window = int(now // self.duration)
        counter = f"{key}_{window}"
        # add() is a no-op when the counter exists; the timeout outlives the window a little.
        self.cache.add(counter, 0, self.duration + 1)
        try:
            count = self.cache.incr(counter)
        except ValueError:  # expired between add() and incr()
            self.cache.set(counter, 1, self.duration + 1)
            count = 1
        if count > self.num_requests:
            self.retry_after = (window + 1) * self.duration - now
            return False
        return True

    def wait(self) -> float | None:
        return getattr(self, "retry_after", None)
