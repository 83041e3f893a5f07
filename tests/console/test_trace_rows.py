"""The trace rows an operator opens (issue 40): how long each call took, what a REUSE answered,
and the full args and result, redacted, in a block collapsed by default."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.guard import terms
from agents.models import ModelCall, ToolCall
from agents.services import runner, tasks

pytestmark = pytest.mark.django_db


def rows(page: str) -> dict[int, str]:
    """The trace's rows by seq: each row's HTML."""
    body = page.split('<table class="trace">')[1].split("</table>")[0]
    out: dict[int, str] = {}
    for part in body.split('<tr class="kind-')[1:]:
        seq = int(re.search(r'<td class="num muted">(\d+)</td>', part).group(1))
        out[seq] = part.split("</tr>")[0]
    return out


def blocks(row: str) -> list[str]:
    """The texts of a row's expandable blocks (<details>), unescaped."""
    found = re.findall(r"<details.*?</details>", row, flags=re.S)
    return [html.unescape(block) for block in found]


def ask(agent, task, tool, args, **request):
    _, call, outcome = runner.tool_call_request(
        task_id=task.pk, agent=agent, tool=tool, args=args,
        effect=request.pop("effect", terms.READ), **request,
    )  # fmt: skip
    return call, outcome


def report(agent, task, call, *, duration_ms=None, **result):
    runner.tool_call_result(
        task_id=task.pk, agent=agent, tool_call_id=call.pk,
        result=terms.ToolResult(**{"kind": terms.SUCCESS, **result}), duration_ms=duration_ms,
    )  # fmt: skip


def progress(revision: int) -> dict:
    return {"revision": revision, "done": False}


def test_each_row_shows_how_long_its_call_took(agent, as_operator):
    task = tasks.task_create(agent=agent, goal="Find the price")
    _, model_call, _ = runner.model_call_gate(task_id=task.pk, agent=agent, model="m")
    runner.model_call_usage(
        task_id=task.pk, agent=agent, model_call_id=model_call.pk, prompt_tokens=10,
        completion_tokens=5, tool_calls=[{"name": "kb_search", "args": {"q": "a"}}],
    )  # fmt: skip
    timed, _ = ask(agent, task, "kb_search", {"q": "a"})
    report(agent, task, timed, duration_ms=1234, data={"hits": 1}, evidence=progress(1))
    untimed, _ = ask(agent, task, "kb_search", {"q": "b"})
    report(agent, task, untimed, data={"hits": 2}, evidence=progress(2))
    slow, _ = ask(agent, task, "kb_search", {"q": "c"})
    report(agent, task, slow, duration_ms=125_000, data={"hits": 3}, evidence=progress(3))
    waiting, _ = ask(agent, task, "kb_search", {"q": "d"})  # no result yet
    # The reported instants, made exact: the duration the agent did not send is their gap.
    base = ToolCall.objects.get(pk=untimed.pk).created_at
    ToolCall.objects.filter(pk=untimed.pk).update(reported_at=base + timedelta(seconds=2.5))
    started = ModelCall.objects.get(pk=model_call.pk).created_at
    ModelCall.objects.filter(pk=model_call.pk).update(
        settled_at=started + timedelta(milliseconds=800)
    )

    shown = rows(as_operator.get(f"/tasks/{task.pk}/").content.decode())

    def duration(seq: int) -> str:
        found = re.search(r'<td class="num nowrap duration"[^>]*>(.*?)</td>', shown[seq], re.S)
        assert found, shown[seq]
        return found.group(1).strip()

    assert duration(model_call.seq) == "800 ms"
    assert duration(timed.seq) == "1.23 s"
    assert duration(untimed.seq) == "2.5 s"
    assert duration(slow.seq) == "2 min 5 s"
    assert duration(waiting.seq) == ""
    page = as_operator.get(f"/tasks/{task.pk}/").content.decode()
    assert '<th class="num">Duration</th>' in page


