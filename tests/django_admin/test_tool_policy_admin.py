"""Admins register a tool's reconciler (and its fingerprint settings) in the Django admin."""

from __future__ import annotations

from agents.models import ToolPolicy

ADD = "/django-admin/agents/toolpolicy/add/"


def test_an_admin_registers_a_reconciler(make_user, client):
    client.force_login(make_user("adam", admin=True)[0])

    response = client.post(ADD, {
        "tool": "send_invoice", "ignore_fields": '["request_id"]',
        "reconcile_url": "https://billing.example.com/reconcile",
    })  # fmt: skip

    assert response.status_code == 302, response.content.decode()[:2000]
    policy = ToolPolicy.objects.get(tool="send_invoice")
    assert policy.ignore_fields == ["request_id"]
    assert policy.reconcile_url == "https://billing.example.com/reconcile"


def test_ignore_fields_must_be_a_list_of_names(make_user, client):
    client.force_login(make_user("adam", admin=True)[0])

    response = client.post(ADD, {"tool": "send_invoice", "ignore_fields": '{"a": 1}'})

    assert response.status_code == 200
    assert "Give a JSON list of field names." in response.content.decode()
    assert not ToolPolicy.objects.exists()


def test_operators_cannot_change_tool_policies(make_user, client):
    client.force_login(make_user("olivia")[0])
    assert client.get(ADD).status_code in (302, 403)


def test_an_admin_chooses_the_embedding_similarity_provider(make_user, client):
    client.force_login(make_user("adam", admin=True)[0])

    response = client.post(ADD, {
        "tool": "web_search", "ignore_fields": "[]", "near_duplicate_threshold": "0.9",
        "similarity_provider": "embedding",
    })  # fmt: skip

    assert response.status_code == 302, response.content.decode()[:2000]
    policy = ToolPolicy.objects.get(tool="web_search")
    assert (policy.similarity_provider, policy.near_duplicate_threshold) == ("embedding", 0.9)
