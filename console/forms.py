"""Console forms: they parse what the operator typed; the services decide what is allowed.

Numbers that a service validates (grants, limits) are kept as text here and handed over as
typed, so a range rule lives in one place, the service, and its error comes back next to the
field that broke it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any, cast

from django import forms
from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.validators import MaxLengthValidator

from agents.db import storable
from agents.guard import registry, terms
from agents.models import Agent
from agents.services.configuration import DESCRIPTION_MAX, NAME_MAX, PROFILE_LIMIT_FIELDS
from console.words import GRANTS, LIMIT_WORDS

TEXT_REASON = forms.Textarea(attrs={"rows": 2, "placeholder": "What you saw, what you decided"})
# The values are the guard core's (`limits.CHOICES`); only their words are the console's.
CHOICE_WORDS = {
    "block": "block (nudge once, then stop)", "stop": "stop",
    "evidence": "evidence only", "novelty": "novelty (new data counts)",
}  # fmt: skip
CHOICES = {spec.name: spec.choices for spec in registry.LIMITS if spec.kind == registry.CHOICE}
CHOICE_FIELDS = {
    name: [(value, CHOICE_WORDS[value]) for value in values] for name, values in CHOICES.items()
}


class _FilterForm(forms.Form):
    """A list page's filters, read from the URL (unbound when there is no query string).

    An unknown value in the URL is ignored (the list is not filtered by it) rather than an error.
    """

    def _valid_values(self) -> dict[str, Any]:
        """The cleaned values of the fields that parsed; nothing for an unbound form."""
        self.is_valid()
        return getattr(self, "cleaned_data", {})


def _filter_choices(label: str, values: Iterable[str]) -> list[tuple[str, str]]:
    """A filter's choices: `label` for no filter, then each value as itself."""
    return [("", label), *[(value, value) for value in values]]


def _choice_field(form: forms.BaseForm, name: str) -> forms.ChoiceField:
    """`form`'s copy of a ChoiceField it declares: `form.fields` types every field as a Field."""
    return cast(forms.ChoiceField, form.fields[name])


DAY_FORMAT = "%Y-%m-%d"  # what a date box sends; the only form typed dates are read in


class _DayInput(forms.DateInput):
    input_type = "date"

    def __init__(self):
        super().__init__(format=DAY_FORMAT)


def _day_field() -> forms.DateField:
    return forms.DateField(
        required=False,
        input_formats=[DAY_FORMAT],
        widget=_DayInput(),
        error_messages={"invalid": "Enter a date as YYYY-MM-DD; the list is not filtered by it."},
    )


SHOWN_ERRORS = ("q", "created_from", "created_to")


