"""Who may do what: agents act on their own tasks; users act by their permissions."""

from __future__ import annotations

from agents.api.auth import agent_of
from agents.errors import Forbidden


def require_agent(request):
    agent = agent_of(request)
    if agent is None:
        raise Forbidden("This endpoint is for agent tokens.", code="AGENT_TOKEN_REQUIRED")
    return agent


def require_perm(request, perm: str) -> None:
    if agent_of(request) is not None or not request.user.has_perm(perm):
        raise Forbidden(f"Your token may not do this (needs {perm}).", code="FORBIDDEN")
