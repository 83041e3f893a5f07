"""The dashboard counts its tasks up to a bound (console.paging.COUNT_CAP): past it the page
says "N+ tasks" instead of counting a year of history on every refresh."""

from __future__ import annotations

import pytest

from agents.services import tasks
from console import paging

pytestmark = pytest.mark.django_db


def test_past_the_cap_the_count_says_more(as_operator, agent, monkeypatch):
    monkeypatch.setattr(paging, "COUNT_CAP", 3)
    for n in range(5):
        tasks.task_create(agent=agent, goal=f"task {n}")

    page = as_operator.get("/").content.decode()

    assert "3+ tasks" in page


def test_under_the_cap_the_count_is_exact(as_operator, agent, monkeypatch):
    monkeypatch.setattr(paging, "COUNT_CAP", 3)
    for n in range(2):
        tasks.task_create(agent=agent, goal=f"task {n}")

    page = as_operator.get("/").content.decode()

    assert "2 tasks" in page and "2+ tasks" not in page
