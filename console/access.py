"""Who may open which console page, and the two answers every page gives: full or partial.

Signed-out users go to the sign-in page (an HTMX request gets a client-side redirect, so a
poll never swaps the sign-in form into a table); a signed-in user without the permission gets
403. Permissions are the ones agents/roles.py gives the operators and admins groups.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from urllib.parse import urlencode, urlsplit, urlunsplit

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods
from django_htmx.http import HttpResponseClientRedirect, trigger_client_event
from django_htmx.middleware import HtmxDetails

# Status of a page that shows a form again with its errors. htmx is configured (base.html)
# to swap 422 answers, so the errors appear next to the fields in both modes.
INVALID = 422


class HtmxHttpRequest(HttpRequest):
    """A request as the console's views see it: django-htmx's middleware has set `htmx`."""

    htmx: HtmxDetails


def console_view(perm: str, *, methods: tuple[str, ...] = ("GET",)) -> Callable:
    """Guard a console view: sign-in, one permission, allowed HTTP methods."""

    def decorator(view: Callable) -> Callable:
        @wraps(view)
        def wrapped(request: HtmxHttpRequest, *args, **kwargs) -> HttpResponse:
            if not request.user.is_authenticated:
                target = request.get_full_path()
                if request.htmx:
                    # The page the user is on, not the partial's URL, is where to come back to.
                    target = request.htmx.current_url_abs_path or target
                elif request.method not in ("GET", "HEAD"):
                    # A form posted after the session expired: back to the page it was on
                    # (nothing is done on the way; the action's URL would answer 405).
                    target = _page_posted_from(request)
                login = f"{settings.LOGIN_URL}?{urlencode({'next': target}, safe='/')}"
                if request.htmx:
                    return HttpResponseClientRedirect(login)
                return redirect(login)
            if not request.user.has_perm(perm):
                # Answered here rather than raised: Django logs a raised PermissionDenied with
                # its traceback; a refusal is a person's mistake (logged in one line, as 403).
                return render(request, "403.html", {"needs": perm}, status=403)
            return view(request, *args, **kwargs)

        return require_http_methods(list(methods))(wrapped)

    return decorator


def _page_posted_from(request: HttpRequest) -> str:
    """The path of the console page a form was posted from (its Referer, on this host), or
    the dashboard when there is none to trust."""
    referer = request.headers.get("referer", "")
    if referer and url_has_allowed_host_and_scheme(
        referer, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        parts = urlsplit(referer)
        if parts.path.startswith("/"):
            return urlunsplit(("", "", parts.path, parts.query, ""))
    return "/"


def page(
    request: HtmxHttpRequest,
    template: str,
    partial: str,
    context: dict,
    *,
    status: int = 200,
) -> HttpResponse:
    """The whole page, or only `partial` when htmx asks (and it is not a boosted navigation)."""
    if request.htmx and not request.htmx.boosted and not request.htmx.history_restore_request:
        return render(request, partial, context, status=status)
    return render(request, template, context, status=status)


def done(
    request: HtmxHttpRequest,
    message: str,
    *,
    partial: str,
    context: dict,
    then: str,
    kind: str = "success",
) -> HttpResponse:
    """After an action: htmx gets the updated partial and a toast; a plain POST is redirected
    (303, so a reload does not post again) with the message shown on the next page. `kind`:
    "success" (it was done), "info" (nothing needed doing) or "error" (it was refused).
    """
    if request.htmx:
        response = render(request, partial, context)
        return trigger_client_event(response, "lw:toast", {"message": message, "kind": kind})
    messages.add_message(request, MESSAGE_LEVELS[kind], message)
    return redirect_see_other(then)


MESSAGE_LEVELS = {"success": messages.SUCCESS, "info": messages.INFO, "error": messages.ERROR}


def redirect_see_other(url: str) -> HttpResponse:
    response = redirect(url)
    response.status_code = 303
    return response


def field_errors(form, error) -> None:
    """Put a service's DomainError on the form: each field it names next to that field.

    Services name nested fields with a prefix ("grant.model_calls", "limits.max_cost"); the
    console's forms use the bare name. Whatever has no field becomes a form-wide error.
    """
    placed = False
    for key, text in (error.fields or {}).items():
        name = str(key).split(".")[-1]
        if name in form.fields and isinstance(text, str):
            form.add_error(name, text if text.endswith(".") else f"{text[:1].upper()}{text[1:]}.")
            placed = True
    if not placed:
        form.add_error(None, error.message)
