"""Flattening a run's results into the ``metrics`` a nightly comparison reads (reports/schema.md).

Benchmarks declare their own metrics (``Benchmark.metrics``); the counts of
the conformance and strength runs are exact and gated, except the number of
passing tests, which grows as tests are added and is informative.
"""

from __future__ import annotations

from benchmarks import BENCHMARKS
from benchmarks.registry import Metric


def collect_metrics(results: dict) -> dict[str, dict]:
    metrics: list[Metric] = []
    for r in results.get("conformance", []):
        key = f"conformance/{r['suite']}/{r['impl']}"
        metrics.append(Metric(f"{key}/failed", "tests", "lower", True, count=r["failed"] + r["errors"]))
        metrics.append(Metric(f"{key}/passed", "tests", "higher", False, count=r["passed"]))
    for r in results.get("strength", []):
        metrics.append(Metric(f"strength/{r['broken']}/caught", "", "higher", True, count=int(r["caught"])))
    for benchmark in BENCHMARKS:
        metrics += benchmark.metrics(benchmark.records_of(results))
    out: dict[str, dict] = {}
    for metric in metrics:
        if metric.key in out:
            raise ValueError(f"metric {metric.key!r}: got it twice, but every key should be unique")
        out[metric.key] = metric.to_json()
    return out
