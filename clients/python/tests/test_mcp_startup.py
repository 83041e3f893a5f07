"""`loopwarden-mcp` refuses to start on a config, token or address it cannot serve with: one
line on stderr saying what to fix, exit status 2, no traceback."""

from __future__ import annotations

import json
import socket
import subprocess

import pytest

pytest.importorskip("mcp")

from mcp_helpers import GATEWAY  # noqa: E402

SERVERS = {"time": {"command": "mcp-server-time"}}


def start(tmp_path, document, *args, env=None) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "gw.json"
    config.write_text(document if isinstance(document, str) else json.dumps(document))
    return subprocess.run(
        [GATEWAY, "--config", str(config), *args], capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", **(env or {})}, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("loopwarden-mcp: ")
    return lines[0]


@pytest.mark.parametrize(
    ("document", "fix"),
    [
        ("{not json", "is not JSON"),
        ({"servers": {}}, 'add "mcpServers"'),
        ({"mcpServers": {"a b": {"command": "x"}}}, "must be 1-40 letters"),
        ({"mcpServers": {"a": {"args": []}}}, 'needs either "command" (stdio) or "url"'),
        (
            {"mcpServers": {"a": {"command": "x", "tools": {"t": "writ"}}}},
            'must be "read", "write" or',
        ),
        (
            {"mcpServers": {"a": {"command": "x", "tools": {"t": {"key": "id"}}}}},
            "key must be a list of argument names",
        ),  # fmt: skip
        ({"mcpServers": SERVERS, "loopwarden": {"url": "127.0.0.1:8000"}}, "must start with http"),
        ({"mcpServers": SERVERS, "loopwarden": {"call_timeout_seconds": 0}}, "positive number"),
    ],
)
def test_a_bad_config_is_one_line_with_the_fix(tmp_path, document, fix):
    assert fix in one_line(start(tmp_path, document, env={"LOOPWARDEN_TOKEN": "t"}))


def test_no_token_says_where_to_put_one(tmp_path):
    assert "set LOOPWARDEN_TOKEN" in one_line(start(tmp_path, {"mcpServers": SERVERS}))


def test_an_unreachable_loopwarden_says_so(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens once it is closed
    env = {"LOOPWARDEN_TOKEN": "t", "LOOPWARDEN_URL": f"http://127.0.0.1:{port}/api/v1/"}
    assert "cannot reach Loopwarden" in one_line(start(tmp_path, {"mcpServers": SERVERS}, env=env))


def test_a_refused_token_says_which_token_to_use(tmp_path, live):
    env = {"LOOPWARDEN_TOKEN": "lw_not-a-token", "LOOPWARDEN_URL": live.api}
    line = one_line(start(tmp_path, {"mcpServers": SERVERS}, env=env))
    assert "refused the agent token" in line


def test_a_port_in_use_says_to_choose_another(tmp_path, live):
    env = {"LOOPWARDEN_TOKEN": live.agent_token, "LOOPWARDEN_URL": live.api}
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = start(tmp_path, {"mcpServers": SERVERS}, "--http", f"127.0.0.1:{port}", env=env)
    assert "choose another --http port" in one_line(done)
