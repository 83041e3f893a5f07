"""Identifiers decide: calls whose identifying values differ are never near-duplicates."""

from __future__ import annotations

import pytest

from agents.guard.fingerprint import canonical_json
from agents.guard.similarity import (
    EMBEDDING,
    SEMANTIC,
    VectorSimilarity,
    identifiers_differ,
    lexical,
    text_similarity,
)
from agents.guard.terms import EXECUTE, SUCCESS, ToolRequest, ToolResult
from agents.guard.tool import report_result, request_tool

from .factories import NOW, agent, call_of, make_task


def q(text: str, **extra) -> str:
    return canonical_json({"q": text, **extra})


@pytest.mark.parametrize(
    "a, b",
    [
        ("remind invoice 42", "remind invoice 43"),
        ("send the report to jane@example.com", "send the report to omar@example.org"),
        ("find the ticket titled 'login broken'", "find the ticket titled 'export broken'"),
        ("orders placed on 2026-12-01", "orders placed on 2026-12-05"),
        ("weather forecast for Paris", "weather forecast for Lyon"),
        ("refund order INV-1001 in full", "refund order INV-1002 in full"),
    ],
)
def test_differing_identifiers_score_zero_whatever_the_words(a, b):
    assert identifiers_differ(q(a), q(b))
    assert lexical(q(a), q(b)) == 0.0
    # Identical vectors (a model that sees only the template) do not override them either.
    same = VectorSimilarity({"fa": [1.0, 0.0], "fb": [1.0, 0.0]})
    assert same("fa", q(a), "fb", q(b)) == 0.0


@pytest.mark.parametrize(
    "a, b",
    [
        ("weather in Paris tomorrow", "Paris weather tomorrow"),  # a name that opens a text
        ("crm JANE@example.com ", "crm jane@example.com"),  # case and spaces of an address
        ("refund policy", "what is the refund policy"),  # no identifier on either side
        ("summarize incident 42", "short summary of incident 42"),  # the same identifier
        ("SELECT * FROM invoices LIMIT 10", "SELECT * FROM invoices"),  # only one side names one
    ],
)
def test_the_same_or_one_sided_identifiers_leave_the_score_to_the_provider(a, b):
    assert not identifiers_differ(q(a), q(b))
    assert lexical(q(a), q(b)) > 0.0


def test_a_one_word_value_is_an_identifier_but_a_list_of_field_names_is_not():
    assert identifiers_differ(canonical_json({"city": "Paris"}), canonical_json({"city": "Lyon"}))
    a = canonical_json({"email": "jane@example.com", "fields": ["name", "plan"]})
    b = canonical_json({"email": "jane@example.com", "fields": ["name", "plan", "status"]})
    assert not identifiers_differ(a, b)


def test_a_range_bound_or_a_size_is_a_nudge_not_an_identifier():
    since = [canonical_json({"q": "late orders", "since": d}) for d in ("2026-11-01", "2026-10-01")]
    assert not identifiers_differ(*since)
    sizes = [canonical_json({"q": "late orders", "limit": n}) for n in ("10", "20")]
    assert not identifiers_differ(*sizes)


def test_narrated_pagination_is_not_a_repeated_reflection():
    a = "Page 1 had 50 invoices; let me fetch page 2."
    b = "Page 2 had 50 invoices; let me fetch page 3."
    assert text_similarity(a, b) == 0.0
    assert text_similarity(a, a + " ") > 0.9


@pytest.mark.parametrize("provider", [SEMANTIC, EMBEDDING, "lexical"])
def test_every_provider_lets_a_reminder_per_invoice_through(provider):
    # Vectors that call every pair identical: only the identifier rule can keep these apart.
    task = make_task(near_duplicate_threshold=0.5, max_stagnant=10)
    for n in (42, 43, 44, 45):
        req = ToolRequest(tool="remind", args={"text": f"remind invoice {n}"},
                          similarity_provider=provider)  # fmt: skip
        fp, _ = req.identity
        req.vectors = {fp: [1.0, 0.0, 0.0]}
        for m in (42, 43, 44, 45):
            other = ToolRequest(tool="remind", args={"text": f"remind invoice {m}"})
            req.vectors[other.identity[0]] = [1.0, 0.0, 0.0]
        out = request_tool(task, req, None, agent(), NOW)
        assert out.decision == EXECUTE, n
        report_result(task, call_of(req), ToolResult(kind=SUCCESS), NOW)
