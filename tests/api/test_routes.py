"""The runner's four decisions are routed first: every agent step resolves one of them, and
Django tries the URL patterns in order, so each pattern before them cost every step a match."""

from __future__ import annotations

from django.urls import resolve

RUNNER_PATHS = {
    "api-model-calls": "/api/v1/tasks/7b0c6c52-3f0e-4c7a-9d1e-2f4b8a6c0d11/model-calls",
    "api-usage": "/api/v1/tasks/7b0c6c52-3f0e-4c7a-9d1e-2f4b8a6c0d11/model-calls/12/usage",
    "api-tool-calls": "/api/v1/tasks/7b0c6c52-3f0e-4c7a-9d1e-2f4b8a6c0d11/tool-calls",
    "api-result": "/api/v1/tasks/7b0c6c52-3f0e-4c7a-9d1e-2f4b8a6c0d11/tool-calls/12/result",
}


def test_the_runner_decisions_are_the_apis_first_routes():
    for name, path in RUNNER_PATHS.items():
        match = resolve(path)
        assert match.url_name == name
        # The API's patterns tried on the way, the match included.
        tried = [t for t in match.tried if str(t[0].pattern) == "api/v1/"]
        assert len(tried) <= len(RUNNER_PATHS), (name, [str(t[-1].pattern) for t in tried])


def test_the_other_task_routes_still_resolve():
    task = "7b0c6c52-3f0e-4c7a-9d1e-2f4b8a6c0d11"
    assert resolve("/api/v1/tasks").url_name == "api-tasks"
    assert resolve(f"/api/v1/tasks/{task}").url_name == "api-task"
    assert resolve(f"/api/v1/tasks/{task}/trace").url_name == "api-trace"
    assert resolve(f"/api/v1/tasks/{task}/finish").url_name == "api-finish"
