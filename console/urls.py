from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.contrib.staticfiles.views import serve as serve_static
from django.urls import path, re_path

from console import views, views_admin, views_audit, views_ledger

urlpatterns = [
    path(
        "login/",
        auth_views.LoginView.as_view(
            template_name="console/login.html", redirect_authenticated_user=True
        ),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", views.dashboard, name="dashboard"),
    path("tasks/<uuid:task_id>/", views.task_detail, name="task"),
    path("tasks/<uuid:task_id>/live/", views.task_live, name="task-live"),
    path("tasks/<uuid:task_id>/timeline/", views.task_timeline, name="task-timeline"),
    path("tasks/<uuid:task_id>/report.json", views.task_report, name="task-report"),
    path("tasks/<uuid:task_id>/stop/", views.task_stop, name="task-stop"),
    path("tasks/<uuid:task_id>/resume/", views.task_resume, name="task-resume"),
    path("tasks/<uuid:task_id>/limits/", views.task_limits, name="task-limits"),
    path("reconcile/", views_ledger.reconcile_queue, name="reconcile"),
    path(
        "reconcile/<int:operation_id>/",
        views_ledger.operation_reconcile,
        name="operation-reconcile",
    ),
    path("audit/", views_audit.audit_log, name="audit"),
    path("limits/", views_admin.limits_index, name="limits"),
    path("limits/profiles/new/", views_admin.profile_new, name="profile-new"),
    path("limits/profiles/<slug:name>/", views_admin.profile_edit, name="profile-edit"),
    path("agents/", views_admin.agents_index, name="agents"),
    path("agents/<slug:name>/pause/", views_admin.agent_pause, name="agent-pause"),
    path("agents/<slug:name>/unpause/", views_admin.agent_unpause, name="agent-unpause"),
    path("agents/<slug:name>/tokens/", views_admin.token_issue, name="token-issue"),
    path(
        "agents/<slug:name>/tokens/<int:token_id>/revoke/",
        views_admin.token_revoke,
        name="token-revoke",
    ),
    # The console's own three files (htmx, its CSS and script), served by Django when nothing
    # in front does, so the console works under gunicorn without DEBUG or a collectstatic step.
    # A front server or whitenoise that serves /static/ first makes this unused.
    re_path(r"^static/(?P<path>.*)$", serve_static, {"insecure": True}),
]

# The daily report (background jobs build its rows).
from console import views_reports  # noqa: E402

urlpatterns += [
    path("reports/daily/", views_reports.daily_report, name="reports"),
    path("reports/daily.csv", views_reports.daily_report_csv, name="reports-csv"),
]
