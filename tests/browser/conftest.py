"""Browser tests: Playwright drives Debian's Chromium (launched by its path, no downloaded
browser) against pytest-django's live server. Run them with `-m browser`.

Screenshots go to artifacts/screenshots/ at the repository root (kept by CI as artifacts).
"""

from __future__ import annotations

import os
from io import StringIO
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.core.management import call_command

# Playwright's sync API runs an event loop in this thread; the test still calls the ORM
# directly (the live server runs in its own thread), which Django otherwise refuses.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = os.environ.get("LOOPWARDEN_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)")
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    """A laptop screen, light colours, UTC, as the operator at 3 a.m. sees it."""
    return {
        **browser_context_args,
        "viewport": {"width": 1440, "height": 900},
        "color_scheme": "light",
        "timezone_id": "UTC",
    }


@pytest.fixture
def shot(page):
    """Save a full-page screenshot under artifacts/screenshots/NAME.png."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def take(name: str) -> Path:
        path = SCREENSHOTS / f"{name}.png"
        page.evaluate("window.scrollTo(0, 0)")  # the sticky top bar stays at the top
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _last_line(command: str, *args, **options) -> str:
    out = StringIO()
    call_command(command, *args, stdout=out, **options)
    return out.getvalue().strip().splitlines()[-1]


@pytest.fixture
def console(live_server, transactional_db):
    """A live console with an operator, an admin, a looping-prone agent and its thin client."""
    from loopwarden_client import Client

    from agents.models import Agent, LimitProfile

    _last_line("create_operator", "olivia", password="pw")
    _last_line("create_operator", "adam", password="pw", admin=True)
    token = _last_line("create_agent", "support-bot", namespace="support")
    # Room for a loop to show before the guard ends it: more steps without progress.
    patient, _ = LimitProfile.objects.update_or_create(
        name="patient", defaults={"max_stagnant": 10}
    )
    Agent.objects.get(name="support-bot").allowed_profiles.add(patient)
    agent = Client(live_server.url + "/api/v1/", token, timeout=20)
    yield SimpleNamespace(url=live_server.url, agent=agent)
    agent.close()


def sign_in(page, url: str, username: str) -> None:
    page.goto(f"{url}/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill("pw")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{url}/")
