"""`loopwarden-mcp`: an MCP server that fronts real MCP servers and puts every tool call
through Loopwarden's runner API, so agents inside programs nobody here can edit (desktop
assistants, IDE agents) are guarded by a config change. Needs the `mcp` extra:
`pip install 'loopwarden-client[mcp]'`.
"""

try:
    import mcp as _sdk  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is missing
    from loopwarden_client.guard import needs_extra

    raise needs_extra("loopwarden_client.mcp", "mcp") from exc

from loopwarden_client.mcp.config import ConfigError, GatewayConfig, load_config, parse_config
from loopwarden_client.mcp.gateway import Gateway

__all__ = ["ConfigError", "Gateway", "GatewayConfig", "load_config", "parse_config"]
