"""Bearer tokens, hashed at rest: an agent token acts as its agent, an operator token as a user.

Every endpoint looks the token up before its view runs, but the four decisions (gate, usage,
tool request, result): their task lock checks an agent token in its own statement
(`TokenCheckedByLock`, `agents.taskrow.AgentClaim`), one statement fewer per decision. Either
way a token authenticates by one rule, `ApiToken.live`, and a request whose token does not
authenticate answers 401 before anything else it could answer.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime

from django import db
from django.utils import timezone
from rest_framework import authentication, exceptions

from agents.db.prepared import Prepared
from agents.errors import Forbidden
from agents.models import Agent, ApiToken, hash_token
from agents.taskrow import AgentClaim

# The token lookup of every request: one indexed read joined with the token's agent and
# user, compiled once per connection (agents.db.prepared).
_TOKEN = Prepared(
    lambda key_hash: (
        ApiToken.objects.select_related("agent", "user")
        .filter(ApiToken.live(key_hash))
        .order_by("pk")[:1]
    ),
    {"key_hash": (ApiToken._meta.get_field("key_hash"), "prepared:marker:key_hash")},
)

# How stale a token's `last_used_at` may get before a request writes it again.
TOUCH_SECONDS = 60


class TokenUser:
    """request.user for a token that is not a Django user's: authenticated, and no Django
    permissions at all."""

    is_authenticated = True
    is_active = True
    is_staff = False
    is_superuser = False
    pk = None

    def has_perm(self, perm: str, obj=None) -> bool:
        return False


@dataclass
class AgentPrincipal(TokenUser):
    """request.user for an agent token."""

    agent: Agent

    def get_username(self) -> str:
        return f"agent:{self.agent.name}"


@dataclass
class ClaimPrincipal(TokenUser):
    """request.user on a decision endpoint (`TokenCheckedByLock`) until its task lock checked
    the token: authenticated only in the sense that the view may go on to that lock, which
    answers nothing for a token that does not authenticate."""

    claim: AgentClaim


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """`checked_by_lock`: the decision endpoints' way (`TokenCheckedByLock`), the token's hash
    as an `AgentClaim`, not looked up: the view's task lock checks it."""

    keyword = "Bearer"

    def __init__(self, *, checked_by_lock: bool = False) -> None:
        self.checked_by_lock = checked_by_lock

    def authenticate(self, request):
        key_hash = self.key_hash(request)
        if key_hash is None:
            return None
        if self.checked_by_lock:
            claim = AgentClaim(key_hash)
            return ClaimPrincipal(claim), claim
        return self.authenticate_key(key_hash)

    def key_hash(self, request) -> str | None:
        """The hash of the request's bearer token (None without an Authorization header)."""
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, raw = header.partition(" ")
        if scheme != self.keyword or not raw.strip():
            raise exceptions.AuthenticationFailed("Use 'Authorization: Bearer <token>'.")
        return hash_token(raw.strip())

    def authenticate_key(self, key_hash: str):
        rows = _TOKEN.rows(key_hash=key_hash)
        token = rows[0] if rows else None
        if token is None:
            raise exceptions.AuthenticationFailed("Unknown or revoked token.")
        touch(token.pk, token.last_used_at)
        if token.agent_id:
            return AgentPrincipal(token.agent), token
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("This user is inactive.")
        return token.user, token

    def authenticate_header(self, request) -> str:
        return self.keyword


class TokenCheckedByLock:
    """For a decision endpoint's view, before `APIView`: its token is checked by the task lock
    of the service it calls (every road of the view goes through that lock), not looked up
    before. What a token lookup answered first still comes first: an answer other than the
    lock's success (a bad body, no such task, a throttled call, a 409) is given only after
    the token was looked up as on every other endpoint, so an unknown or revoked token answers
    401 and an operator's token 403 AGENT_TOKEN_REQUIRED, as they did before the view ran."""

    def get_authenticators(self):
        # Only the decision (POST) goes through the lock; OPTIONS looks the token up first.
        request = getattr(self, "request", None)  # None while the schema is generated
        post = request is None or request.method == "POST"
        return [BearerTokenAuthentication(checked_by_lock=post)]

    def handle_exception(self, exc):
        claim = claim_of(self.request)  # type: ignore[attr-defined]
        if claim is not None and claim.agent is None:
            # The database away: the lookup cannot say more than `exc` does (a 503).
            with contextlib.suppress(db.OperationalError, db.InterfaceError):
                exc = _token_failure(claim) or exc
        return super().handle_exception(exc)  # type: ignore[misc]

    def finalize_response(self, request, response, *args, **kwargs):
        claim = claim_of(request)
        if claim is not None:
            if claim.agent is None and response.status_code < 400:
                raise RuntimeError("a decision answered without its lock checking the token")
            if claim.token_id is not None:
                touch(claim.token_id, claim.token_used_at)
        return super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]


def _token_failure(claim: AgentClaim) -> Exception | None:
    """What the token lookup answers for a claim the lock did not check: 401 for a token that
    does not authenticate, 403 for an operator's; None for an agent's token."""
    try:
        principal, _token = BearerTokenAuthentication().authenticate_key(claim.key_hash)
    except exceptions.AuthenticationFailed as failed:
        return failed
    if not isinstance(principal, AgentPrincipal):
        return agent_token_required()
    return None


def agent_token_required() -> Forbidden:
    return Forbidden("This endpoint is for agent tokens.", code="AGENT_TOKEN_REQUIRED")


def touch(token_id: int, last_used_at: datetime | None) -> None:
    """Record that the token was used, at most once a minute (a write per request would be a
    write per decision)."""
    now = timezone.now()
    if last_used_at is None or (now - last_used_at).total_seconds() > TOUCH_SECONDS:
        ApiToken.objects.filter(pk=token_id).update(last_used_at=now)


def agent_of(request) -> Agent | None:
    user = getattr(request, "user", None)
    return user.agent if isinstance(user, AgentPrincipal) else None


def claim_of(request) -> AgentClaim | None:
    """The request's `AgentClaim` on a decision endpoint (None anywhere else)."""
    user = getattr(request, "user", None)
    return user.claim if isinstance(user, ClaimPrincipal) else None
