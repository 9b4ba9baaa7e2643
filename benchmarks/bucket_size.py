"""Bucket size: the tuner's method (``benchmarks.tuner``) checked where it can be measured.

On the emulated-overlap benchmark's model (``depth`` Linear layers whose
backward also waits ``wait_ratio`` times one layer's all-reduce), at the
ranks at hand, in two phases:

1. **calibration** (a few fixed rounds): the inputs
   (``benchmarks.tuner.inputs``) are measured, every candidate (one layer
   per bucket, doubling up to one bucket, upstream's default, torch DDP's
   25 MiB) predicted, and the recommendation and the sizes to verify (it,
   the smallest candidate, one bucket; a size with the recommendation's very
   buckets left out) chosen;
2. **verification** (rounds calibrated to a target on the errors, within the
   benchmark's budget): every round measures the inputs again and the
   sizes' steps, in an order that rotates; each round's inputs predict that
   round's steps, so prediction and measurement share the machine's state.

The verdict is ``benchmarks.tuner.method.verify``'s, and unverified besides when
the size measured as recommended is no longer within 5% of the best the
verification rounds predict.
"""

from __future__ import annotations

from typing import Sequence

from .registry import Benchmark, Metric, absolute, informative
from .stats import Figure
from .tuner.records import IMPL, BucketSizeRecord

def metrics(records: Sequence[BucketSizeRecord]) -> dict[str, Metric]:
    """Informative: each verified size's prediction error (its size, per round) and measured step, and the
    launch cost; how well a model predicts a machine is no implementation's property to gate."""
    out: dict[str, Metric] = {}
    for r in records:
        for check in r.verification.checks:
            key = f"bucket_size/{check.role.replace(' ', '_')}"
            errors = Figure.of([abs(e) for e in check.error.samples], "", "lower", "absolute")
            out[f"{key}/abs_error"] = informative(errors)
            out[f"{key}/step_ms"] = absolute(check.measured_ms)
        out["bucket_size/launch_ms"] = absolute(r.inputs.launch_ms)
        out["bucket_size/verified"] = Metric.count(float(r.verification.verified), "", "higher", False)
    return out


BENCHMARK = Benchmark(
    name="bucket_size",
    title="Bucket size: the tuner's prediction against measured steps",
    record=BucketSizeRecord,
    runner="benchmarks.tuner.measure:measure",
    metrics=metrics,
)
