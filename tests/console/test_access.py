"""Who may open which page: every console view, for the anonymous, an outsider, an operator and
an admin. Refused actions change nothing."""

from __future__ import annotations

from types import SimpleNamespace
from urllib.parse import quote

import pytest
from django.test import Client

from agents.models import ApiToken, Event, LimitProfile, Task
from ledger.models import Operation
from tests.console.conftest import HTMX, signed_in

OPERATOR, ADMIN = "operator", "admin"


@pytest.fixture
def world(stopped_task, lost_write, agent):
    profile, _ = LimitProfile.objects.get_or_create(name="default")
    token = ApiToken.objects.filter(agent=agent).first()
    return SimpleNamespace(
        task=stopped_task, op=lost_write.operation, profile=profile, agent=agent, token=token
    )


# (method, url, the role it needs, a valid form for POST), each built from the world
ROUTES = [
    ("get", lambda w: "/", OPERATOR, None),
    ("get", lambda w: f"/tasks/{w.task.pk}/", OPERATOR, None),
    ("get", lambda w: f"/tasks/{w.task.pk}/live/", OPERATOR, None),
    ("get", lambda w: f"/tasks/{w.task.pk}/timeline/", OPERATOR, None),
    ("get", lambda w: f"/tasks/{w.task.pk}/report.json", OPERATOR, None),
    ("post", lambda w: f"/tasks/{w.task.pk}/stop/", OPERATOR, lambda w: {"reason": "r"}),
    ("post", lambda w: f"/tasks/{w.task.pk}/resume/", OPERATOR, lambda w: {"reason": "r"}),
    ("get", lambda w: "/reconcile/", OPERATOR, None),
    ("post", lambda w: f"/reconcile/{w.op.pk}/", OPERATOR,
     lambda w: {f"op{w.op.pk}-verdict": "NOT_COMMITTED", f"op{w.op.pk}-note": "n"}),
    ("get", lambda w: "/audit/", OPERATOR, None),
    ("get", lambda w: f"/tasks/{w.task.pk}/limits/", ADMIN, None),
    ("post", lambda w: f"/tasks/{w.task.pk}/limits/", ADMIN, lambda w: {"max_model_calls": "99"}),
    ("get", lambda w: "/limits/", ADMIN, None),
    ("get", lambda w: "/limits/new-profile/", ADMIN, None),
    ("post", lambda w: "/limits/new-profile/", ADMIN, lambda w: {"name": "new-one"}),
    ("get", lambda w: f"/limits/profiles/{w.profile.name}/", ADMIN, None),
    ("post", lambda w: f"/limits/profiles/{w.profile.name}/", ADMIN,
     lambda w: {"max_model_calls": "9"}),
    ("get", lambda w: "/agents/", OPERATOR, None),
    ("post", lambda w: f"/agents/{w.agent.name}/pause/", OPERATOR,
     lambda w: {f"pause-{w.agent.name}-reason": "r"}),
    ("post", lambda w: f"/agents/{w.agent.name}/unpause/", OPERATOR,
     lambda w: {f"pause-{w.agent.name}-reason": "r"}),
    ("post", lambda w: f"/agents/{w.agent.name}/tokens/", ADMIN, lambda w: {}),
    ("post", lambda w: f"/agents/{w.agent.name}/tokens/{w.token.pk}/revoke/", ADMIN, lambda w: {}),
]  # fmt: skip
IDS = [f"{method} {index}" for index, (method, *_rest) in enumerate(ROUTES)]
ADMIN_ROUTES = [r for r in ROUTES if r[2] == ADMIN]
ADMIN_IDS = [i for i, r in zip(IDS, ROUTES, strict=True) if r[2] == ADMIN]
GET_ROUTES = [r for r in ROUTES if r[0] == "get"]
GET_IDS = [i for i, r in zip(IDS, ROUTES, strict=True) if r[0] == "get"]


def snapshot() -> tuple:
    """Everything a refused action must leave alone."""
    return (
        Event.objects.count(),
        tuple(Task.objects.order_by("pk").values_list("state", "phase", "limits")),
        tuple(Operation.objects.order_by("pk").values_list("state")),
        tuple(LimitProfile.objects.order_by("pk").values_list("name", "max_model_calls")),
        tuple(ApiToken.objects.order_by("pk").values_list("revoked_at")),
    )


def call(client, route, world, **extra):
    method, url, _role, data = route
    if method == "get":
        return client.get(url(world), **extra)
    return client.post(url(world), data(world), **extra)


@pytest.mark.parametrize("route", ROUTES, ids=IDS)
def test_a_signed_out_user_is_sent_to_sign_in(anonymous, world, route):
    before = snapshot()
    response = call(anonymous, route, world)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=")
    assert snapshot() == before


@pytest.mark.parametrize("route", ROUTES, ids=IDS)
def test_a_signed_out_htmx_request_is_redirected_by_the_client(anonymous, world, route):
    response = call(anonymous, route, world, **HTMX)
    assert response.status_code == 200
    assert response["HX-Redirect"].startswith("/login/?next=")


