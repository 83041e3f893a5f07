"""The two console roles as Django groups, and what each may do."""

from __future__ import annotations

OPERATORS = "operators"
ADMINS = "admins"

OPERATOR_PERMS = [
    "agents.view_task",
    "agents.stop_task",
    "agents.resume_task",
    "agents.view_agent",
    # The kill switch: the people watching the tasks stop a runaway agent without an admin.
    "agents.pause_agent",
    "agents.view_limitprofile",
    "agents.view_event",
    "ledger.view_operation",
    "ledger.reconcile_operation",
]
ADMIN_PERMS = OPERATOR_PERMS + [
    "agents.change_task_limits",
    "agents.add_limitprofile",
    "agents.change_limitprofile",
    "agents.delete_limitprofile",
    "agents.manage_tokens",
    "agents.add_agent",
    "agents.change_agent",
    "agents.view_toolpolicy",
    "agents.add_toolpolicy",
    "agents.change_toolpolicy",
    "agents.view_modelprice",
    "agents.add_modelprice",
    "agents.change_modelprice",
    # Sign-in lockouts (django-axes' failure rows): see them, lift them.
    "axes.view_accessattempt",
    "axes.delete_accessattempt",
]


def ensure_groups():
    """Create or refresh the groups. Idempotent; called by migrations and commands."""
    from django.contrib.auth.models import Group, Permission

    for name, perms in ((OPERATORS, OPERATOR_PERMS), (ADMINS, ADMIN_PERMS)):
        group, _ = Group.objects.get_or_create(name=name)
        wanted = []
        for dotted in perms:
            app_label, codename = dotted.split(".")
            wanted.extend(
                Permission.objects.filter(content_type__app_label=app_label, codename=codename)
            )
        group.permissions.set(wanted)
