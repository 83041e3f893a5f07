"""What a breaker trip is: a stop for a reason whose code is not GUARD_STOPPED. One rule, in the
guard's terms, that the dashboard, the daily report, the metrics and the advisor all count by."""

from __future__ import annotations

import pytest

from agents.guard import terms

PEOPLE_AND_AGENTS = ("operator_stop", "agent_stop", "agent_paused")
NO_CODE = ("goal_met", "goal_unverified")


def test_an_unverified_finish_carries_no_code_and_is_not_a_trip():
    assert terms.REASON_CODES["goal_unverified"] is None
    assert not terms.is_trip("goal_unverified")


@pytest.mark.parametrize("reason", PEOPLE_AND_AGENTS)
def test_a_stop_by_a_person_or_an_agent_is_not_a_trip(reason):
    assert terms.REASON_CODES[reason] == terms.GUARD_STOPPED
    assert not terms.is_trip(reason)


def test_completing_is_not_a_trip():
    assert not terms.is_trip("goal_met")
    assert not terms.is_trip(None)


@pytest.mark.parametrize(
    "reason", [r for r in terms.REASONS if r not in PEOPLE_AND_AGENTS + NO_CODE]
)
def test_every_other_reason_is_the_guard_stopping_the_task(reason):
    assert terms.is_trip(reason)
    assert terms.REASON_CODES[reason] in terms.TRIP_CODES


def test_the_trip_codes_are_every_code_but_guard_stopped():
    assert terms.GUARD_STOPPED not in terms.TRIP_CODES
    assert set(terms.TRIP_CODES) == {c for c in terms.REASON_CODES.values() if c} - {
        terms.GUARD_STOPPED
    }
    assert list(terms.TRIP_CODES) == sorted(terms.TRIP_CODES)
