"""The repository carries its own API reference, docs/API.md, and it names what the code does:
every endpoint, decision, state, reason, guard code and error code. The README points there."""

from __future__ import annotations

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from agents.api.errors import FRAMEWORK_CODES
from agents.guard import terms
from tests.live import ROOT

API_DOC = (ROOT / "docs" / "API.md").read_text()
README = (ROOT / "README.md").read_text()
NOT_ENDPOINTS = {"api-schema", "api-docs", "api-unrouted"}


def api_routes() -> list[str]:
    (api,) = [p for p in get_resolver().url_patterns
              if isinstance(p, URLResolver) and str(p.pattern) == "api/v1/"]  # fmt: skip
    routes = []
    for pattern in api.url_patterns:
        if isinstance(pattern, URLPattern) and pattern.name not in NOT_ENDPOINTS:
            routes.append(re.sub(r"<(?:\w+:)?(\w+)>", "{}", str(pattern.pattern)))
    return routes


def documented_paths() -> set[str]:
    paths = re.findall(r"`(?:[A-Z, ]+ )?([a-z][a-z0-9/{}_-]*)(?:\?[^`]*)?`", API_DOC)
    return {re.sub(r"\{\w+\}", "{}", path) for path in paths}


def error_codes_in_code() -> set[str]:
    codes = set(FRAMEWORK_CODES.values())
    for folder in ("agents", "ledger", "console"):
        for path in (ROOT / folder).rglob("*.py"):
            if "migrations" in path.parts or path.name in ("client.py", "_client_flow.py"):
                continue
            codes.update(re.findall(r'code="([A-Z][A-Z_]+)"', path.read_text()))
    return {code for code in codes if not code.startswith("GUARD_")}


def test_the_readme_points_to_the_reference_in_the_repository():
    assert "docs/API.md" in README
    assert "../shared" not in README and "DESIGN.md" not in README


@pytest.mark.parametrize("route", api_routes())
def test_every_endpoint_is_documented(route):
    assert route in documented_paths(), f"docs/API.md does not document {route}"


@pytest.mark.parametrize(
    "word",
    [
        *terms.DECISIONS,
        *terms.TASK_STATES,
        *terms.OPERATION_STATES,
        *terms.RESULT_KINDS,
        terms.BLOCK_CODE,
    ],
)
def test_every_decision_state_and_result_kind_is_documented(word):
    assert f"`{word}`" in API_DOC


@pytest.mark.parametrize(("reason", "code"), list(terms.REASON_CODES.items()))
def test_every_reason_is_documented_with_its_code(reason, code):
    rows = [line for line in API_DOC.splitlines() if f"`{reason}`" in line and line.startswith("|")]
    assert any((f"`{code}`" if code else "(none)") in row for row in rows), reason


@pytest.mark.parametrize("code", sorted(error_codes_in_code()))
def test_every_error_code_the_code_raises_is_documented(code):
    assert f"`{code}`" in API_DOC


@pytest.mark.parametrize("name", terms.Limits.names() + ["max_tasks_per_trigger"])
def test_every_limit_is_documented(name):
    assert f"| `{name}` |" in API_DOC
