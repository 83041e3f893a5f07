"""Django admin (/django-admin/) for what admins manage without a console page of its own.

Tool policies: the fields a tool's fingerprint ignores, what its results' novelty data hash
leaves out, its near-duplicate threshold, and the
reconciler URL asked about its UNKNOWN operations (see ledger/reconcilers.py). Model prices: what
the gate reserves before a model call and what the usage report settles. Sign-in failures
(django-axes), read-only: a lockout is lifted on the console, where the unlock is audited.
"""

from __future__ import annotations

from axes.admin import AccessAttemptAdmin
from axes.models import AccessAttempt
from django import forms
from django.contrib import admin

from agents import semantic
from agents.models import ModelPrice, ToolPolicy


class ToolPolicyForm(forms.ModelForm):
    reconcile_url = forms.URLField(
        required=False,
        assume_scheme="https",
        help_text="Optional. Asked (POST operation_key, namespace, tool, args) whether an "
        'UNKNOWN operation committed; answers {"state": "committed" | "not_committed" | '
        '"unknown"}.',
    )

    similarity_provider = forms.ChoiceField(
        required=False,
        choices=[("lexical", "lexical"), ("semantic", "semantic"), ("embedding", "embedding")],
        initial="lexical",
        help_text=ToolPolicy._meta.get_field("similarity_provider").help_text,
    )

    class Meta:
        model = ToolPolicy
        fields = [
            "tool", "ignore_fields", "near_duplicate_threshold", "similarity_provider",
            "reconcile_url", "redact_fields", "ignore_result_fields", "ignore_volatile_keys",
        ]  # fmt: skip
        help_texts = {
            "ignore_fields": "A JSON list of argument paths the fingerprint leaves out, e.g. "
            '["request_id", "options.trace"].',
            "redact_fields": "A JSON list of key names shown as ••• in this tool's args and "
            'results in the console and the operator API, e.g. ["customer_ref"]; case and '
            "separators are ignored. Stored data is not changed.",
            "ignore_result_fields": "A JSON list of result paths the novelty data hash leaves "
            'out, same syntax as ignore_fields, e.g. ["served_by", "meta.shard"].',
            "ignore_volatile_keys": "Leave the built-in volatile key names (fetched_at, "
            "request_id, etag, ... see docs/API.md) out of the novelty data hash too, in any "
            "spelling and at any depth. Switch off when such a key is real data for this tool.",
        }

    def clean_ignore_fields(self):
        value = self.cleaned_data["ignore_fields"] or []
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise forms.ValidationError("Give a JSON list of field names.")
        return value

    def clean_ignore_result_fields(self):
        value = self.cleaned_data["ignore_result_fields"] or []
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise forms.ValidationError("Give a JSON list of field paths.")
        return value

    def clean_redact_fields(self):
        value = self.cleaned_data["redact_fields"] or []
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise forms.ValidationError("Give a JSON list of key names.")
        return value

    def clean_similarity_provider(self):
        # Optional in the form: a policy that names no provider gets the built-in lexical one.
        provider = self.cleaned_data["similarity_provider"] or "lexical"
        if provider == "semantic" and not semantic.available():
            raise forms.ValidationError(str(semantic.MissingExtra()), code="semantic_extra_missing")
        return provider

    def clean_near_duplicate_threshold(self):
        value = self.cleaned_data["near_duplicate_threshold"]
        if value is not None and not 0 <= value <= 1:
            raise forms.ValidationError("A similarity between 0 and 1.")
        return value


@admin.register(ToolPolicy)
class ToolPolicyAdmin(admin.ModelAdmin):
    form = ToolPolicyForm
    list_display = [
            "tool", "ignore_fields", "near_duplicate_threshold", "similarity_provider",
            "reconcile_url", "redact_fields", "ignore_result_fields", "ignore_volatile_keys",
    ]  # fmt: skip
    search_fields = ["tool"]


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):
    list_display = ["model", "input_per_million", "output_per_million", "default_estimate_tokens"]
    search_fields = ["model"]


admin.site.unregister(AccessAttempt)


@admin.register(AccessAttempt)
class SigninFailureAdmin(AccessAttemptAdmin):
    """axes' failure rows, to look at. Deleting them here would lift a lockout without an
    audit row; the console's Sign-in lockouts page does it through `signin_unlock`."""

    actions = []  # axes' clean-up action deletes rows too (expired ones are cleaned anyway)

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
