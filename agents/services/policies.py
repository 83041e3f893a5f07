"""Tool policy changes made from the console (the Django admin edits the rest)."""

from __future__ import annotations

from typing import cast

from django.db import transaction

from agents.db import storable
from agents.errors import BadInput
from agents.models import Event, EventKind, ToolPolicy
from agents.services.operator import actor_name

# The longest tool name, as the API holds it.
TOOL_MAX = cast(int, ToolPolicy._meta.get_field("tool").max_length)


def tool_policy_ignore_result_fields(
    *, tool: str, keys: list[str], user, reason: str = ""
) -> ToolPolicy:
    """Add `keys` to the tool's `ignore_result_fields` (the advisor's proposal, applied).

    Locks the tool policy row (creating it with the defaults when the tool has none), so two
    admins applying at once both land, in order, in the audit log; the audit event is written in
    the same transaction. Keys already ignored are kept once; nothing new, nothing logged. The
    next result of the tool is hashed without them; results already judged stay as judged.
    """
    wanted = [k for k in dict.fromkeys(keys) if isinstance(k, str) and k.strip()]
    if not tool or not wanted:
        raise BadInput(
            "Name the tool and at least one result field.",
            code="BAD_RESULT_FIELDS",
            fields={"keys": "At least one field path."},
        )
    fields: dict[str, str] = {}
    if len(tool) > TOOL_MAX:
        fields["tool"] = f"The tool's name is longer than {TOOL_MAX} characters."
    for name, what, text in [("tool", "The tool's name", tool),
                             *(("keys", "A result field", key) for key in wanted)]:  # fmt: skip
        found = storable.unstorable(text)
        if found is not None and name not in fields:
            fields[name] = f"{what} holds {found}, which the database cannot hold."
    if fields:
        raise BadInput(
            " ".join(fields.values()) + " Nothing changed.",
            code="BAD_RESULT_FIELDS",
            fields=fields,
        )
    with transaction.atomic():
        policy, _created = ToolPolicy.objects.get_or_create(tool=tool)
        policy = ToolPolicy.objects.select_for_update().get(pk=policy.pk)
        before = list(policy.ignore_result_fields or [])
        after = before + [k for k in wanted if k not in before]
        if after == before:
            return policy
        policy.ignore_result_fields = after
        policy.save(update_fields=["ignore_result_fields", "updated_at"])
        Event.objects.create(
            kind=EventKind.TOOL_POLICY_CHANGED, actor=actor_name(user), actor_user=user,
            reason=reason or f"ignore_result_fields for {tool}",
            detail={"tool": tool, "field": "ignore_result_fields",
                    "before": before, "after": after},
        )  # fmt: skip
    return policy
