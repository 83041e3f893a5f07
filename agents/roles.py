"""The two console roles as Django groups, and what each may do."""

from __future__ import annotations

OPERATORS = "operators"
ADMINS = "admins"

# Every permission the API and the console check, by name.
VIEW_TASK = "agents.view_task"
STOP_TASK = "agents.stop_task"
RESUME_TASK = "agents.resume_task"
CHANGE_TASK_LIMITS = "agents.change_task_limits"
VIEW_OPERATION = "ledger.view_operation"
RECONCILE = "ledger.reconcile_operation"
VIEW_EVENT = "agents.view_event"
VIEW_AGENT = "agents.view_agent"
ADD_AGENT = "agents.add_agent"
CHANGE_AGENT = "agents.change_agent"
PAUSE_AGENT = "agents.pause_agent"  # the kill switch
MANAGE_TOKENS = "agents.manage_tokens"
VIEW_PROFILE = "agents.view_limitprofile"
ADD_PROFILE = "agents.add_limitprofile"
CHANGE_PROFILE = "agents.change_limitprofile"
DELETE_PROFILE = "agents.delete_limitprofile"
VIEW_TOOL_POLICY = "agents.view_toolpolicy"
ADD_TOOL_POLICY = "agents.add_toolpolicy"
CHANGE_TOOL_POLICY = "agents.change_toolpolicy"
VIEW_MODEL_PRICE = "agents.view_modelprice"
ADD_MODEL_PRICE = "agents.add_modelprice"
CHANGE_MODEL_PRICE = "agents.change_modelprice"
# Sign-in lockouts (django-axes' failure rows): see them, lift them.
VIEW_SIGNIN_LOCKOUTS = "axes.view_accessattempt"
UNLOCK_SIGNIN = "axes.delete_accessattempt"

OPERATOR_PERMS = [
    VIEW_TASK,
    STOP_TASK,
    RESUME_TASK,
    VIEW_AGENT,
    # The kill switch: the people watching the tasks stop a runaway agent without an admin.
    PAUSE_AGENT,
    VIEW_PROFILE,
    VIEW_EVENT,
    VIEW_OPERATION,
    RECONCILE,
]
ADMIN_PERMS = OPERATOR_PERMS + [
    CHANGE_TASK_LIMITS,
    ADD_PROFILE,
    CHANGE_PROFILE,
    DELETE_PROFILE,
    MANAGE_TOKENS,
    ADD_AGENT,
    CHANGE_AGENT,
    VIEW_TOOL_POLICY,
    ADD_TOOL_POLICY,
    CHANGE_TOOL_POLICY,
    VIEW_MODEL_PRICE,
    ADD_MODEL_PRICE,
    CHANGE_MODEL_PRICE,
    VIEW_SIGNIN_LOCKOUTS,
    UNLOCK_SIGNIN,
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