class TaskFilterForm(_FilterForm):
    """The dashboard's filters and search. An unknown state or agent is ignored; a malformed
    date is an error shown beside the form (the list is filtered by the rest)."""

    q = forms.CharField(
        required=False,
        max_length=300,
        label="Search",
        widget=forms.TextInput(
            attrs={"type": "search", "placeholder": "Task id, goal, external ref, operation key"}
        ),
    )
    state = forms.ChoiceField(required=False)
    agent = forms.ChoiceField(required=False)
    created_from = _day_field()
    created_to = _day_field()
    needs_human = forms.BooleanField(required=False, label="Needs a human only")
    page = forms.IntegerField(required=False, min_value=1)

    def __init__(self, *args, agents: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        _choice_field(self, "state").choices = _filter_choices("Any state", terms.TASK_STATES)
        _choice_field(self, "agent").choices = _filter_choices("Any agent", agents)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        first, last = data.get("created_from"), data.get("created_to")
        if first and last and first > last:
            self.add_error("created_to", "The first day is after the last day.")
        return data

    @property
    def shown_errors(self) -> list[str]:
        """The errors a person must see (typed text that was not applied); a state or agent
        the URL names that does not exist is only ignored."""
        if not self.is_bound:
            return []
        return [str(e) for name in SHOWN_ERRORS for e in self.errors.get(name, [])]

    def query_values(self) -> dict[str, Any]:
        """The filters to carry in links and the live poll: those applied, and the text typed
        in a field that was refused, so each refresh shows its error again."""
        refused = {name: self.data.get(name) for name in self.errors if name in SHOWN_ERRORS}
        return {k: refused.get(k) or v for k, v in self.filters().items() if v or refused.get(k)}

    def filters(self) -> dict[str, Any]:
        data = self._valid_values()
        return {
            "q": (data.get("q") or "").strip(),
            "state": data.get("state") or "",
            "agent": data.get("agent") or "",
            "created_from": data.get("created_from"),
            "created_to": data.get("created_to"),
            "needs_human": bool(data.get("needs_human")),
        }


AGE_UNITS = {"minutes": 1, "hours": 60}


class ReconcileFilterForm(_FilterForm):
    """The reconcile queue's filters: agent, namespace, and older than N minutes or hours.
    An unknown agent or namespace, or an age that is not a whole number of at least 1, is
    ignored (the queue is not filtered by it)."""

    agent = forms.ChoiceField(required=False)
    namespace = forms.ChoiceField(required=False)
    older_than = forms.IntegerField(
        required=False, min_value=1, max_value=100_000, label="Older than",
        widget=forms.NumberInput(attrs={"min": 1, "placeholder": "age", "class": "age"}),
    )  # fmt: skip
    unit = forms.ChoiceField(required=False, choices=[(u, u) for u in AGE_UNITS], label="Age unit")

    def __init__(self, *args, agents: list[str], namespaces: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        _choice_field(self, "agent").choices = _filter_choices("Any agent", agents)
        _choice_field(self, "namespace").choices = _filter_choices("Any namespace", namespaces)

    def filters(self, now: datetime) -> dict[str, Any]:
        """The selector's keyword arguments: the age becomes a moment the claim is before."""
        data = self._valid_values()
        age = data.get("older_than")
        minutes = age * AGE_UNITS[data.get("unit") or "minutes"] if age else None
        return {
            "agent": data.get("agent") or "",
            "namespace": data.get("namespace") or "",
            "claimed_before": now - timedelta(minutes=minutes) if minutes else None,
        }

    def query_values(self) -> dict[str, Any]:
        """The filters applied, as the URL carries them (empty when none is)."""
        data = self._valid_values()
        found = {k: data.get(k) for k in ("agent", "namespace", "older_than") if data.get(k)}
        if "older_than" in found:
            found["unit"] = data.get("unit") or "minutes"
        return found


class StopForm(forms.Form):
    reason = forms.CharField(
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "Why you are stopping it"}),
        error_messages={"required": "Say why you are stopping the task."},
    )


