"""Reading a /metrics answer: sample values by name and labels, as Prometheus would see them."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

# The token the metrics tests configure (METRICS_TOKEN needs at least 16 characters).
TOKEN = "metrics-token-for-the-tests-0123"


@dataclass(frozen=True)
class Exposition:
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float]

    def value(self, name: str, **labels: str) -> float:
        """One sample's value; 0 when absent (a counter nobody incremented yet)."""
        return self.samples.get((name, frozenset(labels.items())), 0.0)

    def total(self, name: str, **labels: str) -> float:
        """The sum over every sample of `name` whose labels include `labels`."""
        wanted = set(labels.items())
        return sum(v for (n, ls), v in self.samples.items() if n == name and wanted <= ls)

    def names(self) -> set[str]:
        return {name for name, _ in self.samples}


def parse(text: str) -> Exposition:
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return Exposition(samples)
