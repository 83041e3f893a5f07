"""A trivial read-only MCP tool for `manage.py bench_mcp`: `echo(n)` answers at once."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("echo")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(n: int) -> dict[str, int]:
    """Answer `n` back."""
    return {"n": n}


if __name__ == "__main__":
    server.run()
