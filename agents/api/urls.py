from __future__ import annotations

from django.urls import path, re_path
from drf_spectacular.views import SpectacularSwaggerView

from agents.api import fallback, schema
from agents.api import operator_views as o
from agents.api import views as v

urlpatterns = [
    # The runner's four decisions first: every agent step resolves one of them, and Django tries
    # the patterns in order (none of these overlaps another: `<str:...>` stops at a slash).
    path("tasks/<str:task_id>/model-calls", v.ModelCallGate.as_view(), name="api-model-calls"),
    path(
        "tasks/<str:task_id>/model-calls/<str:model_call_id>/usage",
        v.ModelCallUsage.as_view(),
        name="api-usage",
    ),
    path("tasks/<str:task_id>/tool-calls", v.ToolCallRequest.as_view(), name="api-tool-calls"),
    path(
        "tasks/<str:task_id>/tool-calls/<str:tool_call_id>/result",
        v.ToolCallResult.as_view(),
        name="api-result",
    ),
    path("tasks", v.TaskList.as_view(), name="api-tasks"),
    path("tasks/<str:task_id>", v.TaskDetail.as_view(), name="api-task"),
    path("tasks/<str:task_id>/trace", v.TaskTrace.as_view(), name="api-trace"),
    path("tasks/<str:task_id>/finish", v.TaskFinish.as_view(), name="api-finish"),
    path("tasks/<str:task_id>/stop", v.TaskStop.as_view(), name="api-stop"),
    path("tasks/<str:task_id>/resume", v.TaskResume.as_view(), name="api-resume"),
    path("tasks/<str:task_id>/limits", v.TaskLimits.as_view(), name="api-limits"),
    path("operations", o.OperationList.as_view(), name="api-operations"),
    path("operations/<str:operation_id>", o.OperationDetail.as_view(), name="api-operation"),
    path(
        "operations/<str:operation_id>/reconcile",
        o.OperationReconcile.as_view(),
        name="api-reconcile",
    ),
    path("agents/<str:name>", o.AgentDetail.as_view(), name="api-agent"),
    path("agents/<str:name>/pause", o.AgentPause.as_view(), name="api-agent-pause"),
    path("agents/<str:name>/unpause", o.AgentUnpause.as_view(), name="api-agent-unpause"),
    path("profiles", o.ProfileList.as_view(), name="api-profiles"),
    path("profiles/<str:name>", o.ProfileDetail.as_view(), name="api-profile"),
    path("audit", o.AuditList.as_view(), name="api-audit"),
    path("schema/", schema.SchemaView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    # Last: a trailing slash is served like none; any other path answers a JSON 404.
    re_path(r"^(?P<path>.*)$", fallback.unrouted, name="api-unrouted"),
]
