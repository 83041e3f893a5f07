"""Labelling a stop "real loop" / "false stop", and loop_eval --from-db replaying the labels."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from agents import loop_eval
from agents.guard import terms
from agents.models import Event


def test_an_operator_labels_a_breaker_trip_and_the_label_is_audited(as_operator, tripped_task):
    page = as_operator.get(f"/tasks/{tripped_task.pk}/").content.decode()
    assert f'action="/tasks/{tripped_task.pk}/label/"' in page

    response = as_operator.post(f"/tasks/{tripped_task.pk}/label/", {"label": "real_loop"})

    assert response.status_code == 303
    tripped_task.refresh_from_db()
    assert tripped_task.loop_label == "real_loop"
    event = Event.objects.get(task=tripped_task, kind="stop_labelled")
    assert (event.actor, event.detail["label"]) == ("user:olivia", "real_loop")
    page = as_operator.get(f"/tasks/{tripped_task.pk}/").content.decode()
    assert "Labelled: <b>real loop</b>" in page


def test_a_running_task_cannot_be_labelled(as_operator, looping_task):
    as_operator.post(f"/tasks/{looping_task.pk}/label/", {"label": "false_stop"})
    looping_task.refresh_from_db()
    assert looping_task.loop_label == ""
    assert not Event.objects.filter(task=looping_task, kind="stop_labelled").exists()


def test_an_unknown_label_changes_nothing(as_operator, tripped_task):
    as_operator.post(f"/tasks/{tripped_task.pk}/label/", {"label": "maybe"})
    tripped_task.refresh_from_db()
    assert tripped_task.loop_label == ""


def test_a_refused_label_is_shown_as_an_error_not_a_success(as_operator, tripped_task):
    response = as_operator.post(
        f"/tasks/{tripped_task.pk}/label/", {"label": "maybe"}, HTTP_HX_REQUEST="true"
    )

    toast = json.loads(response["HX-Trigger"])["lw:toast"]
    assert toast["kind"] == "error"
    assert "real_loop or false_stop" in toast["message"]


def test_an_outsider_may_not_label(as_outsider, tripped_task):
    response = as_outsider.post(f"/tasks/{tripped_task.pk}/label/", {"label": "real_loop"})
    assert response.status_code == 403
    tripped_task.refresh_from_db()
    assert tripped_task.loop_label == ""


def test_loop_eval_from_db_replays_the_labelled_stops(as_operator, tripped_task, tmp_path):
    as_operator.post(f"/tasks/{tripped_task.pk}/label/", {"label": "false_stop"})
    out = io.StringIO()

    call_command("loop_eval", "--from-db", "--chart", str(tmp_path / "c.svg"), stdout=out)

    text = out.getvalue()
    assert "1 traces from labelled tasks in the database: 1 (0 loops, 1 legitimate)" in text
    assert "lexical        0.50" in text


def test_loop_eval_exports_the_operators_labels_as_a_trace_file(
    as_operator, tripped_task, tmp_path
):
    as_operator.post(f"/tasks/{tripped_task.pk}/label/", {"label": "real_loop"})
    target = tmp_path / "labels" / "operators.json"

    call_command("loop_eval", "--export-labels", str(target), stdout=io.StringIO())

    [trace] = loop_eval.load_traces(target.parent)
    assert (trace.name, trace.label) == (str(tripped_task.pk), "loop")
    asked = list(tripped_task.tool_call_rows.order_by("seq").values_list("tool", "args"))
    assert [(c["tool"], c["args"]) for c in trace.calls] == asked and asked
    # The file replays like the shipped set: the loop it holds is stopped again.
    [row] = [r for r in loop_eval.evaluate([trace], provider_names=()) if r.detector == "exact"]
    assert row.replays[0].trace is trace


def test_loop_eval_exports_no_secret_an_agent_sent(as_operator, tripped_task, tmp_path):
    """The file is meant for the repository (tuning/): what the console masks stays masked."""
    secret = "hunter2-pa55word"
    tripped_task.tool_call_rows.update(
        args={"query": "refund policy", "password": secret},
        result_kind="SUCCESS",
        result_data={"session": secret, "text": f"logged in with password={secret}"},
    )
    as_operator.post(f"/tasks/{tripped_task.pk}/label/", {"label": "real_loop"})
    target = tmp_path / "operators.json"

    call_command("loop_eval", "--export-labels", str(target), stdout=io.StringIO())

    assert secret not in target.read_text()
    [trace] = loop_eval.load_traces(tmp_path)
    assert trace.calls[0]["args"]["query"] == "refund policy"


def test_loop_eval_refuses_to_export_when_nothing_is_labelled(tmp_path, db):
    with pytest.raises(CommandError, match="No labelled tasks"):
        call_command("loop_eval", "--export-labels", str(tmp_path / "x.json"))
    assert not (tmp_path / "x.json").exists()


def test_the_report_page_advises_the_recommended_threshold(as_operator, tripped_task):
    from django.core.cache import cache

    cache.clear()
    page = as_operator.get("/reports/daily/").content.decode()

    tuned = loop_eval.recommend(
        loop_eval.evaluate(loop_eval.load_traces(loop_eval.TUNING_DIR), provider_names=("lexical",))
    )
    assert tuned is not None
    assert f"near_duplicate_threshold</span> to <strong>{tuned.threshold:.2f}</strong>" in page
    assert "0 stops operators labelled" in page

    as_operator.post(f"/tasks/{tripped_task.pk}/label/", {"label": "real_loop"})
    page = as_operator.get("/reports/daily/").content.decode()
    assert "1 stops operators labelled" in page


def test_labels_are_offered_on_a_breaker_trip(as_operator, tripped_task):
    page = as_operator.get(f"/tasks/{tripped_task.pk}/").content.decode()
    assert 'value="real_loop"' in page and 'value="false_stop"' in page


@pytest.mark.parametrize("ended", ["stopped_task", "completed_task", "lost_write"])
def test_labels_are_offered_only_where_the_guard_tripped(as_operator, ended, request):
    task = request.getfixturevalue(ended)
    task = getattr(task, "task", task)
    page = as_operator.get(f"/tasks/{task.pk}/").content.decode()
    if terms.is_trip(task.reason):  # a lost write stops the task by the guard's ledger rule
        assert 'value="real_loop"' in page
    else:
        assert 'value="real_loop"' not in page and 'value="false_stop"' not in page
        assert f'action="/tasks/{task.pk}/label/"' not in page


@pytest.mark.parametrize("ended", ["stopped_task", "completed_task"])
def test_a_stop_that_was_no_trip_cannot_be_labelled(as_operator, ended, request):
    task = request.getfixturevalue(ended)
    response = as_operator.post(
        f"/tasks/{task.pk}/label/", {"label": "real_loop"}, HTTP_HX_REQUEST="true"
    )

    toast = json.loads(response["HX-Trigger"])["lw:toast"]
    assert toast["kind"] == "error"
    assert "breaker trip" in toast["message"]
    task.refresh_from_db()
    assert task.loop_label == ""
    assert not Event.objects.filter(task=task, kind="stop_labelled").exists()
