"""Limits (admins): a task's own limits, limit profiles, and who changed what."""

from __future__ import annotations

from decimal import Decimal
from html.parser import HTMLParser

import pytest

from agents.models import Event, LimitProfile
from agents.services import configuration, operator
from tests.console.conftest import HTMX


class FormValues(HTMLParser):
    """What a browser would post back from a page's form: each input's and select's value."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, str] = {}
        self._select: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "input" and a.get("name") and a.get("type") != "submit":
            self.values[a["name"]] = a.get("value") or ""
        elif tag == "select":
            self._select = a.get("name")
        elif (
            tag == "option"
            and self._select
            and ("selected" in a or self._select not in self.values)
        ):
            self.values[self._select] = a.get("value") or ""

    def handle_endtag(self, tag):
        if tag == "select":
            self._select = None


def form_values(page: str) -> dict[str, str]:
    parser = FormValues()
    parser.feed(page)
    return parser.values


def test_an_admin_changes_a_tasks_limits_and_usage_stays(as_admin, looping_task):
    used = looping_task.tool_executions
    response = as_admin.post(f"/tasks/{looping_task.pk}/limits/", {
        **looping_task.limits, "near_duplicate_threshold": "", "max_model_calls": "50",
        "max_cost": "7.5", "reason": "long report",
    })  # fmt: skip
    assert response.status_code == 303
    looping_task.refresh_from_db()
    assert looping_task.limits["max_model_calls"] == 50
    assert Decimal(looping_task.limits["max_cost"]) == Decimal("7.5")
    assert looping_task.tool_executions == used
    event = Event.objects.get(kind="limits_changed")
    assert event.actor == "user:adam" and event.reason == "long report"
    assert set(event.detail["after"]) == {"max_model_calls", "max_cost"}  # only what changed
    page = as_admin.get(f"/tasks/{looping_task.pk}/limits/").content.decode()
    assert "adam" in page and "max_model_calls 20 → <b>50</b>" not in page  # words, not names
    assert "Model calls 20 → <b>50</b>" in page


@pytest.mark.parametrize(("typed", "kept"), [("1e3", "1000"), ("2.5E+1", "25"), ("0.50", "0.50")])
def test_an_amount_typed_in_exponent_form_is_kept_as_a_plain_decimal(
    as_admin, looping_task, typed, kept
):
    # Kept as "1E+3", the API and this form showed an amount nobody typed that way.
    response = as_admin.post(f"/tasks/{looping_task.pk}/limits/", {
        **looping_task.limits, "near_duplicate_threshold": "", "max_cost": typed,
        "reason": "budget",
    })  # fmt: skip
    assert response.status_code == 303
    looping_task.refresh_from_db()
    assert looping_task.limits["max_cost"] == kept
    page = as_admin.get(f"/tasks/{looping_task.pk}/limits/").content.decode()
    assert f'name="max_cost" value="{Decimal(kept):.2f}"' in page


def test_htmx_gets_the_form_back_with_a_toast(as_admin, looping_task):
    response = as_admin.post(f"/tasks/{looping_task.pk}/limits/",
                             {**looping_task.limits, "near_duplicate_threshold": "",
                              "max_polls": "3"}, **HTMX)  # fmt: skip
    assert response.status_code == 200
    assert response.content.decode().lstrip().startswith('<div id="limits-form"')
    assert "lw:toast" in response["HX-Trigger"]


def test_a_bad_limit_shows_the_error_next_to_the_field_and_changes_nothing(as_admin, looping_task):
    before = dict(looping_task.limits)
    response = as_admin.post(f"/tasks/{looping_task.pk}/limits/", {
        **looping_task.limits, "near_duplicate_threshold": "2", "max_model_calls": "-4",
        "max_cost": "lots",
    })  # fmt: skip
    assert response.status_code == 422
    body = response.content.decode()
    assert 'id="id_max_model_calls_error">Must be at least 1.' in body
    assert 'id="id_max_cost_error">Must be a decimal amount.' in body
    assert 'id="id_near_duplicate_threshold_error">Must be a number between 0 and 1' in body
    looping_task.refresh_from_db()
    assert looping_task.limits == before
    assert not Event.objects.filter(kind="limits_changed").exists()


def test_changing_nothing_says_so(as_admin, looping_task):
    response = as_admin.post(f"/tasks/{looping_task.pk}/limits/",
                             {**looping_task.limits, "near_duplicate_threshold": ""})  # fmt: skip
    assert response.status_code == 422
    assert "Give the limits to change." in response.content.decode()


def test_an_operator_may_not_change_limits(as_operator, looping_task):
    before = dict(looping_task.limits)
    response = as_operator.post(f"/tasks/{looping_task.pk}/limits/", {"max_model_calls": "99"})
    assert response.status_code == 403
    looping_task.refresh_from_db()
    assert looping_task.limits == before


def test_the_profiles_page_lists_profiles_and_who_changed_what(as_admin, db):
    LimitProfile.objects.create(name="strict", max_model_calls=8, description="small budgets")
    page = as_admin.get("/limits/").content.decode()
    assert 'href="/limits/profiles/strict/"' in page
    assert "small budgets" in page


def test_an_admin_creates_a_profile(as_admin, db):
    response = as_admin.post("/limits/new-profile/", {
        "name": "nightly", "description": "batch jobs", **_profile_fields(max_model_calls="30"),
    })  # fmt: skip
    assert response.status_code == 303
    profile = LimitProfile.objects.get(name="nightly")
    assert profile.max_model_calls == 30
    event = Event.objects.get(kind="profile_created")
    assert (event.actor, event.detail["profile"]) == ("user:adam", "nightly")
    page = as_admin.get("/limits/").content.decode()
    assert "created a limit profile" in page
    assert "Profile nightly created." in page


def test_the_new_profile_form_starts_from_the_defaults(as_admin, db):
    page = as_admin.get("/limits/new-profile/").content.decode()
    assert 'name="max_model_calls" value="20"' in page
    assert 'name="max_cost" value="5.00"' in page


def test_a_bad_profile_shows_every_error_and_creates_nothing(as_admin, db):
    response = as_admin.post("/limits/new-profile/", {
        "name": "Has Spaces", **_profile_fields(max_same_call="0", max_cycle_period="1"),
    })  # fmt: skip
    assert response.status_code == 422
    body = response.content.decode()
    assert 'id="id_name_error">Required: letters, numbers' in body
    assert 'id="id_max_same_call_error">Must be at least 1.' in body
    assert 'id="id_max_cycle_period_error">Must be at least 2.' in body
    assert not LimitProfile.objects.filter(name="Has Spaces").exists()
    assert not Event.objects.filter(kind="profile_created").exists()


def test_a_duplicate_name_is_refused(as_admin, db):
    response = as_admin.post("/limits/new-profile/", {"name": "default", **_profile_fields()})
    assert response.status_code == 422
    assert "A profile with this name already exists." in response.content.decode()


def test_an_admin_edits_a_profile_and_the_change_is_logged(as_admin, db):
    response = as_admin.post("/limits/profiles/default/", {
        "description": "tuned", **_profile_fields(max_stagnant="5"),
    }, **HTMX)  # fmt: skip
    assert response.status_code == 200
    assert "Saved." in response.content.decode()
    assert "Profile default saved. New tasks get these limits." in response["HX-Trigger"]
    profile = LimitProfile.objects.get(name="default")
    assert (profile.max_stagnant, profile.description) == (5, "tuned")
    event = Event.objects.get(kind="profile_changed")
    assert event.detail["changes"]["max_stagnant"] == {"before": 3, "after": 5}
    assert "max_model_calls" not in event.detail["changes"]


def test_an_operator_may_not_open_or_change_profiles(as_operator, db):
    assert as_operator.get("/limits/").status_code == 403
    response = as_operator.post("/limits/profiles/default/", _profile_fields(max_stagnant="9"))
    assert response.status_code == 403
    assert LimitProfile.objects.get(name="default").max_stagnant == 3


def _profile_fields(**override) -> dict:
    fields = {
        "max_model_calls": "20", "max_tool_requests": "40", "max_tool_executions": "20",
        "max_same_call": "2", "repeat_action": "block", "max_cycle_period": "3",
        "max_stagnant": "3", "max_retries": "3", "max_polls": "10", "deadline_seconds": "900",
        "max_tokens": "200000", "max_cost": "5.00", "progress_mode": "evidence",
        "near_duplicate_threshold": "", "lease_seconds": "120", "max_tasks_per_trigger": "5",
        "trigger_window_seconds": "3600", "default_estimate_tokens": "4000",
    }  # fmt: skip
    return {**fields, **override}


def test_a_form_opened_before_a_resume_grant_changes_only_the_field_the_admin_edited(
    as_admin, stopped_task, people
):
    # The admin opens the limits page; meanwhile an operator resumes the task with 5 more model
    # calls; then the admin saves the page with only max_polls edited. The other fields come
    # back as the page showed them, and must not undo the grant.
    shown = form_values(as_admin.get(f"/tasks/{stopped_task.pk}/limits/").content.decode())
    operator.task_resume(
        task_id=stopped_task.pk, user=people.operator, reason="fixed", grant={"model_calls": 5}
    )
    stopped_task.refresh_from_db()
    granted = stopped_task.limits["max_model_calls"]
    assert granted == int(shown["max_model_calls"]) + 5

    response = as_admin.post(f"/tasks/{stopped_task.pk}/limits/", {
        **shown, "max_polls": "3", "reason": "fewer polls",
    })  # fmt: skip

    assert response.status_code == 303
    stopped_task.refresh_from_db()
    assert stopped_task.limits["max_polls"] == 3
    assert stopped_task.limits["max_model_calls"] == granted
    event = Event.objects.get(kind="limits_changed")
    assert set(event.detail["after"]) == {"max_polls"}


def test_a_field_the_admin_edited_is_saved_even_when_it_changed_meanwhile(
    as_admin, stopped_task, people
):
    shown = form_values(as_admin.get(f"/tasks/{stopped_task.pk}/limits/").content.decode())
    operator.task_resume(
        task_id=stopped_task.pk, user=people.operator, reason="fixed", grant={"model_calls": 5}
    )
    response = as_admin.post(f"/tasks/{stopped_task.pk}/limits/", {
        **shown, "max_model_calls": "60", "reason": "a long report",
    })  # fmt: skip
    assert response.status_code == 303
    stopped_task.refresh_from_db()
    assert stopped_task.limits["max_model_calls"] == 60  # what the admin typed


def test_a_profile_form_opened_before_another_admins_save_changes_only_what_it_edited(
    as_admin, people
):
    # Two admins edit one profile: the first opens the page, the second saves a stricter
    # max_stagnant, then the first saves having edited only the description.
    shown = form_values(as_admin.get("/limits/profiles/default/").content.decode())
    configuration.profile_save(user=people.admin, values={"max_stagnant": 5}, name="default")

    response = as_admin.post("/limits/profiles/default/", {**shown, "description": "nightly"})

    assert response.status_code == 303
    profile = LimitProfile.objects.get(name="default")
    assert (profile.description, profile.max_stagnant) == ("nightly", 5)


def test_a_profile_named_new_is_edited_from_its_link(as_admin, db):
    """A profile may be called "new" (a slug): its edit link must open that profile, not the
    form that creates one, and a save must change it."""
    LimitProfile.objects.create(name="new")
    limits = as_admin.get("/limits/").content.decode()
    assert 'href="/limits/profiles/new/">Edit new</a>' in limits
    edit = as_admin.get("/limits/profiles/new/").content.decode()
    assert "<h1>Profile new</h1>" in edit
    response = as_admin.post(
        "/limits/profiles/new/", {"description": "renamed?", **_profile_fields(max_stagnant="7")}
    )
    assert response.status_code == 303
    assert LimitProfile.objects.get(name="new").max_stagnant == 7
    # the page that creates a profile is still one click away
    new_link = limits.split('class="button primary" href="', 1)[1].split('"', 1)[0]
    assert "New limit profile" in as_admin.get(new_link).content.decode()
