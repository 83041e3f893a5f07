"""The dashboard's Clear link follows the filter chosen in the select, which htmx applies
without reloading the page: it shows while a filter is on, and goes when none is."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import sign_in

pytestmark = pytest.mark.browser


def test_the_clear_link_follows_the_filter_chosen_in_the_select(page, console):
    sign_in(page, console.url, "olivia")
    clear = page.locator("form.filters").get_by_role("link", name="Clear")
    expect(clear).to_have_count(0)
    page.evaluate("window.__sameDocument = true")  # gone if the page ever reloads

    page.select_option("#id_state", "FAILED")
    expect(page).to_have_url(re.compile(r"state=FAILED"))
    expect(clear).to_be_visible()

    page.select_option("#id_state", "")
    expect(page).not_to_have_url(re.compile(r"state=FAILED"))
    expect(clear).to_have_count(0)

    page.select_option("#id_state", "FAILED")
    expect(clear).to_be_visible()
    assert page.evaluate("window.__sameDocument") is True  # htmx swapped, nothing reloaded
    clear.click()
    expect(page).to_have_url(f"{console.url}/")
    expect(page.locator("#id_state")).to_have_value("")
    expect(clear).to_have_count(0)


def test_a_clear_link_from_the_address_goes_when_the_filter_is_reset(page, console):
    sign_in(page, console.url, "olivia")
    page.goto(f"{console.url}/?state=FAILED")
    clear = page.locator("form.filters").get_by_role("link", name="Clear")
    expect(clear).to_be_visible()
    page.select_option("#id_state", "")
    expect(page).not_to_have_url(re.compile(r"state=FAILED"))
    expect(clear).to_have_count(0)
