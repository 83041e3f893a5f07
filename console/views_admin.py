"""Admin pages: limit profiles, agents (kill switch) and their API tokens."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django_htmx.http import trigger_client_event

from agents import roles
from agents.errors import DomainError, NotFound
from agents.models import Agent, LimitProfile
from agents.services import configuration, operator
from agents.services.configuration import PROFILE_LIMIT_FIELDS
from agents.services.tasks import DEFAULT_PROFILE
from console import access, queries
from console.access import INVALID, console_view
from console.forms import (
    AllowedProfilesForm,
    PauseForm,
    ProfileForm,
    RevokeForm,
    TokenForm,
    limit_text,
)

# -- limit profiles --------------------------------------------------------------------------


@console_view(roles.CHANGE_PROFILE)
def limits_index(request):
    context = {
        "profiles": LimitProfile.objects.all(),
        "limit_fields": PROFILE_LIMIT_FIELDS,
        "changes": queries.limit_changes(),
        "can_add": request.user.has_perm(roles.ADD_PROFILE),
    }
    return render(request, "console/limits.html", context)


def _profile_initial(profile: LimitProfile) -> dict:
    initial = {"description": profile.description}
    for name in PROFILE_LIMIT_FIELDS:
        initial[name] = limit_text(name, getattr(profile, name))
    return initial


def _profile_context(form: ProfileForm, profile: LimitProfile | None, **extra) -> dict:
    return {"form": form, "profile": profile, "changes": queries.limit_changes(10), **extra}


def _profile_page(request, form: ProfileForm, profile: LimitProfile | None, status: int = 200):
    context = _profile_context(form, profile)
    return access.page(
        request, "console/profile_form.html", "console/_profile_form.html", context, status=status
    )


def _profile_post(request, profile: LimitProfile | None, saved: str):
    """Create (`profile` None) or change a profile from the posted form, through the service.

    Saved: htmx gets the form with the stored values, a plain POST the limits page; `saved`,
    formatted with the profile's name, is the message. Refused: the form again, each error next
    to its field (422), nothing changed.
    """
    form = ProfileForm(request.POST, creating=profile is None)
    if form.is_valid():
        try:
            stored = configuration.profile_save(
                user=request.user,
                values=form.values(),
                name=profile.name if profile is not None else None,
            )
        except DomainError as error:
            access.field_errors(form, error)
        else:
            return access.done(
                request,
                saved.format(name=stored.name),
                partial="console/_profile_form.html",
                context=_profile_context(
                    ProfileForm(creating=False, initial=_profile_initial(stored)),
                    stored,
                    saved=True,
                ),
                then=reverse("limits"),
            )
    return _profile_page(request, form, profile, status=INVALID)


@console_view(roles.ADD_PROFILE, methods=("GET", "POST"))
def profile_new(request):
    if request.method == "GET":
        defaults = LimitProfile()  # the model's defaults are docs/DESIGN.md section 5's
        form = ProfileForm(creating=True, initial=_profile_initial(defaults))
        return _profile_page(request, form, None)
    return _profile_post(request, None, "Profile {name} created.")


@console_view(roles.CHANGE_PROFILE, methods=("GET", "POST"))
def profile_edit(request, name):
    profile = get_object_or_404(LimitProfile, name=name)
    if request.method == "GET":
        form = ProfileForm(creating=False, initial=_profile_initial(profile))
        return _profile_page(request, form, profile)
    return _profile_post(request, profile, "Profile {name} saved. New tasks get these limits.")


# -- agents ----------------------------------------------------------------------------------


def _profiles_form(agent, data=None) -> AllowedProfilesForm:
    default = agent.default_profile.name if agent.default_profile_id else DEFAULT_PROFILE
    names = [n for n in LimitProfile.objects.values_list("name", flat=True) if n != default]
    granted = [p.name for p in agent.allowed_profiles.all()]
    return AllowedProfilesForm(
        data, prefix=f"profiles-{agent.name}", profiles=names, initial={"allowed": granted}
    )


def _agent_card(request, name: str, *, agent=None, **extra) -> dict:
    agent = agent or queries.agent_overview(name)
    if agent is None:
        raise Http404("No such agent.")
    return {
        "agent": agent,
        "pause_form": extra.pop("pause_form", None) or PauseForm(prefix=f"pause-{agent.name}"),
        "token_form": extra.pop("token_form", None) or TokenForm(prefix=f"token-{agent.name}"),
        "profiles_form": extra.pop("profiles_form", None) or _profiles_form(agent),
        "can_grant_profiles": request.user.has_perm(roles.CHANGE_AGENT),
        "can_pause": request.user.has_perm(roles.PAUSE_AGENT),
        "can_tokens": request.user.has_perm(roles.MANAGE_TOKENS),
        **extra,
    }


def _agents_page(request, status: int = 200, **override):
    """The agents page: a table, each agent's forms in a <details> opened on demand.
    `override` replaces one agent's card (with its form errors or the token just issued) and
    opens it; `?open=NAME` opens one agent's details (where a form sends you back)."""
    cards = []
    opened = request.GET.get("open", "")
    for agent in queries.agents_overview():
        if override.get("name") == agent.name:
            cards.append({**override["card"], "open": True})
        else:
            cards.append(_agent_card(request, agent.name, agent=agent, open=agent.name == opened))
    return render(request, "console/agents.html", {"cards": cards}, status=status)


