"""Who may do what: agents act on their own tasks; users act by their permissions."""

from __future__ import annotations

from agents.api.auth import agent_of, agent_token_required, claim_of
from agents.errors import Forbidden
from agents.models import Agent
from agents.taskrow import AgentClaim


def require_agent(request) -> Agent:
    agent = agent_of(request)
    if agent is None:
        raise agent_token_required()
    return agent


def decision_owner(request) -> Agent | AgentClaim:
    """Whose decision it is on a decision endpoint: the claim its task lock checks
    (`agents.api.auth.TokenCheckedByLock`)."""
    return claim_of(request) or require_agent(request)


def require_perm(request, perm: str) -> None:
    if agent_of(request) is not None or not request.user.has_perm(perm):
        raise Forbidden(f"Your token may not do this (needs {perm}).", code="FORBIDDEN")
