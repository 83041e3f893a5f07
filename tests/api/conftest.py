"""API-suite fixtures on top of tests/conftest.py: profiles and prices the scenarios need."""

from __future__ import annotations

from decimal import Decimal

import pytest

from agents.models import LimitProfile, ModelPrice


@pytest.fixture
def patient_profile(db, agent):
    """Lets an agent take ten steps without verified progress, so loop rules fire first;
    granted to agent-a (an agent may only name profiles an admin granted it)."""
    profile = LimitProfile.objects.create(name="patient", max_stagnant=10)
    agent[1].allowed_profiles.add(profile)
    return profile


@pytest.fixture
def price(db):
    """Every model costs 1000 per million prompt tokens and 2000 per million completion tokens:
    100 prompt + 100 completion tokens cost 0.3."""
    return ModelPrice.objects.create(
        model="*", input_per_million=Decimal("1000"), output_per_million=Decimal("2000")
    )
