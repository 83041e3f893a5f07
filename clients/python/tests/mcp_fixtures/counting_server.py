"""A fixture upstream MCP server with counters, run as a stdio subprocess (or `--http PORT`).

Every tool that acts appends one line (`tool json-args`) to `$COUNTER_DIR/calls.log` before
it answers, so a test counts real executions afterwards, whatever the gateway said.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer("counting")
READ_ONLY = ToolAnnotations(read_only_hint=True)


def count(tool: str, **args: Any) -> int:
    """Record one execution; the number of executions of this tool so far."""
    log = Path(os.environ["COUNTER_DIR"]) / "calls.log"
    with log.open("a", encoding="utf-8") as file:
        file.write(f"{tool} {json.dumps(args, sort_keys=True)}\n")
        file.flush()
    return sum(1 for line in log.read_text().splitlines() if line.split(" ", 1)[0] == tool)


@server.tool(annotations=READ_ONLY)
def lookup(query: str) -> dict[str, Any]:
    """Look something up (read-only)."""
    count("lookup", query=query)
    return {"query": query, "answer": f"the answer to {query}"}


@server.tool(annotations=READ_ONLY)
def fetch_page(page: int) -> dict[str, Any]:
    """A page of a listing (read-only); each page is new data."""
    count("fetch_page", page=page)
    return {"page": page, "items": [page * 10 + i for i in range(3)]}


@server.tool()
def create_invoice(customer: str, amount: int) -> dict[str, Any]:
    """Create an invoice (a write: no annotations)."""
    n = count("create_invoice", customer=customer, amount=amount)
    return {"invoice_id": f"inv-{customer}-{n}", "amount": amount}


@server.tool()
def charge(invoice: str, idempotency_key: str = "") -> dict[str, Any]:
    """Charge an invoice; the idempotency key is the payment provider's."""
    count("charge", invoice=invoice, idempotency_key=idempotency_key)
    return {"charged": invoice, "idempotency_key": idempotency_key}


@server.tool()
def slow_write(item: str, seconds: float) -> dict[str, Any]:
    """A write that takes `seconds` (counted when it starts: it acts before it answers)."""
    count("slow_write", item=item, seconds=seconds)
    time.sleep(seconds)
    return {"written": item}


@server.tool()
def crash(item: str) -> dict[str, Any]:
    """A write whose process dies mid-call, after acting."""
    count("crash", item=item)
    os._exit(3)


@server.tool()
def garbage(item: str) -> dict[str, Any]:
    """Acts, then answers something that is not MCP on stdout, then dies."""
    count("garbage", item=item)
    sys.stdout.write('this is not JSON-RPC\n{"jsonrpc": "2.0", "id": "nope"}\n')
    sys.stdout.flush()
    os._exit(4)


@server.tool()
def refuse(item: str) -> str:
    """A write that fails: the upstream answers isError (nothing committed)."""
    count("refuse", item=item)
    raise ToolError(f"cannot write {item}: the disk is read-only")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
