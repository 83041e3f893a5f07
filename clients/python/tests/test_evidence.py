"""Malformed evidence is refused where it is written, naming the field, before it is sent."""

from __future__ import annotations

import pytest
from loopwarden_client import InvalidEvidence, Plan, TaskStopped, ToolReport
from scenarios import tool_decisions


@pytest.mark.parametrize(
    ("evidence", "named"),
    [
        ({"revision": 0}, "evidence['done'] is missing"),
        ({"done": True}, "evidence['revision'] is missing"),
        ({"revision": True, "done": True}, "evidence['revision'] must be an int, not True"),
        ({"revision": -1, "done": False}, "evidence['revision'] must be at least"),
        ({"revision": 1, "done": "yes"}, "evidence['done'] must be a bool, not 'yes'"),
        ({"revision": 1, "done": False, "committed": 1}, "evidence['committed'] must be a bool"),
        ({"revision": 1, "done": False, "milestone": 2}, "evidence['milestone'] must be a str"),
        ("verified", "evidence must be an object, not str"),
    ],
)
def test_a_tool_report_and_a_plan_refuse_malformed_evidence_naming_the_field(evidence, named):
    with pytest.raises(InvalidEvidence, match=named.replace("[", r"\[")):
        ToolReport(data="page 1", evidence=evidence)
    with pytest.raises(InvalidEvidence, match=named.replace("[", r"\[")):
        Plan(done=True, evidence=evidence)


def test_well_formed_evidence_is_taken_as_it_is():
    evidence = {"revision": 2, "done": False, "committed": True, "milestone": "paid"}
    assert ToolReport(data=1, evidence=evidence).evidence == evidence


def test_finish_refuses_malformed_evidence_before_anything_is_sent(lw):
    session = lw.session(lw.create_task("finish with a typo")["id"])
    with pytest.raises(InvalidEvidence, match=r"evidence\['done'\] is missing"):
        session.finish(evidence={"revision": 0})
    assert lw.get_task(session.task_id)["state"] == "RUNNING"


def test_a_verifiers_malformed_evidence_is_the_cause_named_by_the_stop(lw):
    session = lw.session(lw.create_task("verifier with a typo")["id"])
    with pytest.raises(TaskStopped) as caught:
        session.tool("lookup", {"id": 1}, lambda a: "row 1", inspect=lambda d: {"revision": 0})
    assert isinstance(caught.value.__cause__, InvalidEvidence)
    assert "evidence['done'] is missing" in str(caught.value.__cause__)
    assert tool_decisions(lw, session.task_id) == ["EXECUTE"]
