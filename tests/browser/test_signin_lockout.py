"""A guessed password, in a real browser: the sign-in locks after repeated failures, an admin
sees the lock on the console and lifts it, and the operator signs in."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agents.models import Event
from tests.browser.conftest import SCREENSHOTS, sign_in

pytestmark = pytest.mark.browser

LIMIT = 5  # SIGNIN_FAILURE_LIMIT's default


def try_password(page, url: str, username: str, password: str) -> None:
    page.goto(f"{url}/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()


def test_bad_passwords_lock_the_sign_in_and_an_admin_lifts_it(
    page, browser, browser_context_args, console, shot
):
    # The admin signed in earlier: a session outlives a lockout of the address it came from.
    admin = browser.new_context(**browser_context_args).new_page()
    sign_in(admin, console.url, "adam")

    for attempt in range(1, LIMIT):
        try_password(page, console.url, "olivia", f"guess-{attempt}")
        expect(page.get_by_role("alert")).to_contain_text("Please enter a correct username")
    try_password(page, console.url, "olivia", "guess-5")
    expect(page.get_by_role("heading", name="Sign-in locked")).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text("Too many failed sign-ins for olivia")
    shot("signin-locked")

    # Now even the right password is refused.
    try_password(page, console.url, "olivia", "pw")
    expect(page.get_by_role("heading", name="Sign-in locked")).to_be_visible()

    admin.get_by_role("link", name="Lockouts").click()
    row = admin.locator("#signin-lockouts tr", has_text="username olivia")
    expect(row.locator(".badge")).to_have_text("Locked")
    expect(admin.locator("#signin-lockouts tr", has_text="address 127.0.0.1")).to_be_visible()
    admin.screenshot(path=str(SCREENSHOTS / "signin-lockouts.png"), full_page=True)
    admin.evaluate("window.__sameDocument = true")
    row.get_by_label("Reason to unlock username olivia").fill("She mistyped after a night shift")
    row.get_by_role("button", name="Unlock username olivia").click()
    expect(admin.locator("#toasts")).to_contain_text("Sign-in unlocked for username olivia.")
    expect(admin.locator("#signin-lockouts")).to_contain_text("No failed sign-ins are counted")
    assert admin.evaluate("window.__sameDocument") is True  # swapped in place, no reload

    sign_in(page, console.url, "olivia")
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()

    assert list(Event.objects.order_by("id").values_list("kind", "actor")) == [
        ("signin_locked_out", "system:sign-in"),
        ("signin_locked_out", "system:sign-in"),
        ("signin_unlocked", "user:adam"),
    ]
    admin.goto(f"{console.url}/audit/")
    expect(admin.locator("table.audit")).to_contain_text("lifted a sign-in lockout")
    expect(admin.locator("table.audit")).to_contain_text("She mistyped after a night shift")