def test_a_reuse_row_shows_the_result_the_agent_was_answered(agent, as_operator):
    task = tasks.task_create(agent=agent, goal="Pay invoice 1 once")
    write = {"effect": terms.WRITE, "operation_key": "pay-1"}
    call, _ = ask(agent, task, "pay", {"invoice": 1}, **write)
    report(agent, task, call, data={"payment_id": "PAY-7", "api_key": "sk-live-abc"},
           evidence={"revision": 1, "done": False, "committed": True})  # fmt: skip
    again, outcome = ask(agent, task, "pay", {"invoice": 1}, **write)
    assert outcome.decision == terms.REUSE

    row = rows(as_operator.get(f"/tasks/{task.pk}/").content.decode())[again.seq]

    answered = [b for b in blocks(row) if "answered" in b]
    assert len(answered) == 1, row
    assert '"payment_id": "PAY-7"' in answered[0]
    assert "sk-live-abc" not in row and "•••" in answered[0]


def test_args_and_results_open_in_a_collapsed_redacted_block(agent, as_operator):
    task = tasks.task_create(agent=agent, goal="Look it up")
    call, _ = ask(agent, task, "lookup", {"query": "price", "password": "hunter2-secret"})
    report(agent, task, call, data={"price": 42, "note": "key sk_live_51HxYzAbCdEfGhIjKlMnOpQr"})

    row = rows(as_operator.get(f"/tasks/{task.pk}/").content.decode())[call.seq]

    opened = blocks(row)
    assert len(opened) == 2, row
    assert all("<details open" not in b for b in opened)  # collapsed by default
    args_block, result_block = opened
    assert '"query": "price"' in args_block and '\n  "password": "•••"' in args_block
    assert '"price": 42' in result_block
    assert "hunter2" not in row and "sk_live_51HxYz" not in row


def test_a_long_value_is_cut_with_a_note(agent, as_operator):
    task = tasks.task_create(agent=agent, goal="Read a big page")
    call, _ = ask(agent, task, "read_page", {"url": "https://example.com/a"})
    report(agent, task, call, data={"text": "word " * 5000})

    row = rows(as_operator.get(f"/tasks/{task.pk}/").content.decode())[call.seq]

    result_block = blocks(row)[1]
    assert "cut at 4,000 of" in result_block
    assert len(result_block) < 6000


def test_the_trace_reads_the_answered_results_without_a_query_per_row(agent, as_operator):
    def page_queries(reuses: int) -> int:
        task = tasks.task_create(agent=agent, goal=f"Pay {reuses}")
        for n in range(reuses):
            write = {"effect": terms.WRITE, "operation_key": f"pay-{reuses}-{n}"}
            call, _ = ask(agent, task, "pay", {"invoice": n}, **write)
            report(agent, task, call, data={"payment_id": f"PAY-{n}"},
                   evidence={"revision": n + 1, "done": False, "committed": True})  # fmt: skip
            assert ask(agent, task, "pay", {"invoice": n}, **write)[1].decision == terms.REUSE
        with CaptureQueriesContext(connection) as captured:
            assert as_operator.get(f"/tasks/{task.pk}/timeline/").status_code == 200
        return len(captured.captured_queries)

    assert page_queries(1) == page_queries(4)


def test_a_model_row_opens_the_tool_calls_it_asked_for_redacted(agent, as_operator):
    task = tasks.task_create(agent=agent, goal="Plan the lookup")
    _, model_call, _ = runner.model_call_gate(task_id=task.pk, agent=agent, model="m")
    runner.model_call_usage(
        task_id=task.pk, agent=agent, model_call_id=model_call.pk, prompt_tokens=10,
        completion_tokens=5,
        tool_calls=[{"name": "kb_search", "args": {"q": "a", "password": "pw-secret-9"}}],
    )  # fmt: skip

    row = rows(as_operator.get(f"/tasks/{task.pk}/").content.decode())[model_call.seq]

    (plan,) = blocks(row)
    assert '"name": "kb_search"' in plan and '"password": "•••"' in plan
    assert "pw-secret-9" not in row
