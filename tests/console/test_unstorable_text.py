"""Reported text the database cannot hold, as the console shows it; and as operators type it."""

from __future__ import annotations

import html
import json

from agents.guard import terms
from tests.conftest import Caller
from tests.console.conftest import HTMX, without_csrf_tokens


def reported_write(client, make_agent) -> tuple[str, dict]:
    """A task whose committed write reported NUL and a lone surrogate (in data and milestone)."""
    _, token = make_agent("agent-t", namespace="ns-t")
    api = Caller(client, token)
    task = api.post("tasks", {"goal": "Pay invoice INV-7"}).body
    asked = api.post(
        f"tasks/{task['id']}/tool-calls",
        {"tool": "pay", "args": {"invoice": 7}, "effect": "write", "operation_key": "pay-7"},
    ).body
    data = {"receipt": "a\x00b", "note": "c\ud800d"}
    answer = api.post(
        f"tasks/{task['id']}/tool-calls/{asked['tool_call']}/result",
        raw=json.dumps({"kind": "SUCCESS", "data": data,
                        "evidence": {"revision": 1, "done": True, "committed": True,
                                     "milestone": "paid\x00"}}),
    )  # fmt: skip
    assert answer.status_code == 200, answer.content[:300]
    return task["id"], data


def test_the_task_page_shows_reported_text_as_escapes(as_operator, client, make_agent):
    task_id, _ = reported_write(client, make_agent)

    for path in (f"/tasks/{task_id}/", f"/tasks/{task_id}/live/"):
        response = as_operator.get(path, **HTMX) if "live" in path else as_operator.get(path)
        assert response.status_code == 200, path
        page = html.unescape(response.content.decode("utf-8"))
        assert "\u2400lw:" not in page, path
    page = html.unescape(as_operator.get(f"/tasks/{task_id}/").content.decode("utf-8"))
    assert "a\\u0000b" in page
    assert "c\\ud800d" in page
    assert "paid\\u0000" in page


def test_the_report_download_holds_the_text_as_reported(as_operator, client, make_agent):
    task_id, _ = reported_write(client, make_agent)

    response = as_operator.get(f"/tasks/{task_id}/report.json")

    assert response.status_code == 200
    assert json.loads(response.content)["completed"] == ["paid\x00"]


def test_a_reconcile_result_with_a_nul_is_refused_next_to_the_field(as_operator, lost_write):
    op = lost_write.operation

    response = as_operator.post(
        f"/reconcile/{op.pk}/",
        {f"op{op.pk}-verdict": "COMMITTED", f"op{op.pk}-note": "seen in the PSP",
         f"op{op.pk}-result": '{"payment_id": "PAY\\u00009"}'},
    )  # fmt: skip

    assert response.status_code == 422
    assert "NUL" in html.unescape(response.content.decode())
    op.refresh_from_db()
    assert op.state == terms.UNKNOWN


def test_text_that_looks_encoded_is_shown_as_the_agent_sent_it(
    as_operator, client, make_agent, csrf_token_spells
):
    csrf_token_spells("xAy")
    _, token = make_agent("agent-t", namespace="ns-t")
    api = Caller(client, token)
    task = api.post("tasks", {"goal": "Look up"}).body
    tricky = "\u2400lw:x\\u0041y"  # the encoding's prefix, sent as plain text
    body = {"tool": "search", "args": {"q": tricky}, "effect": "read"}
    asked = api.post(f"tasks/{task['id']}/tool-calls", body)
    assert asked.status_code == 200

    page = as_operator.get(f"/tasks/{task['id']}/").content.decode("utf-8")
    page = html.unescape(without_csrf_tokens(page))

    assert tricky.replace("\\", "\\\\") in page  # as JSON text: the backslash is escaped
    assert "xAy" not in page
