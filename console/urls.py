from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.contrib.staticfiles.views import serve as serve_static
from django.urls import include, path, re_path
from django.views.decorators.cache import cache_control

from console import views, views_admin, views_audit, views_ledger, views_reports, views_signin

# The pages of one task, under tasks/<uuid:task_id>/.
task_urls = [
    path("", views.task_detail, name="task"),
    path("live/", views.task_live, name="task-live"),
    path("timeline/", views.task_timeline, name="task-timeline"),
    path("report.json", views.task_report, name="task-report"),
    path("stop/", views.task_stop, name="task-stop"),
    path("resume/", views.task_resume, name="task-resume"),
    path("label/", views.task_label, name="task-label"),
    path("limits/", views.task_limits, name="task-limits"),
]

# The actions on one agent, under agents/<slug:name>/.
agent_urls = [
    path("pause/", views_admin.agent_pause, name="agent-pause"),
    path("unpause/", views_admin.agent_unpause, name="agent-unpause"),
    path("profiles/", views_admin.agent_profiles, name="agent-profiles"),
    path("tokens/", views_admin.token_issue, name="token-issue"),
    path("tokens/<int:token_id>/revoke/", views_admin.token_revoke, name="token-revoke"),
]

urlpatterns = [
    path("login/", views_signin.SignInView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", views.dashboard, name="dashboard"),
    path("tasks/<uuid:task_id>/", include(task_urls)),
    path("reconcile/", views_ledger.reconcile_queue, name="reconcile"),
    path(
        "reconcile/<int:operation_id>/",
        views_ledger.operation_reconcile,
        name="operation-reconcile",
    ),
    path("audit/", views_audit.audit_log, name="audit"),
    path("limits/", views_admin.limits_index, name="limits"),
    # Not under limits/profiles/: "new" is a name a profile may have.
    path("limits/new-profile/", views_admin.profile_new, name="profile-new"),
    path("limits/profiles/<slug:name>/", views_admin.profile_edit, name="profile-edit"),
    path("agents/", views_admin.agents_index, name="agents"),
    path("sign-in/lockouts/", views_signin.signin_lockouts, name="signin-lockouts"),
    path("sign-in/lockouts/unlock/", views_signin.signin_unlock, name="signin-unlock"),
    path("agents/<slug:name>/", include(agent_urls)),
    # The console's own three files (htmx, its CSS and script), served by Django when nothing
    # in front does, so the console works under gunicorn without DEBUG or a collectstatic step.
    # A front server or whitenoise that serves /static/ first makes this unused.
    re_path(r"^static/(?P<path>.*)$", serve_static, {"insecure": True}),
    # Browsers ask for /favicon.ico on pages that name no icon (a JSON download, the Django
    # admin, an error page): the same file, rather than a 404 in every log.
    path(
        "favicon.ico",
        cache_control(max_age=86400, public=True)(serve_static),
        {"path": "favicon.ico", "insecure": True},
        name="favicon",
    ),
    # The daily report (background jobs build its rows).
    path("reports/daily/", views_reports.daily_report, name="reports"),
    path("reports/daily.csv", views_reports.daily_report_csv, name="reports-csv"),
    path(
        "reports/result-fields/apply/",
        views_reports.result_fields_apply,
        name="result-fields-apply",
    ),
]
