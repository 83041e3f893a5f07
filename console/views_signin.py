"""Sign-in lockouts: who django-axes refuses after repeated failed sign-ins, and the unlock."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.shortcuts import render
from django.urls import reverse

from agents import roles, selectors
from agents.errors import DomainError
from agents.services import signin
from console import access
from console.access import INVALID, console_view
from console.forms import SignInForm, UnlockForm


class SignInView(auth_views.LoginView):
    """Django's sign-in page, with the console's form and template. A `next` that names the
    sign-in page itself is dropped for the dashboard: Django answers a signed-in user's
    /login/?next=/login/ with a 500 (its redirect-loop check)."""

    template_name = "console/login.html"
    redirect_authenticated_user = True
    authentication_form = SignInForm

    def get_redirect_url(self, request=None) -> str:
        url = super().get_redirect_url()  # "" when it is not safe to follow
        return "" if url and urlsplit(url).path == reverse("login") else url


def locked_out(request, original_response=None, credentials=None):
    """What a locked-out sign-in answers (django-axes' AXES_LOCKOUT_CALLABLE): 429 and why."""
    username = (credentials or {}).get("username") or request.POST.get("username", "")
    context = {
        "username": username,
        "lockout_minutes": settings.SIGNIN_LOCKOUT_MINUTES,
        "lockout_seconds": settings.SIGNIN_LOCKOUT_MINUTES * 60,
    }
    return render(request, "console/signin_locked.html", context, status=429)


def _context(request, **extra) -> dict:
    return {
        "lockouts": selectors.signin_lockouts(),
        "failure_limit": settings.AXES_FAILURE_LIMIT,
        "lockout_minutes": settings.SIGNIN_LOCKOUT_MINUTES,
        "lockout_seconds": settings.SIGNIN_LOCKOUT_MINUTES * 60,
        "can_unlock": request.user.has_perm(roles.UNLOCK_SIGNIN),
        **extra,
    }


@console_view(roles.VIEW_SIGNIN_LOCKOUTS)
def signin_lockouts(request):
    return access.page(
        request,
        "console/signin_lockouts.html",
        "console/_signin_lockouts.html",
        _context(request),
    )


@console_view(roles.UNLOCK_SIGNIN, methods=("POST",))
def signin_unlock(request):
    form = UnlockForm(request.POST)
    error = None
    if form.is_valid():
        data = form.cleaned_data
        try:
            forgotten = signin.signin_unlock(
                user=request.user, by=data["by"], value=data["value"], reason=data["reason"]
            )
        except DomainError as exc:
            error = exc.message
        else:
            message = (
                f"Sign-in unlocked for {data['by']} {data['value']}."
                if forgotten
                else f"{data['by'].capitalize()} {data['value']} was not locked."
            )
            return access.done(
                request,
                message,
                partial="console/_signin_lockouts.html",
                context=_context(request),
                then=reverse("signin-lockouts"),
            )
    else:
        error = " ".join(str(message) for messages in form.errors.values() for message in messages)
    return access.page(
        request,
        "console/signin_lockouts.html",
        "console/_signin_lockouts.html",
        _context(request, error=error),
        status=INVALID,
    )
