"""One redaction policy for everything an operator reads (console and operator API): secret key
names whatever their case or separators, secret-looking values, and per-tool fields an admin
adds. The stored data stays intact, so REUSE hands the agent the real result."""

from __future__ import annotations

import json

import pytest

from agents.models import ToolPolicy
from devtools.secret_samples import SAMPLES

from .helpers import evidence, execute, new_task, request_tool

pytestmark = pytest.mark.django_db

SECRET_ARGS = {
    "PRIVATE-KEY": "pk-1",
    "accessKey": "ak-2",
    "Credentials": {"user": "u"},
    "passwd": "pw-3",
    "pwd": "pw-4",
    "Auth": "au-5",
    "cookie": "ck-6",
    "session_id": "se-7",
    "bearer": "be-8",
    "note": "call with sk-live-abcdefghijklmnop1234 or Bearer eyJhbGciOi.eyJzdWIi.c2lnbmF0dXJl",
    "card": "4111 1111 1111 1111",
    "memo": "card 4111-1111-1111-1111 on file",
    "account_pin": "9999",
    "customer_ref": "cr-10",
    "query": "march invoices",
}
# What must not show anywhere in what an operator reads. A value made only of hex digits and
# dashes is looked for with its quotes, or with the space that no id holds: bare, "be-8",
# "9999" or "4111" can turn up by chance inside a task's UUID or a fingerprint in the trace
# (the task id "cbe883be-865c-…" once failed this test).
LEAKS = ("pk-1", "ak-2", '"u"', "pw-3", "pw-4", "au-5", "ck-6", "se-7", '"be-8"',
         "sk-live-abcdefghijklmnop1234", "eyJhbGciOi", "4111 1111", "4111-1111-1111", '"9999"',
         "cr-10")  # fmt: skip


def test_the_operator_api_masks_secrets_in_trace_and_ledger(agent_api, operator_api):
    ToolPolicy.objects.create(tool="charge", redact_fields=["Customer-Ref"])
    task = new_task(agent_api)
    execute(
        agent_api, task["id"], "charge", SECRET_ARGS, "write", operation_key="charge-1",
        result={"kind": "SUCCESS", "data": {"receipt": "r-1", "api_key": "ak-9"},
                "evidence": evidence(1, committed=True)},
    )  # fmt: skip

    trace = json.dumps(operator_api.get(f"tasks/{task['id']}/trace").body)
    ledger = json.dumps(operator_api.get("operations").body)

    for leak in LEAKS + ("ak-9",):
        assert leak not in trace, leak
        assert leak not in ledger, leak
    assert "march invoices" in trace and "march invoices" in ledger
    assert "r-1" in ledger


def test_stored_data_stays_intact_for_reuse(agent_api, operator_api):
    task = new_task(agent_api)
    result = {"receipt": "r-1", "api_key": "ak-9", "notes": [text for _s, text, _x in SAMPLES]}
    execute(
        agent_api, task["id"], "charge", SECRET_ARGS, "write", operation_key="charge-1",
        result={"kind": "SUCCESS", "data": result, "evidence": evidence(1, committed=True)},
    )  # fmt: skip

    answer = request_tool(
        agent_api, task["id"], "charge", SECRET_ARGS, "write", operation_key="charge-1"
    )

    assert answer["decision"] == "REUSE"
    assert answer["result"] == result


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("private_key", True), ("Private-Key", True), ("privateKey", True), ("PRIVATE.KEY", True),
        ("access_key", True), ("AccessKey", True), ("credentials", True), ("passwd", True),
        ("pwd", True), ("auth", True), ("X-Auth-Token", True), ("cookie", True),
        ("Set-Cookie", True), ("session", True), ("sessionId", True), ("bearer", True),
        ("api_key", True), ("client_secret", True), ("pin", True), ("card_number", True),
        ("author", False), ("max_tokens", False), ("query", False), ("session_count", True),
        ("page", False), ("keyword", False),
    ],
)  # fmt: skip
def test_the_policy_matches_key_names_whatever_their_case_and_separators(key, secret):
    from agents.redaction import DEFAULT

    assert DEFAULT.secret_key(key) is secret


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("key sk-live-abcdefghijklmnop1234", "key "),
        ("Authorization: Bearer abc.def-ghi_jkl", "Authorization: Bearer "),
        ("jwt eyJhbGciOi.eyJzdWIi.c2lnbmF0dXJl", "jwt "),
        ("card 4111 1111 1111 1111 please", "card "),
        ("aws AKIAABCDEFGHIJKLMNOP", "aws "),
    ],
)
def test_the_policy_masks_secret_shaped_values(text, kept):
    from agents.redaction import DEFAULT, MASK

    masked = DEFAULT.mask_text(text)
    assert masked.startswith(kept) and MASK in masked


