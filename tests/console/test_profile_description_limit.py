"""The profile form lets an admin type as much description as a profile can hold, and no more:
its limit is the model field's, so a description the browser accepts is one the save accepts."""

from __future__ import annotations

import re

from agents.models import LimitProfile

DESCRIPTION_MAX = LimitProfile._meta.get_field("description").max_length


def description_maxlength(page: str) -> int:
    field = re.search(r"<textarea[^>]*\bname=\"description\"[^>]*>|"
                      r"<input[^>]*\bname=\"description\"[^>]*>", page)  # fmt: skip
    assert field, "no description field on the page"
    limit = re.search(r'\bmaxlength="(\d+)"', field.group(0))
    assert limit, f"the description field has no maxlength: {field.group(0)}"
    return int(limit.group(1))


def test_the_new_profile_form_limits_the_description_as_the_model_does(as_admin):
    page = as_admin.get("/limits/new-profile/").content.decode()
    assert description_maxlength(page) == DESCRIPTION_MAX


def test_the_edit_profile_form_limits_the_description_as_the_model_does(as_admin):
    LimitProfile.objects.create(name="strict", description="small budgets")
    page = as_admin.get("/limits/profiles/strict/").content.decode()
    assert description_maxlength(page) == DESCRIPTION_MAX


def test_the_new_profile_form_limits_the_name_as_the_model_does(as_admin):
    page = as_admin.get("/limits/new-profile/").content.decode()
    field = re.search(r"<input[^>]*\bname=\"name\"[^>]*>", page)
    assert field, "no name field on the page"
    limit = re.search(r'\bmaxlength="(\d+)"', field.group(0))
    assert limit and int(limit.group(1)) == LimitProfile._meta.get_field("name").max_length
