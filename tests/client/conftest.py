"""The thin client against a real server: pytest-django's `live_server` (a threaded WSGI server
in this process, on the test database), reached over HTTP exactly as an agent reaches it.

Tests here need committed data, so `live_server` makes them transactional.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from loopwarden_client import Client


@pytest.fixture
def api_url(live_server) -> str:
    return f"{live_server.url}/api/v1/"


@pytest.fixture
def agent_token(make_agent) -> str:
    return make_agent("agent-a", namespace="ns-a")[1]


@pytest.fixture
def lw(api_url, agent_token) -> Iterator[Client]:
    """The sync client of agent-a."""
    with Client(api_url, agent_token) as client:
        yield client


@pytest.fixture
def lw_other(api_url, make_agent) -> Iterator[Client]:
    """The sync client of agent-b, in another namespace."""
    with Client(api_url, make_agent("agent-b", namespace="ns-b")[1]) as client:
        yield client


@pytest.fixture
def lw_operator(api_url, make_user) -> Iterator[Client]:
    with Client(api_url, make_user("olivia")[1]) as client:
        yield client


@pytest.fixture
def lw_admin(api_url, make_user) -> Iterator[Client]:
    with Client(api_url, make_user("adam", admin=True)[1]) as client:
        yield client