def test_the_policy_keeps_ordinary_numbers_and_text():
    from agents.redaction import redact

    value = {"order": 1234567890123, "phone": "+1 555 0100", "invoice": "INV-42", "n": 4}
    assert redact(value) == value
    assert redact({"card": 4111111111111111}) == {"card": "•••"}
    assert redact({"memo": 4111111111111111}) == {"memo": "•••"}  # a Luhn-valid 16 digits


def test_a_tools_extra_fields_are_matched_like_the_built_in_names():
    from agents.redaction import redact

    assert redact({"customerRef": "c-1", "other": "o"}, ["customer_ref"]) == {
        "customerRef": "•••",
        "other": "o",
    }


@pytest.mark.parametrize(
    ("text", "secret"), [pytest.param(t, s, id=shape) for shape, t, s in SAMPLES]
)
def test_the_policy_masks_every_shape_and_keeps_the_text_around_it(text, secret):
    from agents.redaction import MASK, redact

    masked = redact(text)

    assert secret not in masked and MASK in masked
    assert masked.split(MASK)[0] == text.split(secret)[0][: len(masked.split(MASK)[0])]


@pytest.mark.parametrize(
    "text",
    [
        "Reconcile the March invoices for ACME and email the summary to finance",
        "invoices march 2026 status:open", "2026-03-31T00:00:00Z", "page: 3, per_page=50",
        "max_tokens=500 at 12:30", "https://example.com/a/b?page=2&sort=due_at",
        "Note: password reset needed",
        "fingerprint 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "task 0396d933-7214-44eb-b822-3ee6bc348653", "order INV-2026-000123 for cus_004211",
        "ThisIsAnOrdinaryCamelCaseIdentifier", "author: Ada Lovelace", "pages: 4",
    ],
)  # fmt: skip
def test_the_policy_leaves_ordinary_text_alone(text):
    from agents.redaction import redact

    assert redact(text) == text


def test_the_api_reference_lists_every_shape():
    from pathlib import Path

    from agents.redaction import SHAPES

    reference = (Path(__file__).resolve().parents[2] / "docs" / "API.md").read_text()
    assert [name for name, _literals, _pattern in SHAPES if f"| {name} |" not in reference] == []


def test_a_key_that_holds_a_secret_is_masked_too():
    from agents.redaction import MASK, redact

    token = "ghp_TuNr7kbQKX6pnNte9l8LhxdBDd8GzEOo8Omo"
    assert redact({f"repo {token}": "ok"}) == {f"repo {MASK}": "ok"}


@pytest.mark.parametrize(
    "key",
    [
        "rk_Xp9aB3kLm7QwZt2VnR5c",
        "pk-live-abcdefghijklmnop12",
        "sk_9f8e7d6c5b4a39281706f5e4d3c2b1a0",
    ],
)
def test_keys_with_an_sk_pk_or_rk_prefix_are_masked_whatever_the_vendor(key):
    from agents.redaction import MASK, redact

    assert redact(f"use {key} ok") == f"use {MASK} ok"


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("https://api.example.com/v1/data?api_key=Zx81kdP0qLm2&page=2",
         "https://api.example.com/v1/data?api_key=•••&page=2"),
        ("GET https://maps.example.com/geocode?q=Berlin&access_token=pk9f8e7d6c",
         "GET https://maps.example.com/geocode?q=Berlin&access_token=•••"),
        ("postgres://db.internal:5432/app?sslmode=require&password=hunter2hunter",
         "postgres://db.internal:5432/app?sslmode=require&password=•••"),
        ("fetch url=https://x.example.com/export?token=abc123def456 then parse",
         "fetch url=https://x.example.com/export?token=••• then parse"),
        ("next: https://x.example.com/a?redirect=https://y.example.com/b?secret=s3cr3tvalue",
         "next: https://x.example.com/a?redirect=https://y.example.com/b?secret=•••"),
        ("webhook_secret=https://hooks.example.com/T000/B000/abcdef", "webhook_secret=•••"),
    ],
)  # fmt: skip
def test_a_secret_in_a_urls_query_is_masked(text, masked):
    """A URL's scheme (`https:`) read as a `name: value` pair swallowed the whole URL, so its
    query's `api_key=...` was never looked at; nor was a URL given as a value (`url=...`)."""
    from agents.redaction import redact

    assert redact(text) == masked
    assert redact({"url": text}) == {"url": masked}
