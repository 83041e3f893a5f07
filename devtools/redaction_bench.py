"""How fast the redaction policy is on a console page's texts, against detect-secrets.

    .venv/bin/python -m devtools.redaction_bench [--pages 200]

Builds the texts one task page shows (goal, 50 timeline rows of args and results, operation
keys, event reasons, the stop report), a few of them holding a secret from
devtools.secret_samples, and times three ways of masking them, per page:

- the policy (agents.redaction.redact over each value: key names, shapes, cards);
- detect-secrets 1.5 plugins alone: every plugin's `analyze_string` on every text (the plugins'
  own regexes, no filters, no verification, so no network), then each found value replaced;
- detect-secrets' `scan_line` under `default_settings()`: plugins plus its false-positive
  filters, the way the tool scans a line.

Then which sample shapes each finds. Needs detect-secrets installed (`pip install
detect-secrets`); without it only the policy is timed. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from agents.redaction import MASK, redact
from devtools.secret_samples import SAMPLES


def page_texts(seed: int) -> list[Any]:
    """The values one task page shows: 120 or so, one in ten holding a secret."""
    rng = random.Random(seed)
    secrets = [text for _shape, text, _secret in SAMPLES]
    values: list[Any] = ["Reconcile the March invoices for ACME and email the summary to finance"]
    for row in range(50):
        note = rng.choice(secrets) if rng.random() < 0.1 else f"page {row} of the ledger export"
        values.append({
            "query": "invoices march 2026 status:open", "page": row, "per_page": 50,
            "customer": f"cus_{rng.randrange(10**6):06d}", "note": note,
            "fields": ["id", "amount", "currency", "due_at"],
        })  # fmt: skip
        values.append({"items": [{"id": f"inv_{row}_{i}", "amount": 1200 + i, "currency": "EUR",
                                  "due_at": "2026-03-31T00:00:00Z"} for i in range(3)],
                       "next_cursor": f"c{row + 1}"})  # fmt: skip
    values += [f"invoice-{n}-send-reminder" for n in range(10)]
    values += ["same_call", "operator_stop", "Stopped by ops: the agent kept paging past the end"]
    values.append({"state": "STOPPED", "reason": "same_call", "completed": ["fetched page 1"],
                   "operations": [{"key": "invoice-3-send-reminder", "state": "UNKNOWN"}],
                   "resume_condition": "Reconcile operation invoice-3-send-reminder."})  # fmt: skip
    return values


def _leaves(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [text for item in value.values() for text in _leaves(item)]
    if isinstance(value, list):
        return [text for item in value for text in _leaves(item)]
    return [value] if isinstance(value, str) else []


def _replace_found(text: str, found: set[str]) -> str:
    for secret in sorted(found, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


_KEPT: list[Any] = []


def detect_secrets_ways() -> dict[str, Callable[[str], str]]:
    try:
        from detect_secrets.core.scan import scan_line
        from detect_secrets.settings import default_settings, get_plugins
    except ImportError:
        return {}
    _KEPT.append(default_settings())  # entered for the whole run (collected, it would undo)
    _KEPT[-1].__enter__()
    plugins = list(get_plugins())

    def plugins_only(text: str) -> str:
        found: set[str] = set()
        for line in text.splitlines() or [text]:
            for plugin in plugins:
                found.update(plugin.analyze_string(line))
        return _replace_found(text, found)

    def scanned(text: str) -> str:
        found = {
            secret.secret_value or ""
            for line in (text.splitlines() or [text])
            for secret in scan_line(line)
        }
        return _replace_found(text, found - {""})

    return {"detect-secrets plugins": plugins_only, "detect-secrets scan_line": scanned}


def time_pages(mask_page: Callable[[list[Any]], Any], pages: list[list[Any]]) -> list[float]:
    timings = []
    for page in pages:
        started = time.perf_counter()
        mask_page(page)
        timings.append((time.perf_counter() - started) * 1000)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=200)
    pages = [page_texts(seed) for seed in range(parser.parse_args().pages)]
    texts = sum(len(_leaves(page)) for page in pages) // len(pages)
    ways: dict[str, Callable[[str], str]] = {"policy (agents.redaction)": redact}
    ways.update(detect_secrets_ways())
    print(f"{len(pages)} pages, {texts} texts a page (a task page's goal, 50 trace rows, keys)")
    for name, mask in ways.items():
        if name.startswith("policy"):
            timings = time_pages(lambda page: [redact(value) for value in page], pages)
        else:
            timings = time_pages(lambda page, m=mask: [m(t) for t in _leaves(page)], pages)
        median = statistics.median(timings)
        p95 = sorted(timings)[int(0.95 * len(timings)) - 1]
        print(f"  {name:28} median {median:7.2f} ms a page, p95 {p95:7.2f} ms, "
              f"{median * 1000 / texts:6.1f} us a text")  # fmt: skip
    print(f"\nshapes found ({len(SAMPLES)} samples: masked, and the secret gone):")
    for name, mask in ways.items():
        missed = [shape for shape, text, secret in SAMPLES if secret in mask(text)]
        print(
            f"  {name:28} {len(SAMPLES) - len(missed):2}/{len(SAMPLES)}"
            + (f"; missed: {', '.join(missed)}" if missed else "")
        )
    samples = {text for _shape, text, _secret in SAMPLES}
    ordinary = sorted({text for page in pages[:20] for text in _leaves(page)} - samples)
    print(f"\nordinary texts changed (of {len(ordinary)} distinct secret-free texts):")
    for name, mask in ways.items():
        changed = [text for text in ordinary if mask(text) != text]
        print(f"  {name:28} {len(changed):4}" + (f"; e.g. {changed[:3]}" if changed else ""))
    if _KEPT:
        _KEPT[-1].__exit__(None, None, None)


if __name__ == "__main__":
    main()
