"""Labelling a stop "real loop" / "false stop", and loop_eval --from-db replaying the labels."""

from __future__ import annotations

import io
import json

from django.core.management import call_command

from agents.models import Event


def test_an_operator_labels_a_stopped_task_and_the_label_is_audited(as_operator, stopped_task):
    page = as_operator.get(f"/tasks/{stopped_task.pk}/").content.decode()
    assert f'action="/tasks/{stopped_task.pk}/label/"' in page

    response = as_operator.post(f"/tasks/{stopped_task.pk}/label/", {"label": "real_loop"})

    assert response.status_code == 303
    stopped_task.refresh_from_db()
    assert stopped_task.loop_label == "real_loop"
    event = Event.objects.get(task=stopped_task, kind="stop_labelled")
    assert (event.actor, event.detail["label"]) == ("user:olivia", "real_loop")
    page = as_operator.get(f"/tasks/{stopped_task.pk}/").content.decode()
    assert "Labelled: <b>real loop</b>" in page


def test_a_running_task_cannot_be_labelled(as_operator, looping_task):
    as_operator.post(f"/tasks/{looping_task.pk}/label/", {"label": "false_stop"})
    looping_task.refresh_from_db()
    assert looping_task.loop_label == ""
    assert not Event.objects.filter(task=looping_task, kind="stop_labelled").exists()


def test_an_unknown_label_changes_nothing(as_operator, stopped_task):
    as_operator.post(f"/tasks/{stopped_task.pk}/label/", {"label": "maybe"})
    stopped_task.refresh_from_db()
    assert stopped_task.loop_label == ""


def test_a_refused_label_is_shown_as_an_error_not_a_success(as_operator, stopped_task):
    response = as_operator.post(
        f"/tasks/{stopped_task.pk}/label/", {"label": "maybe"}, HTTP_HX_REQUEST="true"
    )

    toast = json.loads(response["HX-Trigger"])["lw:toast"]
    assert toast["kind"] == "error"
    assert "real_loop or false_stop" in toast["message"]


def test_an_outsider_may_not_label(as_outsider, stopped_task):
    response = as_outsider.post(f"/tasks/{stopped_task.pk}/label/", {"label": "real_loop"})
    assert response.status_code == 403
    stopped_task.refresh_from_db()
    assert stopped_task.loop_label == ""


def test_loop_eval_from_db_replays_the_labelled_stops(as_operator, stopped_task, tmp_path):
    as_operator.post(f"/tasks/{stopped_task.pk}/label/", {"label": "false_stop"})
    out = io.StringIO()

    call_command("loop_eval", "--from-db", "--chart", str(tmp_path / "c.svg"), stdout=out)

    text = out.getvalue()
    assert "1 traces from labelled tasks in the database: 0 loops, 1 legitimate" in text
    assert "lexical        0.50" in text


def test_the_report_page_advises_the_recommended_threshold(as_operator, stopped_task):
    from django.core.cache import cache

    cache.clear()
    page = as_operator.get("/reports/daily/").content.decode()

    assert "near_duplicate_threshold</span> to <strong>0.50</strong>" in page
    assert "0 stops operators labelled" in page

    as_operator.post(f"/tasks/{stopped_task.pk}/label/", {"label": "real_loop"})
    page = as_operator.get("/reports/daily/").content.decode()
    assert "1 stops operators labelled" in page
