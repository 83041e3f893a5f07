"""An admin deleting a limit profile while agents create tasks under it (PostgreSQL, real
parallel requests through gunicorn).

Deleting a profile clears the link of every task and agent that named it. Done naively, it
collects those rows, clears them and deletes the profile, while a creation that read the
profile a moment earlier inserts its task in between: then the delete breaks the foreign key
(500), or the creation does (500), and so does an admin granting the profile to an agent.
Every answer must be clean: the delete 204; every creation 201 (or, once the profile is gone,
403 PROFILE_NOT_ALLOWED for a name the agent may no longer use); every grant 200 (or 400
UNKNOWN_PROFILE once it is gone). Afterwards nothing points at the deleted profile.
"""

from __future__ import annotations

import threading

import pytest

from agents.models import Agent, LimitProfile, Task
from tests.conftest import allow_profiles
from tests.live import Api, race

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("on_postgres"),
]

ROUNDS = 8
CREATORS = 3  # per agent
PER_CREATOR = 6
DELETE_AFTER = 4  # creations answered before the admin deletes, so both sides are non-empty


def _round(name: str, admin: Api, by_name: Api, by_default: Api) -> None:
    status, body = admin.post("profiles", {"name": name, "max_model_calls": 7})
    assert status == 201, body
    doomed = LimitProfile.objects.get(name=name)
    allow_profiles("by-name", name)
    Agent.objects.filter(name="by-default").update(default_profile=doomed)
    answered = threading.Semaphore(0)
    answers: list[tuple[str, int, object]] = []
    lock = threading.Lock()

    def create(who: str, api: Api, body: dict) -> None:
        for n in range(PER_CREATOR):
            status, answer = api.post("tasks", {**body, "goal": f"{who} {n}"})
            with lock:
                answers.append((who, status, answer))
            answered.release()

    def grant() -> list[tuple[int, object]]:
        # An admin granting the profile to the other agent as it is deleted.
        return [
            admin.patch("agents/by-default", {"allowed_profiles": [name]})
            for _ in range(PER_CREATOR)
        ]

    def delete() -> tuple[int, object]:
        for _ in range(DELETE_AFTER):
            answered.acquire(timeout=60)
        return admin.delete(f"profiles/{name}")

    calls = [lambda: create("by-name", by_name, {"profile": name})] * CREATORS
    calls += [lambda: create("by-default", by_default, {})] * CREATORS
    *_, grants, deleted = race([*calls, grant, delete])

    assert deleted == (204, None), deleted
    for who, status, answer in answers:
        if who == "by-name" and status == 403:
            assert answer["error"]["code"] == "PROFILE_NOT_ALLOWED", answer
        else:
            assert status == 201, (who, status, answer)
    for status, answer in grants:
        if status == 400:
            assert answer["error"]["code"] == "UNKNOWN_PROFILE", answer
        else:
            assert status == 200, (status, answer)
    assert not LimitProfile.objects.filter(name=name).exists()
    assert Agent.objects.get(name="by-default").default_profile_id is None
    created = [answer["id"] for _, status, answer in answers if status == 201]
    assert Task.objects.filter(id__in=created).count() == len(created)
    assert not Task.objects.filter(profile_id=doomed.pk).exists()
    assert not Agent.allowed_profiles.through.objects.filter(limitprofile_id=doomed.pk).exists()
    # The tasks created before the delete keep the limits they copied from it.
    assert Task.objects.filter(id__in=created, limits__max_model_calls=7).exists()


def test_deleting_a_profile_while_agents_create_tasks_under_it(make_agent, make_user, api_for):
    _, admin_token = make_user("adele", admin=True)
    _, by_name_token = make_agent("by-name", namespace="ns-by-name")
    _, by_default_token = make_agent("by-default", namespace="ns-by-default")
    admin, by_name, by_default = (
        api_for(admin_token), api_for(by_name_token), api_for(by_default_token)
    )  # fmt: skip
    for round_ in range(ROUNDS):
        _round(f"doomed-{round_}", admin, by_name, by_default)
