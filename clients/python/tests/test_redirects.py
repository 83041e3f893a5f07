"""A server that answers with a redirect did nothing: Loopwarden deployed behind HTTPS
(`LOOPWARDEN_HTTPS`) answers a request made over plain HTTP 301 to its https URL, with an
empty body. The client raises it, naming where it leads, rather than reading the empty body
as an answer: a stop or a finish that changed nothing must never look done."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import start_gunicorn
from loopwarden_client import Client, LoopwardenError


@pytest.fixture(scope="module")
def https_only(tmp_path_factory) -> Iterator[str]:
    """The API URL, over plain HTTP, of a server deployed for HTTPS: its security middleware
    redirects every request before anything else runs, so its database is never asked."""
    data_dir: Path = tmp_path_factory.mktemp("https-only")
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{data_dir / 'db.sqlite3'}",
        "LOOPWARDEN_DATA_DIR": str(data_dir),
        "LOOPWARDEN_HTTPS": "true",
        "SECRET_KEY": "redirect-tests-only",
        "DEBUG": "false",
    }
    process, api = start_gunicorn(
        env,
        "--workers",
        "1",
        "--log-level",
        "warning",
        output=subprocess.DEVNULL,
        failed=lambda: "the HTTPS-only server did not start",
    )
    try:
        yield api
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=15)


@pytest.mark.parametrize("call", ["create_task", "stop", "finish"])
def test_a_redirect_is_raised_naming_where_it_leads(https_only, call):
    with Client(https_only, "lw_token") as client, pytest.raises(LoopwardenError) as caught:
        session = client.session("0192d9d2-0000-7000-8000-000000000000")
        {"create_task": lambda: client.create_task("goal"), "stop": session.stop,
         "finish": session.finish}[call]()  # fmt: skip
    error = caught.value
    assert (error.status, error.code) == (301, "REDIRECTED")
    assert f"https://{https_only.removeprefix('http://')}" in error.message
