"""Strict parsing of settings from the environment: a bad value fails at start, clearly.

A `.env` file at the repository root (or the file `LOOPWARDEN_ENV_FILE` names) is read into the
environment first, by django-environ; a variable already in the environment wins over the file.
"""

from __future__ import annotations

import ipaddress
import os
import re
from email.utils import parseaddr
from pathlib import Path

import environ

ROOT = Path(__file__).resolve().parent.parent


class ConfigError(RuntimeError):
    pass


def env_file() -> Path | None:
    """The `.env` file to read: `LOOPWARDEN_ENV_FILE` if set, else the repository root's."""
    named = os.environ.get("LOOPWARDEN_ENV_FILE", "")
    if named:
        path = Path(named)
        if not path.is_file():
            raise ConfigError(
                f"LOOPWARDEN_ENV_FILE={named!r} is not a file: name an existing .env file, "
                "or unset it"
            )
        return path
    path = ROOT / ".env"
    return path if path.is_file() else None


def read_env_file() -> dict[str, str]:
    """Put the `.env` file's variables into the environment, except those already set there.

    Gives back the variables it added. Every program that reads settings calls it first (the
    settings, gunicorn.conf.py, `./dev run` for the few it reads itself).
    """
    path = env_file()
    if path is None:
        return {}
    _refuse_unreadable_lines(path)
    before = set(os.environ)
    # django-environ parses (quotes, `export`, comments); overwrite=False writes only the
    # variables not set yet: the environment wins.
    environ.Env.read_env(path, overwrite=False)
    return {name: os.environ[name] for name in set(os.environ) - before}


# A line django-environ reads (its own pattern); any other it skips with a warning that
# repeats the line, value and all, and the variable silently keeps its default.
_ENV_LINE = re.compile(r"\A(?:export )?[A-Za-z_0-9]+=")


def _refuse_unreadable_lines(path: Path) -> None:
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#") or _ENV_LINE.match(line):
            continue
        name = re.split(r"[\s=:]", line.strip(), maxsplit=1)[0]  # never the value: a secret
        raise ConfigError(
            f"{path}, line {number} ({name} ...) is not NAME=value: write it with no spaces "
            "around =, or start it with # to keep it as a comment"
        )


def env_str(name: str, default: str) -> str:
    value = os.environ.get(name)
    return default if value is None or value == "" else value


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ConfigError(f"{name}={raw!r} is not a boolean (use true/false, 1/0, yes/no, on/off)")


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(
            f"{name}={raw!r} is not an integer: set a whole number, or unset it for {default}"
        ) from None
    if value < minimum:
        raise ConfigError(f"{name}={value} must be >= {minimum}: set it to {minimum} or more")
    return value


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    """One of `choices`, in any case (given back as spelled there)."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    by_case = {choice.lower(): choice for choice in choices}
    found = by_case.get(raw.strip().lower())
    if found is None:
        raise ConfigError(f"{name}={raw!r} is not one of {', '.join(choices)}")
    return found


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_url(name: str, default: str) -> str:
    """An http(s) URL with a host. A refused one is never printed: a webhook's path or an
    endpoint's query is often its secret."""
    value = env_str(name, default)
    if not value:
        return value
    scheme, sep, rest = value.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest.split("/")[0]:
        raise ConfigError(
            f"{name} is not an http(s) URL: write it whole, as in https://host/path, or unset it"
        )
    return value


def env_emails(name: str) -> list[str]:
    """A comma-separated list of e-mail addresses; empty: none."""
    addresses = env_list(name, [])
    for address in addresses:
        # "ops@example.com" or "Ops <ops@example.com>", as Django's mail takes them.
        local, at, domain = parseaddr(address)[1].partition("@")
        if not (local and at and domain):
            raise ConfigError(
                f"{name}: {address!r} is not an e-mail address: list addresses separated by "
                "commas, as in ops@example.com,oncall@example.com"
            )
    return addresses


def folder_made(name: str, path: Path) -> Path:
    """`path` made a folder (with its parents) if it is not one yet; `name` is the setting
    that chose it, named in the one line a failure gives."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"{name}: cannot make the folder {path} ({exc.strerror}): name a writable folder"
        ) from None
    return path


RATE_PERIODS = {"s": "second", "sec": "second", "second": "second", "m": "minute",
                "min": "minute", "minute": "minute", "h": "hour", "hour": "hour",
                "d": "day", "day": "day"}  # fmt: skip


def env_rate(name: str, default: str | None) -> str | None:
    """A request rate such as `3000/min` (per second, minute, hour or day); `off` gives None.

    The value is given back as `<count>/<period>` with the period spelled out, the form DRF's
    throttles parse.
    """
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    text = raw.strip().lower()
    if text == "off":
        return None
    count, _, period = text.partition("/")
    if not count.isdigit() or int(count) < 1 or period not in RATE_PERIODS:
        raise ConfigError(
            f"{name}={raw!r} is not a rate (use e.g. 3000/min: a count, then per second, "
            "min, hour or day; or off)"
        )
    return f"{int(count)}/{RATE_PERIODS[period]}"


def env_networks(
    name: str,
) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """A comma-separated list of IP addresses or networks (`10.0.0.0/8`, `::1`); empty: none."""
    networks = []
    for item in env_list(name, []):
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ConfigError(
                f"{name}: {item!r} is not an IP address or network: list addresses or networks "
                "separated by commas, as in 10.0.0.0/8,127.0.0.1"
            ) from None
    return tuple(networks)
