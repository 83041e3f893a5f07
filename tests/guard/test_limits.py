from __future__ import annotations

from decimal import Decimal

import pytest

from agents.guard.core import LimitError, tighten_limits, validate_limits
from agents.guard.registry import LOWER, TASK_LIMITS, WHOLE
from agents.guard.terms import Limits

# -- an agent tightening its profile at task creation ------------------------------------------


def test_no_requested_limits_gives_a_copy_of_the_profile():
    base = Limits()
    task_limits = tighten_limits(base, None)
    assert task_limits == base and task_limits is not base


def test_an_agent_may_lower_every_numeric_limit_but_the_cycle_period():
    requested = {s.name: 2 for s in TASK_LIMITS if s.kind in WHOLE and s.stricter == LOWER}
    requested["max_cost"] = "0.5"
    task_limits = tighten_limits(Limits(), requested)
    assert task_limits.max_model_calls == 2
    assert task_limits.max_cost == Decimal("0.5")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_model_calls", 21),
        ("max_tool_executions", 100),
        ("deadline_seconds", 901),
        ("max_tokens", 200_001),
        ("max_cost", "5.01"),
    ],
)
def test_an_agent_may_not_raise_a_numeric_limit(field, value):
    with pytest.raises(LimitError) as exc:
        tighten_limits(Limits(), {field: value})
    assert "lowered" in exc.value.fields[field]


def test_an_agent_may_raise_the_cycle_period_but_not_lower_it():
    # A longer period detects more cycles, so raising it is the stricter direction.
    assert tighten_limits(Limits(), {"max_cycle_period": 5}).max_cycle_period == 5
    with pytest.raises(LimitError) as exc:
        tighten_limits(Limits(), {"max_cycle_period": 2})
    assert "raised" in exc.value.fields["max_cycle_period"]


def test_an_agent_may_switch_repeat_action_from_block_to_stop_but_not_back():
    assert tighten_limits(Limits(), {"repeat_action": "stop"}).repeat_action == "stop"
    with pytest.raises(LimitError) as exc:
        tighten_limits(Limits(repeat_action="stop"), {"repeat_action": "block"})
    assert "repeat_action" in exc.value.fields


def test_an_agent_may_switch_progress_mode_from_novelty_to_evidence_but_not_back():
    base = Limits(progress_mode="novelty")
    assert tighten_limits(base, {"progress_mode": "evidence"}).progress_mode == "evidence"
    with pytest.raises(LimitError):
        tighten_limits(Limits(), {"progress_mode": "novelty"})


def test_an_agent_may_enable_or_lower_the_near_duplicate_threshold():
    assert (
        tighten_limits(Limits(), {"near_duplicate_threshold": 0.9}).near_duplicate_threshold == 0.9
    )
    base = Limits(near_duplicate_threshold=0.9)
    assert tighten_limits(base, {"near_duplicate_threshold": 0.8}).near_duplicate_threshold == 0.8


@pytest.mark.parametrize("value", [None, 0.95])
def test_an_agent_may_not_disable_or_raise_the_profiles_near_duplicate_threshold(value):
    with pytest.raises(LimitError):
        tighten_limits(Limits(near_duplicate_threshold=0.9), {"near_duplicate_threshold": value})


def test_unknown_and_profile_only_fields_are_refused_for_an_agent():
    with pytest.raises(LimitError) as exc:
        tighten_limits(Limits(), {"max_fun": 1, "max_tasks_per_trigger": 1})
    assert set(exc.value.fields) == {"max_fun", "max_tasks_per_trigger"}


def test_every_bad_field_is_reported_at_once():
    with pytest.raises(LimitError) as exc:
        tighten_limits(Limits(), {"max_model_calls": 99, "max_polls": "x", "nope": 1})
    assert set(exc.value.fields) == {"max_model_calls", "max_polls", "nope"}


# -- an admin setting limits -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_model_calls", 0),
        ("max_model_calls", "5"),
        ("max_model_calls", True),
        ("max_model_calls", 2.0),
        ("max_same_call", 0),
        ("max_cycle_period", 1),
        ("max_stagnant", 0),
        ("max_retries", -1),
        ("deadline_seconds", 0),
        ("max_model_calls", 2**31),
        ("max_cost", "-1"),
        ("max_cost", "abc"),
        ("max_cost", True),
        ("max_cost", "NaN"),
        ("max_cost", "0.0000001"),
        ("max_cost", "100000000"),
        ("repeat_action", "warn"),
        ("progress_mode", "vibes"),
        ("near_duplicate_threshold", 1.5),
        ("near_duplicate_threshold", -0.1),
        ("near_duplicate_threshold", "0.5"),
        ("near_duplicate_threshold", float("nan")),
        ("lease_seconds", 0),
        ("unknown", 1),
    ],
)
def test_an_admin_limit_out_of_type_or_range_is_refused(field, value):
    with pytest.raises(LimitError) as exc:
        validate_limits({field: value}, partial=True)
    assert field in exc.value.fields


def test_an_admin_may_loosen_limits_within_range():
    clean = validate_limits(
        {
            "max_model_calls": 500,
            "max_cost": 12.5,
            "max_retries": 0,
            "max_polls": 0,
            "near_duplicate_threshold": 1,
            "repeat_action": "stop",
        },
        partial=True,
    )
    assert clean == {
        "max_model_calls": 500,
        "max_cost": Decimal("12.5"),
        "max_retries": 0,
        "max_polls": 0,
        "near_duplicate_threshold": 1.0,
        "repeat_action": "stop",
    }


def test_a_partial_edit_returns_only_the_given_fields():
    assert validate_limits({"max_stagnant": 5}, partial=True) == {"max_stagnant": 5}


def test_a_full_edit_fills_missing_fields_with_the_defaults():
    clean = validate_limits({"max_stagnant": 5}, partial=False)
    assert Limits.from_dict(clean) == Limits(max_stagnant=5)


def test_the_admin_may_disable_near_duplicates_with_null():
    assert validate_limits({"near_duplicate_threshold": None}, partial=True) == {
        "near_duplicate_threshold": None
    }


def test_profile_only_fields_are_accepted_for_profiles():
    clean = validate_limits({"max_tasks_per_trigger": 2}, partial=False, profile=True)
    assert clean["max_tasks_per_trigger"] == 2 and clean["trigger_window_seconds"] == 3600
    with pytest.raises(LimitError):
        validate_limits({"max_tasks_per_trigger": 0}, partial=True, profile=True)


def test_limits_that_are_not_an_object_are_refused():
    with pytest.raises(LimitError) as exc:
        validate_limits(["max_stagnant"], partial=True)  # type: ignore[arg-type]
    assert "limits" in exc.value.fields