@pytest.mark.parametrize("route", ROUTES, ids=IDS)
def test_an_outsider_gets_403_and_changes_nothing(as_outsider, world, route):
    before = snapshot()
    response = call(as_outsider, route, world)
    assert response.status_code == 403
    assert b"Not allowed" in response.content
    assert snapshot() == before


@pytest.mark.parametrize("route", ADMIN_ROUTES, ids=ADMIN_IDS)
def test_an_operator_gets_403_on_admin_pages_and_actions(as_operator, world, route):
    before = snapshot()
    assert call(as_operator, route, world).status_code == 403
    assert snapshot() == before


@pytest.mark.parametrize("route", GET_ROUTES, ids=GET_IDS)
def test_an_admin_opens_every_page(as_admin, world, route):
    assert call(as_admin, route, world).status_code == 200


@pytest.mark.parametrize("route", [r for r in GET_ROUTES if r[2] == OPERATOR])
def test_an_operator_opens_the_operator_pages(as_operator, world, route):
    assert call(as_operator, route, world).status_code == 200


def test_an_operator_sees_no_admin_links(as_operator, world):
    page = as_operator.get("/").content.decode()
    assert 'href="/reconcile/"' in page
    assert 'href="/limits/"' not in page
    assert 'href="/agents/"' in page  # the kill switch is theirs too
    detail = as_operator.get(f"/tasks/{world.task.pk}/").content.decode()
    assert f"/tasks/{world.task.pk}/limits/" not in detail


def test_an_admin_sees_the_admin_links(as_admin, world):
    page = as_admin.get("/").content.decode()
    assert 'href="/limits/"' in page
    assert 'href="/agents/"' in page


@pytest.mark.parametrize("route", [r for r in ROUTES if r[0] == "post"])
def test_every_action_enforces_csrf(people, world, route):
    client = signed_in(people.admin, csrf=True)
    before = snapshot()
    response = call(client, route, world)
    assert response.status_code == 403
    assert b"CSRF" in response.content
    assert snapshot() == before


def test_an_action_with_the_csrf_header_htmx_sends_is_accepted(people, looping_task):
    client = signed_in(people.operator, csrf=True)
    client.get(f"/tasks/{looping_task.pk}/")  # sets the CSRF cookie, as a browser would
    token = client.cookies["csrftoken"].value
    response = client.post(
        f"/tasks/{looping_task.pk}/stop/", {"reason": "looping"}, HTTP_X_CSRFTOKEN=token, **HTMX
    )
    assert response.status_code == 200
    looping_task.refresh_from_db()
    assert looping_task.state == "STOPPED"


def test_the_csrf_token_is_on_the_body_for_htmx(as_operator, db):
    page = as_operator.get("/").content.decode()
    assert 'hx-headers=\'{"X-CSRFToken": "' in page


def test_actions_refuse_get(as_admin, world):
    assert as_admin.get(f"/tasks/{world.task.pk}/stop/").status_code == 405
    assert as_admin.get(f"/reconcile/{world.op.pk}/").status_code == 405
    assert as_admin.get(f"/agents/{world.agent.name}/pause/").status_code == 405


def test_a_superuser_has_every_permission(db, django_user_model, world):
    boss = django_user_model.objects.create_superuser("boss", password="pw")
    assert signed_in(boss).get("/limits/").status_code == 200


def test_a_refusal_is_logged_in_one_line_without_a_traceback(as_operator, world, caplog):
    """A 403 is a person's mistake, not the server's: a traceback per refusal buried real
    errors in the log."""
    with caplog.at_level("WARNING", logger="django.request"):
        response = as_operator.get("/limits/")

    assert response.status_code == 403
    assert b"Not allowed" in response.content
    refusals = [r for r in caplog.records if r.name == "django.request"]
    assert refusals and all(r.exc_info is None for r in refusals)


def test_a_post_after_the_session_expired_comes_back_to_the_page_not_the_action(
    anonymous, people, looping_task
):
    """A plain form posted after the session expired: sign-in must send the person back to
    the page the form was on (an action's URL answers only POST: 405 after sign-in)."""
    page = f"/tasks/{looping_task.pk}/"
    response = anonymous.post(
        f"{page}stop/", {"reason": "looping"}, HTTP_REFERER=f"http://testserver{page}?trace=1"
    )
    assert response.status_code == 302
    target = response["Location"]
    assert target == f"/login/?next={quote(page + '?trace=1', safe='/')}"
    signed_in = anonymous.post(target, {"username": "olivia", "password": "pw"}, follow=True)
    assert signed_in.status_code == 200
    assert signed_in.redirect_chain[-1][0] == f"{page}?trace=1"
    looping_task.refresh_from_db()
    assert looping_task.state == "RUNNING"  # nothing was done on the way
    # no page to go back to (no referrer, or another site's): the dashboard
    for extra in ({}, {"HTTP_REFERER": "https://elsewhere.example/tasks/"}):
        response = Client().post(f"{page}stop/", {"reason": "looping"}, **extra)
        assert response["Location"] == "/login/?next=/"
