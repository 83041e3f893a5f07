"""A page load is clean: no error in the browser console and no request that fails, not even
the browser's own request for the page's icon."""

from __future__ import annotations

import pytest

from tests.browser.conftest import sign_in

pytestmark = pytest.mark.browser


def test_signing_in_and_loading_the_dashboard_log_no_error(page, console):
    errors: list[str] = []
    page.on("console", lambda m: m.type == "error" and errors.append(f"console: {m.text}"))
    page.on("pageerror", lambda e: errors.append(f"page: {e}"))
    page.on("requestfailed", lambda r: errors.append(f"failed: {r.url} {r.failure}"))
    page.on("response", lambda r: r.status >= 400 and errors.append(f"{r.status}: {r.url}"))
    sign_in(page, console.url, "adam")  # the sign-in page, then the dashboard
    page.reload()
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(500)  # the icon is asked for after the load
    assert errors == []
