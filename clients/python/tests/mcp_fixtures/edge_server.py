"""A fixture upstream for the gateway's edge cases, run as a stdio subprocess.

Like `counting_server`, every tool that acts appends `tool json-args` to
`$COUNTER_DIR/calls.log` first. At start it refuses to serve (exit 1, before the handshake)
while `$COUNTER_DIR/down` exists: a server that is down when the gateway needs it again.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("edge")
READ_ONLY = ToolAnnotations(read_only_hint=True)
PIXEL = base64.b64encode(bytes.fromhex("89504e470d0a1a0a")).decode()


def count(tool: str, **args: Any) -> None:
    with (Path(os.environ["COUNTER_DIR"]) / "calls.log").open("a", encoding="utf-8") as file:
        file.write(f"{tool} {json.dumps(args, sort_keys=True)}\n")


@server.tool(annotations=READ_ONLY)
def lookup(query: str) -> dict[str, Any]:
    """The same name as the counting server's tool, another answer."""
    count("lookup", query=query)
    return {"query": query, "answer": f"edge's answer to {query}"}


@server.tool(annotations=READ_ONLY)
def quit_now(reason: str) -> str:
    """A read after which the process exits (it acted on nothing)."""
    count("quit_now", reason=reason)
    os._exit(0)


@server.tool(name="get__thing")
def get_thing(thing: str) -> dict[str, Any]:
    """A tool whose own name holds the gateway's separator."""
    count("get__thing", thing=thing)
    return {"thing": thing}


@server.tool()
def snapshot(item: str) -> types.CallToolResult:
    """A write that answers an image and an embedded resource, no text."""
    count("snapshot", item=item)
    return types.CallToolResult(
        content=[
            types.ImageContent(type="image", data=PIXEL, mime_type="image/png"),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(
                    uri=f"file:///snapshots/{item}.txt", text=f"snapshot of {item}"
                ),
            ),
        ]
    )


@server.tool()
def slow_charge(invoice: str, idempotency_key: str = "") -> dict[str, Any]:
    """A payment (counted at its start) whose first ask takes 5 s, past a short call timeout;
    the provider's idempotency key."""
    count("slow_charge", invoice=invoice, idempotency_key=idempotency_key)
    log = (Path(os.environ["COUNTER_DIR"]) / "calls.log").read_text().splitlines()
    if sum(1 for line in log if line.startswith("slow_charge ")) == 1:
        time.sleep(5)
    return {"charged": invoice, "idempotency_key": idempotency_key}


@server.tool()
def big_write(item: str, size: int) -> str:
    """A write whose answer is `size` characters of text."""
    count("big_write", item=item, size=size)
    return "x" * size


if __name__ == "__main__":
    if (Path(os.environ["COUNTER_DIR"]) / "down").exists():
        print("edge: down for maintenance", file=sys.stderr)
        raise SystemExit(1)
    server.run()