@console_view(roles.VIEW_AGENT)
def agents_index(request):
    """Every agent's card; what a card offers follows the user's permissions (operators: the
    kill switch; admins: also tokens and allowed profiles)."""
    return _agents_page(request)


def _card_answer(
    request, name: str, card: dict, *, message: str = "", status: int = 200, kind: str = "success"
):
    """One agent's card for htmx, the whole page otherwise (after a redirect when it worked).
    `kind`: "success" (done) or "info" (nothing needed doing), as access.done says."""
    if request.htmx:
        response = render(request, "console/_agent_answer.html", card, status=status)
        if message:
            trigger_client_event(response, "lw:toast", {"message": message, "kind": kind})
        return response
    if status == 200 and message and "raw_token" not in card:
        messages.add_message(request, access.MESSAGE_LEVELS[kind], message)
        where = f"{reverse('agents')}?{urlencode({'open': name})}#agent-{name}"
        return access.redirect_see_other(where)
    return _agents_page(request, status=status, name=name, card=card)


def _set_paused(request, name: str, paused: bool):
    form = PauseForm(request.POST, prefix=f"pause-{name}")
    if form.is_valid():
        try:
            _agent, changed = operator.agent_set_paused(
                name=name, paused=paused, user=request.user, reason=form.cleaned_data["reason"]
            )
        except NotFound:
            raise Http404("No such agent.") from None
        except DomainError as error:
            access.field_errors(form, error)
        else:
            card = _agent_card(request, name)
            if not changed:  # someone else, or another tab, got there first
                was = "was already paused" if paused else "was not paused"
                message = f"{name} {was}; nothing changed."
                return _card_answer(request, name, card, message=message, kind="info")
            word = "paused: its tasks stop at their next call" if paused else "unpaused"
            return _card_answer(request, name, card, message=f"{name} {word}.")
    return _card_answer(request, name, _agent_card(request, name, pause_form=form), status=INVALID)


@console_view(roles.PAUSE_AGENT, methods=("POST",))
def agent_pause(request, name):
    return _set_paused(request, name, True)


@console_view(roles.PAUSE_AGENT, methods=("POST",))
def agent_unpause(request, name):
    return _set_paused(request, name, False)


@console_view(roles.CHANGE_AGENT, methods=("POST",))
def agent_profiles(request, name):
    """An admin sets the profiles the agent may use, through the service the API calls."""
    agent = get_object_or_404(Agent, name=name)
    form = _profiles_form(agent, request.POST)
    if form.is_valid():
        try:
            configuration.agent_set_allowed_profiles(
                name=name,
                profiles=form.cleaned_data["allowed"],
                user=request.user,
                reason=form.cleaned_data["reason"],
            )
        except NotFound:
            raise Http404("No such agent.") from None
        except DomainError as error:
            access.field_errors(form, error)
        else:
            card = _agent_card(request, name)
            return _card_answer(request, name, card, message=f"{name}: allowed profiles saved.")
    card = _agent_card(request, name, profiles_form=form)
    return _card_answer(request, name, card, status=INVALID)


@console_view(roles.MANAGE_TOKENS, methods=("POST",))
def token_issue(request, name):
    form = TokenForm(request.POST, prefix=f"token-{name}")
    if form.is_valid():
        try:
            token, raw = configuration.token_issue(
                agent_name=name, user=request.user, name=form.cleaned_data["name"]
            )
        except NotFound:
            raise Http404("No such agent.") from None
        except DomainError as error:
            access.field_errors(form, error)
        else:
            # Shown once, in this answer only: never stored, never put in a redirect or session.
            card = _agent_card(request, name, raw_token=raw, new_token=token)
            response = _card_answer(request, name, card, message="Token issued. Copy it now.")
            response["Cache-Control"] = "no-store"
            return response
    return _card_answer(request, name, _agent_card(request, name, token_form=form), status=INVALID)


@console_view(roles.MANAGE_TOKENS, methods=("POST",))
def token_revoke(request, name, token_id):
    form = RevokeForm(request.POST)
    form.is_valid()
    try:
        token, revoked = configuration.token_revoke(
            token_id=token_id,
            agent_name=name,
            user=request.user,
            reason=form.cleaned_data.get("reason", ""),
        )
    except NotFound:
        raise Http404("No such token.") from None
    card = _agent_card(request, name)
    if not revoked:  # another tab, or another admin, got there first
        message = f"Token {token.prefix}… was already revoked; nothing changed."
        return _card_answer(request, name, card, message=message, kind="info")
    return _card_answer(request, name, card, message=f"Token {token.prefix}… revoked.")
