"""The monitoring files in deploy/ (Prometheus rules, a Grafana dashboard) name only the metrics
/metrics really serves, and promtool accepts the rules and their unit tests.

The names are checked against a real scrape after real decisions, a trip and the sweeps, so a
metric renamed in agents/metrics.py breaks this test, not a page at three in the morning.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from agents import jobs
from tests.api.helpers import evidence, execute, finish, gate, new_task, request_tool, settle
from tests.metrics.exposition import TOKEN, parse

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "loopwarden-rules.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "loopwarden-rules.test.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "loopwarden-dashboard.json"

# What a PromQL expression may say that is not a metric: operators and modifiers.
PROMQL_KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan", "Inf", "NaN"}


def promql_names(expr: str) -> set[str]:
    """The metric (or recorded series) names one PromQL expression reads.

    Drops what is not a name: strings, label matchers, ranges, grouping label lists, numbers
    and durations, and words followed by `(` (functions and aggregations).
    """
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', " ", expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    words = re.finditer(r"(?<![\w.$])[A-Za-z_:][A-Za-z0-9_:]*(?![\w:]|\s*\()", text)
    return {word.group() for word in words} - PROMQL_KEYWORDS


@pytest.fixture
def exported(client, settings, agent_api) -> set[str]:
    """The sample names of a real /metrics answer once every kind of series has a sample:
    timed decisions, a stop that completes, a trip, and a run of each sweep."""
    settings.METRICS_TOKEN, settings.METRICS_ALLOWED_ADDRESSES = TOKEN, ()
    done = new_task(agent_api)["id"]
    settle(agent_api, done, gate(agent_api, done)["model_call"])
    execute(agent_api, done, "search", {"q": "invoice 42"},
            result={"kind": "SUCCESS", "evidence": evidence(1)})  # fmt: skip
    finish(agent_api, done, evidence=evidence(1, done=True))
    looping = new_task(agent_api)["id"]
    for _ in range(2):
        execute(agent_api, looping, "search", {"q": "invoice 42"})
    for answer in ("BLOCK", "STOP"):  # same_call: a trip
        assert request_tool(agent_api, looping, "search", {"q": "invoice 42"})["decision"] == answer
    jobs.sweep_leases()
    jobs.sweep_deadlines()
    jobs.sweep_reservations()

    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    return parse(response.content.decode()).names()


def rule_expressions() -> dict[str, str]:
    """Each rule's expression, by the name it records or alerts as."""
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return {
        rule.get("record") or rule["alert"]: rule["expr"] for g in groups for rule in g["rules"]
    }


def recorded_series() -> set[str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return {rule["record"] for g in groups for rule in g["rules"] if "record" in rule}


def dashboard_targets() -> dict[str, list[str]]:
    """Each panel's target expressions, by panel title."""
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return {panel["title"]: [target["expr"] for target in panel["targets"]] for panel in panels}


def family(sample_name: str) -> str:
    return re.sub(r"_(bucket|count|sum)$", "", sample_name)


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('max(delta(loopwarden_tasks{state="NEEDS_HUMAN"}[1h])) >= 5', {"loopwarden_tasks"}),
        ("sum by (code) (increase(loopwarden_trip_total[10m])) > 20", {"loopwarden_trip_total"}),
        (
            "histogram_quantile(0.95, sum by (le, kind) (rate(x_bucket[$__rate_interval])))",
            {"x_bucket"},
        ),
        ("a:b:rate5m > 1e3 and on (instance) up offset 5m or absent(c)", {"a:b:rate5m", "up", "c"}),
        ('sum without (reason) (d{reason=~"same_call|fatal"}) unless e', {"d", "e"}),
    ],
)
def test_the_name_reader_finds_every_series_an_expression_reads(expr, names):
    assert promql_names(expr) == names


@pytest.mark.django_db
def test_every_rule_reads_only_exported_metrics_or_series_the_rules_record(exported):
    known = exported | recorded_series()
    assert not recorded_series() & exported
    for name, expr in rule_expressions().items():
        assert promql_names(expr), name
        assert promql_names(expr) <= known, (name, promql_names(expr) - known)


@pytest.mark.django_db
def test_every_dashboard_target_reads_only_exported_metrics(exported):
    for title, exprs in dashboard_targets().items():
        assert exprs, title
        for expr in exprs:
            assert promql_names(expr), (title, expr)
            assert promql_names(expr) <= exported, (title, promql_names(expr) - exported)


@pytest.mark.django_db
def test_the_dashboard_shows_every_metric_family_the_app_exports(exported):
    shown = {family(name) for exprs in dashboard_targets().values() for e in exprs
             for name in promql_names(e)}  # fmt: skip
    assert {family(name) for name in exported} - shown == set()


def test_the_dashboard_imports_as_one_grafana_dashboard_on_a_chosen_prometheus():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "loopwarden"
    (variable,) = dashboard["templating"]["list"]
    assert (variable["type"], variable["query"]) == ("datasource", "prometheus")
    source = {"type": "prometheus", "uid": "${" + variable["name"] + "}"}
    panels = dashboard["panels"]
    assert len({panel["id"] for panel in panels}) == len(panels)
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        assert panel["datasource"] == source, panel["title"]
        assert all(target["datasource"] == source for target in panel["targets"])
        assert len({target["refId"] for target in panel["targets"]}) == len(panel["targets"])
        at = panel["gridPos"]
        assert at["x"] + at["w"] <= 24, panel["title"]
        mine = {(x, y) for x in range(at["x"], at["x"] + at["w"])
                for y in range(at["y"], at["y"] + at["h"])}  # fmt: skip
        assert not mine & cells, f"{panel['title']} overlaps another panel"
        cells |= mine


def promtool(*args: str) -> subprocess.CompletedProcess:
    """promtool (Debian's `prometheus` package): skipped where it is absent, but CI installs it,
    so there its absence fails."""
    if shutil.which("promtool") is None:
        reason = "promtool is not on PATH: apt-get install prometheus (.ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return subprocess.run(
        ["promtool", *args], cwd=ROOT, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_promtool_accepts_the_rules():
    result = promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rule_expressions())} rules found" in result.stdout


def test_the_rules_unit_tests_pass_in_promtool():
    result = promtool("test", "rules", str(RULE_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