class ResumeForm(forms.Form):
    reason = forms.CharField(
        max_length=2000,
        widget=TEXT_REASON,
        error_messages={"required": "Say why the task may go on."},
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for key, label, _limit, _usage in GRANTS:
            self.fields[key] = forms.CharField(
                required=False,
                label=label,
                max_length=40,
                widget=forms.TextInput(attrs={"inputmode": "decimal", "placeholder": "0"}),
            )

    def grant(self) -> dict[str, str]:
        return {
            key: self.cleaned_data[key].strip()
            for key, *_ in GRANTS
            if self.cleaned_data.get(key, "").strip()
        }


class ReconcileForm(forms.Form):
    verdict = forms.ChoiceField(
        choices=[
            (terms.OP_COMMITTED, "Committed: it happened"),
            (terms.NOT_COMMITTED, "Not committed: it did not happen"),
            (terms.UNKNOWN, "Still unknown"),
        ],
        widget=forms.RadioSelect,
        error_messages={"required": "Choose a verdict."},
    )
    result = forms.CharField(
        required=False,
        max_length=20_000,
        label="Result (optional)",
        help_text="What the tool would have returned, as JSON; the agent gets it back (REUSE).",
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": '{"payment_id": "..."}'}),
    )
    result_is_text = forms.BooleanField(
        required=False,
        label="The result is plain text, not JSON",
        help_text="Kept as one string, exactly as typed.",
    )
    note = forms.CharField(
        max_length=5000,
        widget=forms.Textarea(
            attrs={"rows": 2, "placeholder": "How you know: ticket, dashboard, person asked"}
        ),
        error_messages={"required": "A note is required: say how you know."},
    )

    def clean(self) -> dict[str, Any]:
        # Form.clean() returns self.cleaned_data; django-stubs types that return as optional.
        super().clean()
        data = self.cleaned_data
        # Whether the verdict may carry a result is the reconcile service's rule.
        if "result" in data:
            try:
                self.result_value()
            except json.JSONDecodeError as exc:
                self.add_error(
                    "result",
                    f"The result is not valid JSON ({exc.msg}, line {exc.lineno} column "
                    f"{exc.colno}). Fix it, or tick “plain text” to keep it as text.",
                )
            except RecursionError:
                limit = settings.LOOPWARDEN_MAX_JSON_DEPTH
                self.add_error("result", f"JSON nested deeper than {limit} levels.")
            except (storable.UnstorableText, storable.TooDeep) as exc:
                self.add_error("result", str(exc))
            except ValueError as exc:  # NaN, Infinity, 1e999: no JSON column holds them
                self.add_error(
                    "result",
                    f"The result is not valid JSON ({exc}). Fix it, or tick “plain text” to "
                    "keep it as text.",
                )
        return data

    def result_value(self) -> Any:
        """The result as typed: JSON, or with `result_is_text` the text itself. Text is never
        taken for JSON that did not parse (a missing brace would be stored, and answered to the
        agent as REUSE, as a string). Held to the API's rules (NaN, Infinity and 1e999 are
        refused; JSON escapes can spell "\\u0000"): clean() reports what breaks them."""
        text = self.cleaned_data.get("result", "").strip()
        if not text:
            return None
        value = text if self.cleaned_data.get("result_is_text") else storable.loads(text)
        return storable.admit(value, max_depth=settings.LOOPWARDEN_MAX_JSON_DEPTH, encode=False)


class PauseForm(forms.Form):
    reason = forms.CharField(
        max_length=Agent._meta.get_field("paused_reason").max_length,  # kept on the agent row
        widget=forms.TextInput(attrs={"placeholder": "Why"}),
        error_messages={"required": "A reason is required."},
    )


class TokenForm(forms.Form):
    name = forms.CharField(
        required=False,
        max_length=200,  # the service says what is too long
        label="Token name (optional)",
        widget=forms.TextInput(attrs={"placeholder": "e.g. prod worker 2"}),
    )


class AllowedProfilesForm(forms.Form):
    """The profiles an agent may name at task creation besides its default (admins)."""

    allowed = forms.MultipleChoiceField(
        required=False,
        label="Profiles it may also use",
        widget=forms.CheckboxSelectMultiple,
        help_text="Its default is always allowed; any other profile answers 403.",
    )
    reason = forms.CharField(
        required=False,
        max_length=2000,
        widget=forms.TextInput(attrs={"placeholder": "Why (goes to the audit log)"}),
    )

    def __init__(self, *args, profiles: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        _choice_field(self, "allowed").choices = [(name, name) for name in profiles]


class RevokeForm(forms.Form):
    reason = forms.CharField(required=False, max_length=2000)


def _limit_field(name: str, *, required: bool = True) -> forms.Field:
    label = LIMIT_WORDS.get(name, name)
    if name in CHOICE_FIELDS:
        return forms.ChoiceField(choices=CHOICE_FIELDS[name], label=label, required=required)
    return forms.CharField(
        label=label,
        required=False,
        max_length=40,
        widget=forms.TextInput(attrs={"inputmode": "decimal"}),
    )


def money_text(value: Any) -> str:
    """5.000000 -> "5.00", 0.125000 -> "0.125": what a person would type."""
    text = format(Decimal(str(value)).normalize(), "f")
    whole, _, fraction = text.partition(".")
    return f"{whole}.{fraction.ljust(2, '0')}"


def limit_text(name: str, value: Any) -> Any:
    """A limit as its form field shows it: money as a person would type it, no value as empty.
    The inverse of `limit_value`."""
    if value is None:
        return ""
    if registry.BY_NAME[name].kind == registry.MONEY:
        return money_text(value)
    return value


def limit_value(name: str, text: Any) -> Any:
    """Text from a form to the type the limit rules expect; unparseable text goes through as
    is, so the rules reject it with their own message."""
    if not isinstance(text, str):
        return text
    text = text.strip()
    kind = registry.BY_NAME[name].kind
    if kind in (registry.CHOICE, registry.MONEY):
        return text
    if kind == registry.RATIO:
        if not text:
            return None
        try:
            return float(text)
        except ValueError:
            return text
    try:
        return int(text)
    except ValueError:
        return text


class TaskLimitsForm(forms.Form):
    """A task's own limits. Only the fields the admin edited, and that differ from the task's
    now, are sent.

    Each field carries the value the page showed (a hidden initial): a limit that changed
    since the page was opened (a resume's grant) and is sent back as shown is not edited, and
    is left as it is now rather than put back.
    """

    reason = forms.CharField(
        required=False,
        max_length=2000,
        widget=forms.TextInput(attrs={"placeholder": "Why (goes to the audit log)"}),
    )

    def __init__(self, *args, limits: dict[str, Any], **kwargs):
        super().__init__(*args, **kwargs)
        self.current = limits
        for name in terms.Limits.names():
            self.fields[name] = _limit_field(name)
            self.fields[name].initial = limit_text(name, limits.get(name))
            self.fields[name].show_hidden_initial = True

    def changes(self) -> dict[str, Any]:
        out = {}
        for name in edited_fields(self, terms.Limits.names()):
            value = limit_value(name, self.cleaned_data.get(name))
            if _differs(name, value, self.current.get(name)):
                out[name] = value
        return out


def edited_fields(form: forms.Form, names: Iterable[str]) -> list[str]:
    """Of `names`, the fields the person edited: those whose posted value differs from the one
    the page showed, which each carries as a hidden initial (`show_hidden_initial`). A value
    changed by someone else since the page was opened, and sent back as shown, is not edited.
    A post without the shown values (not from the page) counts every field as edited."""
    if not any(key.startswith("initial-") for key in form.data):
        return list(names)
    changed = set(form.changed_data)
    return [name for name in names if name in changed]


def _differs(name: str, value: Any, current: Any) -> bool:
    if registry.BY_NAME[name].kind == registry.MONEY:
        try:
            return Decimal(str(value)) != Decimal(str(current))
        except InvalidOperation:
            return True
    return value != current


class ProfileForm(forms.Form):
    name = forms.CharField(
        required=False,
        max_length=NAME_MAX,
        help_text="Letters, numbers, hyphens; agents name it when they create a task.",
    )
    # The profile's own limit, so what the browser lets an admin type is what the save keeps.
    description = forms.CharField(required=False, max_length=DESCRIPTION_MAX)

    def __init__(self, *args, creating: bool, **kwargs):
        super().__init__(*args, **kwargs)
        self.creating = creating
        if not creating:
            del self.fields["name"]
        for name in PROFILE_LIMIT_FIELDS:
            self.fields[name] = _limit_field(name)
        if not creating:  # an edit sends only what was edited (`edited_fields`)
            for field in self.fields.values():
                field.show_hidden_initial = True

    def values(self) -> dict[str, Any]:
        names = [*PROFILE_LIMIT_FIELDS, "description"]
        if not self.creating:
            names = edited_fields(self, names)
        values: dict[str, Any] = {
            name: limit_value(name, self.cleaned_data.get(name))
            for name in names
            if name != "description"
        }
        if "description" in names:
            values["description"] = self.cleaned_data.get("description", "")
        if self.creating:
            values["name"] = self.cleaned_data.get("name", "").strip()
        return values


class AuditFilterForm(_FilterForm):
    kind = forms.ChoiceField(required=False)
    actor = forms.CharField(required=False, max_length=150)
    agent = forms.CharField(required=False, max_length=64)
    task = forms.UUIDField(required=False)
    everyone = forms.BooleanField(required=False, label="Include agents and the system")
    page = forms.IntegerField(required=False, min_value=1)

    def __init__(self, *args, kinds: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        _choice_field(self, "kind").choices = _filter_choices("Any action", kinds)

    def filters(self) -> dict[str, Any]:
        data = self._valid_values()
        return {
            "kind": data.get("kind") or "",
            "actor": (data.get("actor") or "").strip(),
            "agent": (data.get("agent") or "").strip(),
            "task": str(data["task"]) if data.get("task") else "",
            "everyone": bool(data.get("everyone")),
        }


class UnlockForm(forms.Form):
    """Lift one sign-in lockout: a username or an address (the service checks which)."""

    by = forms.CharField(widget=forms.HiddenInput)
    value = forms.CharField(widget=forms.HiddenInput, max_length=255)
    reason = forms.CharField(
        required=False,
        max_length=2000,
        widget=forms.TextInput(attrs={"placeholder": "Why (optional)"}),
    )


def _check_username_length(form: AuthenticationForm) -> None:
    """Django's sign-in forms show the user model's username length (`maxlength`) but never
    check it: a longer name went on to authenticate() and to django-axes' record of the failed
    sign-in, whose username column PostgreSQL refused (a 500 to anyone signed out). Checked
    here: a field error, no sign-in attempted."""
    field = cast(forms.CharField, form.fields["username"])
    if field.max_length:
        field.validators.append(MaxLengthValidator(field.max_length))


class SignInForm(AuthenticationForm):
    """The console's sign-in form."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _check_username_length(self)


class AdminSignInForm(AdminAuthenticationForm):
    """The Django admin's sign-in form (/django-admin/login/), held to the same length."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _check_username_length(self)
