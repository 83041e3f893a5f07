"""The `semantic` provider and the task's row lock: the model never runs while it is held.

Before the lock only the new call's text is embedded; under it the window's vectors are looked
up in the caches. A text no cache holds (here: a window written straight into the database, as
by an import or a process that has forgotten it) makes the decision leave its transaction
without a write, embed the text outside the lock, and decide again, once.

The real model runs; what a test wraps is the encoder (to see when it runs) and the decision's
transaction (to see whether the lock is held then).
"""

from __future__ import annotations

import contextlib

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents import semantic, taskrow
from agents.guard import core, terms
from agents.guard.fingerprint import canonical_json
from agents.models import ApiToken, Task, ToolCall, ToolPolicy
from agents.services import catalog, embeddings, runner

from ..conftest import Caller
from .helpers import execute, new_task, request_tool
from .test_semantic_provider import REPHRASINGS, THRESHOLD

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not semantic.available(), reason="needs loopwarden[semantic]"),
]


@pytest.fixture
def watched(monkeypatch):
    """Records each model run and each decision transaction: ("encode", locked) and ("lock",)."""
    semantic.forget()
    events: list[tuple] = []
    held = [False]
    encoder = semantic._model()
    real_encode = encoder.encode

    def encode(text):
        events.append(("encode", held[0]))
        return real_encode(text)

    real_transaction = runner.decision_transaction

    @contextlib.contextmanager
    def transaction():
        events.append(("lock",))
        with real_transaction():
            held[0] = True
            try:
                yield
            finally:
                held[0] = False

    monkeypatch.setattr(encoder, "encode", encode)
    monkeypatch.setattr(runner, "decision_transaction", transaction)
    yield events
    semantic.forget()


def window_written_in_the_database(task_id: str, queries: list[str]) -> None:
    """The task's window holds these calls of kb_search, as if asked long ago: no process of
    this deployment has seen their texts."""
    task = Task.objects.get(pk=task_id)
    entries = []
    for query in queries:
        fingerprint, text = core.fingerprint("kb_search", {"q": query}, [])
        entries.append(terms.WindowEntry(fingerprint=fingerprint, tool="kb_search", args=text))
    task.window = [entry.to_dict() for entry in entries]
    task.save()


def policy(threshold: float | None = THRESHOLD) -> ToolPolicy:
    return ToolPolicy.objects.create(
        tool="kb_search", near_duplicate_threshold=threshold, similarity_provider="semantic"
    )


def test_texts_no_cache_holds_are_embedded_outside_the_lock_and_decided_again(agent_api, watched):
    policy()
    task = new_task(agent_api)
    window_written_in_the_database(task["id"], REPHRASINGS[:2])

    answer = request_tool(agent_api, task["id"], "kb_search", {"q": REPHRASINGS[2]})

    assert (answer["decision"], answer["reason"]) == ("BLOCK", "near_duplicate")
    encodes = [event for event in watched if event[0] == "encode"]
    assert len(encodes) == 3  # the new text before the lock, the window's two between
    assert all(not locked for _, locked in encodes)
    # Locked twice: the first attempt found two texts missing and wrote nothing.
    assert [event for event in watched if event[0] == "lock"] == [("lock",), ("lock",)]
    assert ToolCall.objects.filter(task_id=task["id"]).count() == 1


def test_a_window_asked_through_the_api_is_decided_in_one_attempt(agent_api, watched):
    policy()
    task = new_task(agent_api)
    for q in REPHRASINGS[:2]:
        execute(agent_api, task["id"], "kb_search", {"q": q})
    watched.clear()

    answer = request_tool(agent_api, task["id"], "kb_search", {"q": REPHRASINGS[2]})

    assert answer["decision"] == "BLOCK"
    assert watched == [("encode", False), ("lock",)]


def test_a_text_still_missing_at_the_second_attempt_is_scored_lexically(
    agent_api, watched, monkeypatch
):
    # As a call that joined the window between the two attempts would be: no third attempt.
    policy()
    task = new_task(agent_api)
    window_written_in_the_database(task["id"], REPHRASINGS[:2])
    monkeypatch.setattr(embeddings, "embed_missing", lambda calls: None)

    answer = request_tool(agent_api, task["id"], "kb_search", {"q": REPHRASINGS[2]})

    # Lexically the three wordings share almost nothing: scored so, the call goes on.
    assert answer["decision"] == "EXECUTE"
    assert [event for event in watched if event[0] == "lock"] == [("lock",), ("lock",)]


