"""A task's "Next step" follows the ledger as it is now, not as it was when the task stopped.

The stop report is stored once and never changes; the next step is the guard's own
`resume_condition` asked again with the operations' current states.
"""

from __future__ import annotations

import html
import re

from tests.console.test_reconcile import form


def next_step(page: str) -> str:
    match = re.search(r'<p class="next-step"><b>Next step:</b>(.*?)</p>', page, re.S)
    assert match, "no next step on the page"
    return html.unescape(match.group(1)).strip()


def test_before_the_reconcile_the_next_step_is_to_reconcile(as_operator, lost_write):
    page = as_operator.get(f"/tasks/{lost_write.task.pk}/").content.decode()

    assert next_step(page).startswith("Reconcile operation pay-INV-42")


def test_after_a_reconcile_the_next_step_no_longer_says_to_reconcile(as_operator, lost_write):
    op = lost_write.operation
    as_operator.post(
        f"/reconcile/{op.pk}/", form(op, verdict="NOT_COMMITTED", note="no charge at the PSP")
    )

    page = as_operator.get(f"/tasks/{lost_write.task.pk}/").content.decode()

    step = next_step(page)
    assert "reconcile" not in step.lower(), step
    assert "may resume" in step
    # the stored report keeps what was true at the stop
    lost_write.task.refresh_from_db()
    assert "Reconcile" in lost_write.task.report["resume_condition"]


def test_the_live_panel_says_the_same(as_operator, lost_write):
    op = lost_write.operation
    as_operator.post(f"/reconcile/{op.pk}/", form(op, verdict="COMMITTED", note="paid"))

    live = as_operator.get(f"/tasks/{lost_write.task.pk}/live/").content.decode()

    assert "reconcile" not in next_step(live).lower()
