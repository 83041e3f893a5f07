"""The agent token is a secret: as read from a file (a mounted secret ends with a newline) it
still works, and a token no HTTP header can carry is refused without being repeated in the
error, where it would reach a traceback, a log or an error tracker."""

from __future__ import annotations

import asyncio

import pytest
from loopwarden_client import AsyncClient, Client


def test_a_token_read_from_a_file_with_its_newline_works(live, lw):
    task = lw.create_task("token from a file")
    with Client(live.api, f"{live.agent_token}\n") as client:
        assert client.get_task(task["id"])["id"] == task["id"]

    async def fetch() -> str:
        async with AsyncClient(live.api, f"  {live.agent_token}\r\n") as client:
            return (await client.get_task(task["id"]))["id"]

    assert asyncio.run(fetch()) == task["id"]


@pytest.mark.parametrize("token", ["lw_SECRET\nX-Injected: 1", "lw_SECRÉT", "lw_SE CRET"])
def test_a_token_no_header_can_carry_is_refused_without_repeating_it(live, token):
    with pytest.raises(ValueError) as caught:
        Client(live.api, token).get_task("any")
    assert "SECRET" not in str(caught.value) and "SECRÉT" not in str(caught.value)
    assert "token" in str(caught.value)
