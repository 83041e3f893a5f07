"""The configuration only admins change: limit profiles, the profiles each agent may use, and
agents' API tokens. (Django's own admin site is `agents/admin.py`.)

The console and the REST API both call these, so a profile is validated by the same limit
rules (the guard core's `validate_limits`) and every change writes its audit event in the same
transaction, whichever door it came through.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, cast

from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import IntegrityError, transaction
from django.utils import timezone

from agents.errors import BadInput, Conflict, NotFound
from agents.guard import core, registry, terms
from agents.models import Agent, ApiToken, Event, EventKind, LimitProfile
from agents.services.operator import actor_name

# Limit fields a task copies, plus those only a profile has (its trigger rate).
PROFILE_LIMIT_FIELDS = tuple(spec.name for spec in registry.LIMITS)
PROFILE_FIELDS = ("name", "description", *PROFILE_LIMIT_FIELDS)
# cast: django-stubs types max_length as optional; these CharFields all set it.
NAME_MAX = cast(int, LimitProfile._meta.get_field("name").max_length)
DESCRIPTION_MAX = cast(int, LimitProfile._meta.get_field("description").max_length)
TOKEN_NAME_MAX = cast(int, ApiToken._meta.get_field("name").max_length)


def _jsonable(value: Any) -> Any:
    return str(value) if isinstance(value, Decimal) else value


def _profile_values(profile: LimitProfile) -> dict[str, Any]:
    return {name: _jsonable(getattr(profile, name)) for name in PROFILE_FIELDS}


def validate_profile(values: dict[str, Any], *, creating: bool) -> dict[str, Any]:
    """The one profile validator: clean values, or BadInput BAD_PROFILE naming every bad field
    at once, so a form can show all its errors together.

    Every door reaches it through `profile_save`: the console's form hands over text as typed,
    the API's `ProfileIn` only checks the JSON envelope (types, and the bounds its schema
    states, read from the same constants). The limits follow the guard core's rules.
    """
    if not isinstance(values, dict):
        raise BadInput(
            "The profile is not valid.", code="BAD_PROFILE", fields={"profile": "object"}
        )
    errors: dict[str, str] = {}
    unknown = sorted(set(values) - set(PROFILE_FIELDS))
    for field in unknown:
        errors[field] = "Unknown field."
    clean: dict[str, Any] = {}
    if creating or "name" in values:
        name = values.get("name")
        try:
            if not isinstance(name, str) or not name:
                raise ValidationError("required")
            validate_slug(name)
            if len(name) > NAME_MAX:
                raise ValidationError("too long")
            clean["name"] = name
        except ValidationError:
            errors["name"] = (
                f"Required: letters, numbers, hyphens or underscores (at most {NAME_MAX})."
            )
    if "description" in values:
        description = values["description"] or ""
        if not isinstance(description, str) or len(description) > DESCRIPTION_MAX:
            errors["description"] = f"Text of at most {DESCRIPTION_MAX} characters."
        else:
            clean["description"] = description
    limits = {k: v for k, v in values.items() if k in PROFILE_LIMIT_FIELDS}
    try:
        clean.update(core.validate_limits(limits, partial=True, profile=True))
    except terms.LimitError as exc:
        errors.update(exc.fields)
    if errors:
        raise BadInput("The profile is not valid.", code="BAD_PROFILE", fields=errors)
    return clean


def _name_taken() -> Conflict:
    return Conflict(
        "A profile with this name exists.",
        code="PROFILE_EXISTS",
        fields={"name": "A profile with this name already exists."},
    )


def _locked_profile(name: str) -> LimitProfile:
    """The profile called `name`, locked FOR UPDATE; 404 PROFILE_NOT_FOUND if there is none."""
    try:
        return LimitProfile.objects.select_for_update().get(name=name)
    except LimitProfile.DoesNotExist:
        raise NotFound("No such profile.", code="PROFILE_NOT_FOUND") from None


def profile_save(*, user, values: dict[str, Any], name: str | None = None) -> LimitProfile:
    """Create a limit profile (`name` None) or change the one called `name`.

    Validated with the guard's limit rules; a bad field changes nothing. Changing locks the
    profile row so two admins editing at once both land in the audit log in order. Tasks
    already created keep the limits they copied: a profile change affects new tasks only.
    """
    clean = validate_profile(values, creating=name is None)
    actor = actor_name(user)
    with transaction.atomic():
        new_name = clean.get("name")
        if new_name and new_name != name and LimitProfile.objects.filter(name=new_name).exists():
            raise _name_taken()
        if name is None:
            try:
                with transaction.atomic():
                    profile = LimitProfile.objects.create(**clean)
                profile.refresh_from_db()  # the values as stored (money to six places)
            except IntegrityError:  # a racing create of the same name won
                raise _name_taken() from None
            Event.objects.create(
                kind=EventKind.PROFILE_CREATED, actor=actor, actor_user=user, reason=profile.name,
                detail={"profile": profile.name, "fields": _profile_values(profile)},
            )  # fmt: skip
            return profile
        profile = _locked_profile(name)
        before = _profile_values(profile)
        for field, value in clean.items():
            setattr(profile, field, value)
        try:
            with transaction.atomic():
                profile.save()
        except IntegrityError:  # a racing rename to the same name won
            raise _name_taken() from None
        profile.refresh_from_db()
        after = _profile_values(profile)
        changes = {
            k: {"before": before[k], "after": after[k]} for k in after if before[k] != after[k]
        }
        Event.objects.create(
            kind=EventKind.PROFILE_CHANGED, actor=actor, actor_user=user, reason=profile.name,
            detail={"profile": profile.name, "changes": changes},
        )  # fmt: skip
    return profile


def token_issue(*, agent_name: str, user, name: str = "") -> tuple[ApiToken, str]:
    """Issue a new API token for an agent. Returns the row and the raw token.

    Only the hash is stored; the raw token exists in this return value and nowhere else, so
    the caller shows it once. Older tokens of the agent stay valid until revoked.
    """
    name = (name or "").strip()
    if len(name) > TOKEN_NAME_MAX:
        raise BadInput(
            "The token name is too long.",
            code="BAD_TOKEN_NAME",
            fields={"name": f"At most {TOKEN_NAME_MAX} characters."},
        )
    with transaction.atomic():
        try:
            agent = Agent.objects.get(name=agent_name)
        except Agent.DoesNotExist:
            raise NotFound("No such agent.", code="AGENT_NOT_FOUND") from None
        raw, key_hash, prefix = ApiToken.generate()
        token = ApiToken.objects.create(agent=agent, key_hash=key_hash, prefix=prefix, name=name)
        Event.objects.create(
            agent=agent, kind=EventKind.TOKEN_ISSUED, actor=actor_name(user), actor_user=user,
            reason=name, detail={"token": token.pk, "prefix": prefix},
        )  # fmt: skip
    return token, raw


def token_revoke(
    *, token_id: int, user, agent_name: str | None = None, reason: str = ""
) -> tuple[ApiToken, bool]:
    """Revoke an API token: the next request with it answers 401. Locks the token row.
    Returns the token and whether this call revoked it.

    Idempotent: revoking a revoked token changes nothing and logs nothing. With `agent_name`,
    a token of another agent is answered like a missing one.
    """
    with transaction.atomic():
        query = ApiToken.objects.select_for_update()
        if agent_name is not None:
            query = query.filter(agent__name=agent_name)
        try:
            token = query.get(pk=token_id)
        except (ApiToken.DoesNotExist, ValueError):
            raise NotFound("No such token.", code="TOKEN_NOT_FOUND") from None
        if token.revoked_at is not None:
            return token, False
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        Event.objects.create(
            agent_id=token.agent_id, kind=EventKind.TOKEN_REVOKED, actor=actor_name(user),
            actor_user=user, reason=reason,
            detail={"token": token.pk, "prefix": token.prefix,
                    "owner": f"agent:{token.agent.name}" if token.agent is not None
                    # ignore: the check constraint gives a token without an agent a user.
                    else f"user:{token.user.get_username()}"},  # type: ignore[union-attr]
        )  # fmt: skip
    return token, True


def profile_delete(*, user, name: str) -> None:
    """Delete a limit profile. Tasks keep the limits they copied; the link of every task and
    agent that named it is cleared, and the agents it was granted to lose the grant.

    Locks in the order everything that points at a profile does: first the agents whose
    default it is (task creation locks its agent first too), then the profile itself, which
    waits for every transaction holding it (`LimitProfile.objects.held`) and makes the next
    ones wait. So the links cleared are all there will ever be, and a creation or grant that
    comes after finds no such profile: nothing breaks a foreign key on the way.
    """
    with transaction.atomic():
        list(Agent.objects.select_for_update().filter(default_profile__name=name).order_by("pk"))
        profile = _locked_profile(name)
        Event.objects.create(
            kind=EventKind.PROFILE_DELETED, actor=actor_name(user), actor_user=user,
            reason=profile.name, detail={},
        )  # fmt: skip
        profile.delete()


def agent_set_allowed_profiles(
    *, name: str, profiles: list[str] | None, user, reason: str = ""
) -> Agent:
    """Replace the profiles an admin granted the agent (its default is always allowed);
    `profiles` None (a partial update that names none) keeps them as they are.

    Locks the agent row, the one task creation locks too, so a creation sees the grant as it
    was before or after the change, never half of it. Every name must be an existing profile;
    an unknown one changes nothing. Writes the audit event in the same transaction.
    """
    with transaction.atomic():
        try:
            agent = Agent.objects.select_for_update().get(name=name)
        except Agent.DoesNotExist:
            raise NotFound("No such agent.", code="AGENT_NOT_FOUND") from None
        if profiles is None:
            return agent
        wanted = list(dict.fromkeys(profiles))
        found = {p.name: p for p in LimitProfile.objects.filter(name__in=wanted).held()}
        unknown = [n for n in wanted if n not in found]
        if unknown:
            raise BadInput(
                f"No limit profile named {', '.join(repr(n) for n in unknown)}.",
                code="UNKNOWN_PROFILE",
                fields={"allowed_profiles": f"unknown: {', '.join(unknown)}"},
            )
        before = sorted(agent.allowed_profiles.values_list("name", flat=True))
        agent.allowed_profiles.set(found.values())
        after = sorted(found)
        if before != after:
            Event.objects.create(
                agent=agent, kind=EventKind.AGENT_PROFILES_CHANGED, actor=actor_name(user),
                actor_user=user, reason=reason,
                detail={"before": before, "after": after},
            )  # fmt: skip
    return agent
