"""Sign-in throttling: repeated bad passwords lock a username, or an address, out; an admin
sees the lock and lifts it; both land in the audit log."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from axes.models import AccessAttempt
from django.core.management import call_command
from django.test import Client

from agents.errors import BadInput
from agents.models import Event
from agents.services.signin import signin_unlock
from tests.console.conftest import HTMX

LIMIT = 5  # SIGNIN_FAILURE_LIMIT's default


def sign_in(client: Client, username: str, password: str, address: str = "127.0.0.1"):
    return client.post("/login/", {"username": username, "password": password}, REMOTE_ADDR=address)


def signed_in(client: Client) -> bool:
    return client.get("/").status_code == 200


def fail(times: int, username: str = "olivia", address: str = "127.0.0.1"):
    return [sign_in(Client(), username, "wrong", address) for _ in range(times)]


def test_bad_passwords_below_the_limit_only_show_the_error(people):
    answers = fail(LIMIT - 1)
    assert [a.status_code for a in answers] == [200] * (LIMIT - 1)
    client = Client()
    assert sign_in(client, "olivia", "pw").status_code == 302
    assert signed_in(client)


def test_repeated_bad_passwords_lock_the_username_out(people):
    answers = fail(LIMIT, address="10.0.0.1")

    assert answers[-1].status_code == 429
    assert b"Sign-in locked" in answers[-1].content
    # The right password, from another address, is refused too: the username is locked.
    client = Client()
    refused = sign_in(client, "olivia", "pw", address="10.0.0.2")
    assert refused.status_code == 429
    assert b"Try again in 15 min" in refused.content
    assert not signed_in(client)
    # Another user signs in from that other address.
    other = Client()
    assert sign_in(other, "adam", "pw", address="10.0.0.2").status_code == 302


def test_repeated_failures_from_one_address_lock_the_address_out(people):
    for username in ("olivia", "adam", "oscar", "nobody", "root"):
        fail(1, username=username, address="10.0.0.7")

    client = Client()
    assert sign_in(client, "adam", "pw", address="10.0.0.7").status_code == 429
    assert not signed_in(client)
    assert sign_in(client, "adam", "pw", address="10.0.0.8").status_code == 302


def test_a_lockout_is_written_to_the_audit_log_once(people):
    fail(LIMIT + 3, address="10.0.0.1")  # three more while locked

    rows = Event.objects.filter(kind="signin_locked_out").order_by("id")
    assert [(e.detail["by"], e.detail["value"]) for e in rows] == [
        ("username", "olivia"),
        ("address", "10.0.0.1"),
    ]
    assert rows[0].actor == "system:sign-in"
    assert rows[0].reason == f"{LIMIT} failed sign-ins"


def test_the_lock_lapses_after_the_lockout_minutes(people):
    fail(LIMIT)
    AccessAttempt.objects.update(attempt_time=AccessAttempt.objects.get().attempt_time
                                 - timedelta(minutes=16))  # fmt: skip
    client = Client()
    assert sign_in(client, "olivia", "pw").status_code == 302


def test_an_admin_sees_the_locked_username_and_address(as_admin, people):
    fail(LIMIT, address="10.0.0.1")
    fail(2, username="oscar", address="10.0.0.3")

    page = as_admin.get("/sign-in/lockouts/").content.decode()

    assert "username <b>olivia</b>" in page and "address <b>10.0.0.1</b>" in page
    assert page.count(">Locked</span>") == 2
    assert "username <b>oscar</b>" in page and ">Counting</span>" in page
    assert 'aria-label="Unlock username olivia"' in page
    assert 'href="/sign-in/lockouts/"' in page  # in the admin's navigation


def test_an_admin_lifts_the_lockout_and_the_user_signs_in(as_admin, people):
    fail(LIMIT, address="10.0.0.1")

    response = as_admin.post(
        "/sign-in/lockouts/unlock/", {"by": "username", "value": "olivia", "reason": "her typo"}
    )

    assert response.status_code == 303
    client = Client()
    assert sign_in(client, "olivia", "pw", address="10.0.0.1").status_code == 302
    assert signed_in(client)
    unlock = Event.objects.get(kind="signin_unlocked")
    assert (unlock.actor, unlock.actor_user, unlock.reason) == ("user:adam", people.admin,
                                                                "her typo")  # fmt: skip
    assert unlock.detail == {"by": "username", "value": "olivia", "failures": LIMIT}


def test_with_htmx_the_unlock_answers_the_table_and_a_toast(as_admin, people):
    fail(LIMIT, address="10.0.0.1")

    response = as_admin.post(
        "/sign-in/lockouts/unlock/", {"by": "address", "value": "10.0.0.1"}, **HTMX
    )

    assert response.status_code == 200
    assert response.content.decode().lstrip().startswith('<div id="signin-lockouts">')
    assert "Sign-in unlocked for address 10.0.0.1." in response["HX-Trigger"]
    assert not AccessAttempt.objects.filter(ip_address="10.0.0.1").exists()


def test_operators_neither_see_nor_lift_lockouts(as_operator, people):
    fail(LIMIT)
    assert as_operator.get("/sign-in/lockouts/").status_code == 403
    response = as_operator.post("/sign-in/lockouts/unlock/", {"by": "username", "value": "olivia"})
    assert response.status_code == 403
    assert AccessAttempt.objects.exists()
    assert b"/sign-in/lockouts/" not in as_operator.get("/").content


def test_signed_out_the_lockouts_page_sends_to_sign_in(anonymous):
    response = anonymous.get("/sign-in/lockouts/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_unlocking_what_is_not_locked_changes_and_logs_nothing(people):
    assert signin_unlock(user=people.admin, by="username", value="olivia") == 0
    assert not Event.objects.filter(kind="signin_unlocked").exists()


@pytest.mark.parametrize(
    ("by", "value"), [("email", "x"), ("username", " "), ("address", "not-an-address")]
)
def test_an_unlock_must_name_a_username_or_an_address(people, by, value):
    with pytest.raises(BadInput):
        signin_unlock(user=people.admin, by=by, value=value)


def test_the_django_admin_shows_the_failures_but_deletes_nothing(as_admin, people):
    fail(LIMIT)
    listing = as_admin.get("/django-admin/axes/accessattempt/")
    assert listing.status_code == 200
    assert b"olivia" in listing.content
    attempt = AccessAttempt.objects.get()
    assert as_admin.get(f"/django-admin/axes/accessattempt/{attempt.pk}/delete/").status_code == 403


def test_from_a_shell_the_last_admin_unlocks_themselves_and_it_is_audited(people):
    fail(LIMIT, username="adam")
    out = StringIO()

    call_command("signin_unlock", "--username", "adam", "--reason", "own typo", stdout=out)

    assert out.getvalue().strip() == f"unlocked username adam: {LIMIT} failures forgotten"
    assert sign_in(Client(), "adam", "pw").status_code == 302
    unlock = Event.objects.get(kind="signin_unlocked")
    assert (unlock.actor, unlock.actor_user, unlock.reason) == ("system", None, "own typo")


def test_a_refused_unlock_says_why_and_changes_nothing(as_admin, people):
    fail(LIMIT)
    response = as_admin.post(
        "/sign-in/lockouts/unlock/",
        {"by": "username", "value": "olivia", "reason": "x" * 2001},
        **HTMX,
    )
    assert response.status_code == 422
    assert "at most 2000 characters" in response.content.decode()
    assert AccessAttempt.objects.exists()
