"""The built-in `novelty` profile: what framework adapters without a verifier run under."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from agents.models import Agent, LimitProfile

pytestmark = pytest.mark.django_db


def test_the_migrations_create_a_novelty_profile_with_otherwise_default_limits():
    profile = LimitProfile.objects.get(name="novelty")
    assert profile.progress_mode == "novelty"
    default = LimitProfile(name="x")
    assert (profile.max_stagnant, profile.max_same_call) == (
        default.max_stagnant,
        default.max_same_call,
    )


def test_create_agent_names_it_as_the_agents_default_profile(capsys):
    call_command("create_agent", "framework-bot", "--profile", "novelty")
    assert Agent.objects.get(name="framework-bot").default_profile.name == "novelty"
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("lw_")
