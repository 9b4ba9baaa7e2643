"""Flattening a run's results into the ``metrics`` a nightly comparison reads (reports/schema.md).

Benchmarks declare their own metrics (``Benchmark.metrics``); the counts of
the conformance and strength runs are exact and gated, except the number of
passing tests, which grows as tests are added and is informative.
"""

from __future__ import annotations

from benchmarks import BENCHMARKS
from benchmarks.registry import Metric

from .model import Results


def collect_metrics(results: Results) -> dict[str, Metric]:
    metrics: dict[str, Metric] = {}

    def add(more: dict[str, Metric]) -> None:
        for key, metric in more.items():
            if key in metrics:
                raise ValueError(f"metric {key!r}: got it twice, but every key should be unique")
            metrics[key] = metric

    for r in results.conformance:
        key = f"conformance/{r.suite}/{r.impl}"
        add({f"{key}/failed": Metric.count(r.failed + r.errors, "tests", "lower", True),
             f"{key}/passed": Metric.count(r.passed, "tests", "higher", False)})
    for r in results.strength:
        add({f"strength/{r.broken}/caught": Metric.count(int(r.caught), "", "higher", True)})
    for benchmark in BENCHMARKS:
        add(benchmark.metrics(results.records(benchmark.name)))
    return dict(sorted(metrics.items()))
