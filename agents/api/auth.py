"""Bearer tokens, hashed at rest: an agent token acts as its agent, an operator token as a user."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils import timezone
from rest_framework import authentication, exceptions

from agents.models import Agent, ApiToken, hash_token
from agents.prepared import Prepared

# The token lookup of every request: one indexed read joined with the token's agent and
# user, compiled once per connection (agents.prepared).
_TOKEN = Prepared(
    lambda key_hash: (
        ApiToken.objects.select_related("agent", "user")
        .filter(key_hash=key_hash, revoked_at__isnull=True)
        .order_by("pk")[:1]
    ),
    {"key_hash": (ApiToken._meta.get_field("key_hash"), "prepared:marker:key_hash")},
)


@dataclass
class AgentPrincipal:
    """request.user for an agent token. It has no Django permissions at all."""

    agent: Agent
    is_authenticated: bool = True
    is_active: bool = True
    is_staff: bool = False
    is_superuser: bool = False

    @property
    def pk(self):
        return None

    def has_perm(self, perm: str, obj=None) -> bool:
        return False

    def get_username(self) -> str:
        return f"agent:{self.agent.name}"


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, raw = header.partition(" ")
        if scheme != self.keyword or not raw.strip():
            raise exceptions.AuthenticationFailed("Use 'Authorization: Bearer <token>'.")
        rows = _TOKEN.rows(key_hash=hash_token(raw.strip()))
        token = rows[0] if rows else None
        if token is None:
            raise exceptions.AuthenticationFailed("Unknown or revoked token.")
        now = timezone.now()
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        if token.agent_id:
            return AgentPrincipal(token.agent), token
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("This user is inactive.")
        return token.user, token

    def authenticate_header(self, request) -> str:
        return self.keyword


def agent_of(request) -> Agent | None:
    user = getattr(request, "user", None)
    return user.agent if isinstance(user, AgentPrincipal) else None
