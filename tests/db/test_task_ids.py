"""New tasks' ids sort by creation time (UUID version 7), so a fresh task's trace rows go on
the right edge of the indexes keyed by task rather than a random leaf of a year's history."""

from __future__ import annotations

import uuid

import pytest

from agents.db.ids import uuid7
from agents.services import tasks


def test_an_id_is_a_version_7_uuid_with_the_rfc_variant():
    made = uuid7()
    assert made.version == 7
    assert made.variant == uuid.RFC_4122
    assert uuid.UUID(str(made)) == made


def test_ids_made_in_later_milliseconds_sort_later_and_never_repeat():
    made = []
    while len({m.int >> 80 for m in made}) < 3:  # ids from at least three milliseconds
        made.append(uuid7())
    assert len(set(made)) == len(made)
    stamps = [m.int >> 80 for m in made]
    assert stamps == sorted(stamps)
    later = [m for m in made if m.int >> 80 == stamps[-1]]
    earlier = [m for m in made if m.int >> 80 == stamps[0]]
    assert min(later) > max(earlier)


@pytest.mark.django_db
def test_a_created_task_gets_a_time_ordered_id(make_agent):
    agent, _token = make_agent("ids", namespace="ids")
    first = tasks.task_create(agent=agent, goal="first")
    second = tasks.task_create(agent=agent, goal="second")
    assert first.pk.version == 7 and second.pk.version == 7
    assert first.pk.int >> 80 <= second.pk.int >> 80
