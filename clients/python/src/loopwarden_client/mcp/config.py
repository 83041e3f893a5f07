"""The gateway's configuration file: the `mcpServers` shape desktop and IDE clients use, plus
Loopwarden's own section and per-tool entries.

    {
      "loopwarden": {"url": "http://127.0.0.1:8000/api/v1/", "goal": "...", "profile": "novelty"},
      "mcpServers": {
        "db": {"command": "mcp-server-sqlite", "args": ["--db-path", "/srv/shop.db"],
               "tools": {"read_query": "read", "write_query": {"key": ["query"]}}},
        "billing": {"url": "http://127.0.0.1:9000/mcp", "headers": {"Authorization": "Bearer ..."},
                    "tools": {"charge": {"key": ["invoice"], "key_argument": "idempotency_key"}}}
      }
    }

Every mistake is a `ConfigError` whose message is one line that says what to fix.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopwarden_client._core import DEFAULT_TIMEOUT_SECONDS
from loopwarden_client.types import READ, WRITE

TOKEN_ENV = "LOOPWARDEN_TOKEN"
TOKEN_FILE_ENV = "LOOPWARDEN_TOKEN_FILE"
URL_ENV = "LOOPWARDEN_URL"
DEFAULT_URL = "http://127.0.0.1:8000/api/v1/"
DEFAULT_GOAL = "an MCP client session through loopwarden-mcp"
# An upstream server's name becomes part of tool names: keep it to what every client accepts.
SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


class ConfigError(Exception):
    """A configuration the gateway cannot start with; the message is the fix, on one line."""


@dataclass(frozen=True)
class ToolRule:
    """A tool's entry in the config: its effect (None: from its annotations; an entry naming a
    key is a write), the arguments its operation key derives from (None: all of them), and an
    argument to fill with the ledger's key (an upstream idempotency key)."""

    effect: str | None = None
    key: tuple[str, ...] | None = None
    key_argument: str | None = None