def test_a_threshold_set_only_by_the_task_embeds_the_new_text_outside_the_lock(agent_api, watched):
    policy(threshold=None)
    task = new_task(agent_api, limits={"near_duplicate_threshold": THRESHOLD})
    for q in REPHRASINGS[:2]:
        execute(agent_api, task["id"], "kb_search", {"q": q})
    watched.clear()

    answer = request_tool(agent_api, task["id"], "kb_search", {"q": REPHRASINGS[2]})

    assert (answer["decision"], answer["reason"]) == ("BLOCK", "near_duplicate")
    assert watched == [("lock",), ("encode", False), ("lock",)]


def test_a_policy_switched_to_semantic_meanwhile_embeds_outside_the_lock(
    agent_api, watched, monkeypatch
):
    existing = ToolPolicy.objects.create(
        tool="kb_search", near_duplicate_threshold=THRESHOLD, similarity_provider="lexical"
    )
    task = new_task(agent_api)
    for q in REPHRASINGS[:2]:
        execute(agent_api, task["id"], "kb_search", {"q": q})
    before = catalog.loaded()
    existing.similarity_provider = "semantic"
    existing.save()
    monkeypatch.setattr(catalog, "_current", before)  # this worker has not reloaded yet
    watched.clear()

    answer = request_tool(agent_api, task["id"], "kb_search", {"q": REPHRASINGS[2]})

    assert (answer["decision"], answer["reason"]) == ("BLOCK", "near_duplicate")
    assert watched[0] == ("lock",) and ("lock",) in watched[1:]
    assert all(not event[1] for event in watched if event[0] == "encode")


def test_a_new_vector_reaches_the_shared_cache_once_the_response_is_out(
    agent_api, monkeypatch, tmp_path
):
    # Sent while the decision ran, the vector's round trip (and its thread) would compete with
    # it: it waits for Django's request_finished, which the test client sends as a server does.
    backend = "django.core.cache.backends.filebased.FileBasedCache"
    caches = {"default": {"BACKEND": backend, "LOCATION": str(tmp_path / "cache")}}
    with override_settings(CACHES=caches):
        semantic.forget()
        policy()
        task = new_task(agent_api)
        # This worker loads the new policy: the next request embeds its text before the lock.
        execute(agent_api, task["id"], "kb_search", {"q": REPHRASINGS[1]})
        kept_at_the_lock = []
        real_lock = runner.lock_task

        def lock_task(*args, **kwargs):
            kept_at_the_lock.append(len(semantic._pending))
            return real_lock(*args, **kwargs)

        monkeypatch.setattr(runner, "lock_task", lock_task)

        request_tool(agent_api, task["id"], "kb_search", {"q": REPHRASINGS[0]})

        assert kept_at_the_lock == [1]
        assert not semantic._pending
        semantic.stored()
        text = semantic.embed_text(canonical_json({"q": REPHRASINGS[0]}))
        assert isinstance(cache.get(semantic.shared_key(semantic.text_key(text))), bytes)
        semantic.forget()


# -- a token nothing has vouched for ------------------------------------------------------------


@pytest.mark.parametrize("which", ["unknown", "revoked"])
def test_a_token_that_does_not_authenticate_never_runs_the_model(agent_api, watched, which):
    # The decision's lock checks the token, after the new text is embedded: without a check
    # before it, anyone could make the server run the model (and fill the shared cache) with
    # texts of their choosing, one per request.
    policy()
    task = new_task(agent_api)
    execute(agent_api, task["id"], "kb_search", {"q": REPHRASINGS[0]})  # the policy is loaded
    if which == "revoked":
        ApiToken.objects.filter(agent__name="agent-a").update(revoked_at=timezone.now())
        taskrow.forget_vouched()
        caller = agent_api
    else:
        caller = Caller(agent_api.client, "lw_" + "x" * 43)
    watched.clear()

    for n in range(3):
        response = caller.post(
            f"tasks/{task['id']}/tool-calls",
            {"tool": "kb_search", "args": {"q": f"{REPHRASINGS[1]} {n}"}, "effect": "read"},
        )
        assert response.status_code == 401

    assert [event for event in watched if event[0] == "encode"] == []
    assert not semantic._pending


def test_a_new_token_is_looked_up_once_before_its_first_text_is_embedded(agent_api, watched):
    policy()
    task = new_task(agent_api)
    execute(agent_api, task["id"], "kb_search", {"q": REPHRASINGS[0]})
    statements = []
    for n, q in enumerate(REPHRASINGS[1:3]):
        if n == 0:
            taskrow.forget_vouched()  # as a process that has not seen this token decide
        with CaptureQueriesContext(connection) as queries:
            answer = request_tool(agent_api, task["id"], "kb_search", {"q": q})
        statements.append(len(queries))

    # The first looked the token up before embedding; its lock vouches for the second.
    assert statements[0] == statements[1] + 1
    assert answer["decision"] == "EXECUTE"
    assert [e for e in watched if e[0] == "encode"][-2:] == [("encode", False)] * 2
