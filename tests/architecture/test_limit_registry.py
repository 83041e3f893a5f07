"""A limit is one entry of agents/guard/registry.py: every place that names limits derives from
it, so adding one touches the registry and a migration only (ARCHITECTURE.md, "Adding a
limit")."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from agents.api import responses, serializers
from agents.guard import lifecycle, registry, report, terms
from agents.models import LimitProfile
from agents.reports import USAGE
from agents.services.configuration import PROFILE_LIMIT_FIELDS
from console import budgets, words
from console.forms import ProfileForm, ResumeForm, TaskLimitsForm

ROOT = Path(__file__).resolve().parents[2]
NAMES = {spec.name for spec in registry.LIMITS}
TASK_NAMES = {spec.name for spec in registry.TASK_LIMITS}
GRANTS = {spec.grant for spec in registry.GRANTS}


def test_every_place_that_names_limits_names_every_limit_of_the_registry():
    assert set(terms.Limits.names()) == TASK_NAMES
    assert {f.name for f in LimitProfile._meta.get_fields()} >= NAMES
    assert set(PROFILE_LIMIT_FIELDS) == NAMES
    assert set(serializers.LimitsIn().fields) == TASK_NAMES
    assert set(serializers.ProfileIn().fields) == NAMES | {"name", "description"}
    assert set(responses.Limits().fields) == TASK_NAMES
    assert set(words.LIMIT_WORDS) == NAMES
    assert set(TaskLimitsForm(limits={}).fields) == TASK_NAMES | {"reason"}
    assert set(ProfileForm(creating=True).fields) >= NAMES


def test_the_design_table_lists_every_limit_with_its_default():
    text = (ROOT / "docs/DESIGN.md").read_text()
    section = text[text.index("## 5. Limits") : text.index("## 6.")]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if line.startswith("| ") and cells[0] in registry.BY_NAME:
            rows[cells[0]] = cells[1]

    assert rows == {
        spec.name: "null" if spec.default is None else str(spec.default) for spec in registry.LIMITS
    }


def test_every_grant_is_a_limits_grant_and_measured_where_it_is_shown():
    assert set(lifecycle.GRANT_LIMITS) == GRANTS
    assert set(report.BUDGET_GRANTS.values()) == GRANTS
    assert set(report.BUDGET_GRANTS) <= set(terms.REASONS)
    assert {key for key, *_ in words.GRANTS} == GRANTS
    assert set(ResumeForm().fields) == GRANTS | {"reason"}
    measured = {spec.grant for spec in registry.GRANTS if spec.usage != registry.CLOCK}
    assert set(responses.Usage().fields) == measured
    assert set(responses.Remaining().fields) == {s.grant for s in registry.GRANTS if s.remaining}
    assert {limit for limit, _usage in USAGE} == {s.name for s in registry.LIMITS if s.advised}


def test_the_bars_are_the_limits_measured_by_a_counter(make_task):
    shown = {gauge.key for gauge in budgets.bars(make_task())}

    assert shown == {spec.grant or spec.usage for spec in registry.TASK_LIMITS if spec.usage}


NEW_LIMIT = """
    max_handoffs: int = limit(
        COUNT, 7, label="Handoffs to another agent", minimum=1,
        help="Handoffs to another agent (default {default}).",
    )  # fmt: skip
"""

PROBE = """
import django
django.setup()
from io import StringIO
from django.core.management import call_command
from agents.api import responses, serializers
from agents.guard import core, terms
from agents.models import LimitProfile
from console import words
from console.forms import TaskLimitsForm

out = StringIO()
call_command("makemigrations", "agents", "--dry-run", stdout=out)
print("MIGRATION", [l.strip() for l in out.getvalue().splitlines() if l.strip()[:1] in "+-~"])
print("DEFAULT", terms.Limits().max_handoffs, LimitProfile._meta.get_field("max_handoffs").default)
print("API", serializers.LimitsIn().fields["max_handoffs"].min_value,
      "max_handoffs" in responses.Limits().fields)
print("WORDS", words.LIMIT_WORDS["max_handoffs"],
      TaskLimitsForm(limits={}).fields["max_handoffs"].label)
for requested in ({"max_handoffs": 0}, {"max_handoffs": 8}):
    try:
        core.tighten_limits(terms.Limits(), requested)
    except terms.LimitError as exc:
        print("REFUSED", exc.fields["max_handoffs"])
print("TIGHTER", core.tighten_limits(terms.Limits(), {"max_handoffs": 3}).max_handoffs)
"""


def test_adding_a_limit_to_a_copy_of_the_registry_needs_one_migration_and_nothing_else(
    tmp_path,
):
    copy = tmp_path / "repo"
    copy.mkdir()
    for name in ("agents", "console", "ledger", "loopwarden", "templates", "static"):
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "manage.py", copy / "manage.py")
    path = copy / "agents" / "guard" / "registry.py"
    source = path.read_text()
    anchor = "\n    @classmethod\n    def names(cls)"
    assert anchor in source
    path.write_text(source.replace(anchor, NEW_LIMIT + anchor, 1))
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "loopwarden.settings",
        "LOOPWARDEN_DATA_DIR": str(tmp_path / "var"),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'probe.sqlite3'}",
        "PYTHONPATH": str(copy),
    }
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROBE)],
        cwd=copy, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "MIGRATION ['+ Add field max_handoffs to limitprofile']"
    assert lines[1:] == [
        "DEFAULT 7 7",
        "API 1 True",
        "WORDS Handoffs to another agent Handoffs to another agent",
        "REFUSED Must be at least 1.",
        "REFUSED May only be lowered (profile allows 7).",
        "TIGHTER 3",
    ]