@dataclass(frozen=True)
class UpstreamConfig:
    """One upstream MCP server: a command (stdio) or a URL (streamable HTTP)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    tools: Mapping[str, ToolRule] = field(default_factory=dict)


@dataclass(frozen=True)
class GatewayConfig:
    url: str
    token: str
    upstreams: tuple[UpstreamConfig, ...]
    goal: str = DEFAULT_GOAL
    profile: str | None = None
    call_timeout_seconds: float = 60.0
    max_wait_tries: int = 5
    api_timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS


def load_config(
    path: str | os.PathLike[str], environ: Mapping[str, str] | None = None
) -> GatewayConfig:
    """Read and check the config file; the token comes from the environment first."""
    environ = os.environ if environ is None else environ
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the config file {file}: {exc.strerror or exc}") from None
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{file} is not JSON ({exc}): fix the file") from None
    return parse_config(document, environ, where=str(file))


def parse_config(
    document: Any, environ: Mapping[str, str], *, where: str = "config"
) -> GatewayConfig:
    if not isinstance(document, dict):
        raise ConfigError(f'{where}: the file must hold a JSON object with "mcpServers"')
    section = _object(document.get("loopwarden", {}), f'{where}: "loopwarden"')
    servers = document.get("mcpServers")
    if not isinstance(servers, dict) or not servers:
        raise ConfigError(
            f'{where}: add "mcpServers": {{"name": {{"command": ...}}}}, the servers to guard'
        )
    upstreams = tuple(_upstream(name, entry, where) for name, entry in servers.items())
    url = environ.get(URL_ENV) or _text(section, "url", where) or DEFAULT_URL
    if not url.startswith(("http://", "https://")):
        raise ConfigError(
            f"{where}: the Loopwarden URL {url!r} must start with http:// or https://"
        )
    return GatewayConfig(
        url=url,
        token=_token(section, environ, where),
        upstreams=upstreams,
        goal=_text(section, "goal", where) or DEFAULT_GOAL,
        profile=_text(section, "profile", where),
        call_timeout_seconds=_number(
            section, "call_timeout_seconds", GatewayConfig.call_timeout_seconds, where
        ),
        max_wait_tries=int(_number(section, "max_wait_tries", GatewayConfig.max_wait_tries, where)),
        api_timeout_seconds=_number(
            section, "api_timeout_seconds", GatewayConfig.api_timeout_seconds, where
        ),
    )


def _token(section: Mapping[str, Any], environ: Mapping[str, str], where: str) -> str:
    """The agent token: never from the model, from the environment or the config file."""
    token = environ.get(TOKEN_ENV) or _text(section, "token", where)
    token_file = environ.get(TOKEN_FILE_ENV) or _text(section, "token_file", where)
    if not token and token_file:
        try:
            token = Path(token_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"cannot read the token file {token_file}: {exc.strerror}") from None
    if not token:
        raise ConfigError(
            f'no agent token: set {TOKEN_ENV} (or {TOKEN_FILE_ENV}), or "token" under '
            f'"loopwarden" in {where}; `manage.py create_agent NAME` prints one'
        )
    return token


def _upstream(name: Any, entry: Any, where: str) -> UpstreamConfig:
    if not isinstance(name, str) or not SERVER_NAME.match(name):
        raise ConfigError(f"{where}: server name {name!r} must be 1-40 letters, digits, '_' or '-'")
    here = f"{where}: mcpServers.{name}"
    entry = _object(entry, here)
    command, url = entry.get("command"), entry.get("url")
    if (command is None) == (url is None):
        raise ConfigError(f'{here} needs either "command" (stdio) or "url" (streamable HTTP)')
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ConfigError(f"{here}.args must be a list of strings")
    tools = {
        tool: _tool_rule(rule, f"{here}.tools.{tool}")
        for tool, rule in _object(entry.get("tools", {}), f"{here}.tools").items()
    }
    if url is not None and (
        not isinstance(url, str) or not url.startswith(("http://", "https://"))
    ):
        raise ConfigError(f"{here}.url must be an http:// or https:// URL")
    if command is not None and (not isinstance(command, str) or not command):
        raise ConfigError(f"{here}.command must be a program name or path")
    return UpstreamConfig(
        name=name,
        command=command,
        args=tuple(args),
        env=_strings(entry.get("env", {}), f"{here}.env"),
        cwd=_text(entry, "cwd", here),
        url=url,
        headers=_strings(entry.get("headers", {}), f"{here}.headers"),
        tools=tools,
    )


def _tool_rule(rule: Any, here: str) -> ToolRule:
    if rule in (READ, WRITE):
        return ToolRule(effect=rule)
    if not isinstance(rule, dict):
        raise ConfigError(f'{here} must be "read", "write" or {{"effect", "key", "key_argument"}}')
    effect = rule.get("effect")
    if effect not in (None, READ, WRITE):
        raise ConfigError(f'{here}.effect must be "read" or "write", not {effect!r}')
    key = rule.get("key")
    if key is not None and (
        not isinstance(key, list) or not key or not all(isinstance(k, str) for k in key)
    ):
        raise ConfigError(f'{here}.key must be a list of argument names, e.g. ["invoice"]')
    key_argument = _text(rule, "key_argument", here)
    if effect == READ and (key or key_argument):
        raise ConfigError(f'{here}: a read has no operation key; drop "key"/"key_argument"')
    if key or key_argument:
        effect = WRITE  # only a write has a key: the entry says so, whatever the annotations
    return ToolRule(effect, tuple(key) if key else None, key_argument)


def _object(value: Any, here: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{here} must be a JSON object")
    return value


def _strings(value: Any, here: str) -> dict[str, str]:
    value = _object(value, here)
    if not all(isinstance(v, str) for v in value.values()):
        raise ConfigError(f"{here} values must be strings")
    return value


def _text(section: Mapping[str, Any], key: str, here: str) -> str | None:
    value = section.get(key)
    if value is not None and not isinstance(value, str):
        raise ConfigError(f'{here}: "{key}" must be a string')
    return value or None


def _number(section: Mapping[str, Any], key: str, default: float, here: str) -> float:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f'{here}: "loopwarden.{key}" must be a positive number')
    return float(value)
