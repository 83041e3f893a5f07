"""Strict parsing of settings from the environment: a bad value fails at start, clearly."""

from __future__ import annotations

import ipaddress
import os


class ConfigError(RuntimeError):
    pass


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
