"""The bucket-size section: the inputs measured, every candidate predicted, and three sizes predicted against
measured; ``python -m reports.tune`` prints the same tables for a model of the user's."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from benchmarks.tuner.records import BucketSizeRecord
from benchmarks.stats import describe
from benchmarks.tuner.records import Prediction, Recommendation, Verification

from ..plots import plot_bucket_size
from ..table import bytes_label, cell, sampling_note, table


def size_cell(bucket_size: int | None, element_bytes: int) -> str:
    """'1,048,576 (4 MiB)', or 'one bucket'."""
    if bucket_size is None:
        return "one bucket"
    return f"{bucket_size:,} ({bytes_label(bucket_size * element_bytes)})"


def ms(value: float) -> str:
    """Milliseconds for a table: 4 significant digits, and whole ms with thousands apart from 10 s up."""
    return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"


def predictions_markdown(predictions: Sequence[Prediction], recommendation: Recommendation,
                         element_bytes: int) -> str:
    """One row per candidate, the recommendation marked (*) and its 5% range (~)."""
    rows = [{"": "*" if p.bucket_size == recommendation.bucket_size else
             "~" if p.bucket_size in recommendation.within else "",
             "bucket size, elements": size_cell(p.bucket_size, element_bytes), "why": "; ".join(p.origins),
             "buckets": f"{p.buckets:,}", "padding": f"{p.padding:,} ({p.padding_pct:.3g}%)",
             "exposed (ms)": ms(p.exposed_ms), "share of step": f"{p.share:.1%}",
             "launch (ms)": ms(p.launch_ms), "contention (ms)": ms(p.slowed_ms),
             "unhidden (ms)": ms(p.unhidden_ms), "step (ms)": ms(p.step_ms)}
            for p in predictions]
    return table(rows, numparse=False) + (
        "\n\nExposed = step - compute: the launches, the backward's slowdown while collectives run beside it "
        "(contention) and the communication after the backward. * recommended (the smallest exposed time); "
        f"~ within {recommendation.tolerance:.0%} of it.")


def recommendation_line(recommendation: Recommendation, element_bytes: int) -> str:
    low, high = recommendation.low, recommendation.high
    span = (size_cell(low, element_bytes) if low == high else
            f"{size_cell(low, element_bytes)} to {size_cell(high, element_bytes)}")
    chosen = recommendation.bucket_size
    size = "one bucket per buffer" if chosen is None else f"{size_cell(chosen, element_bytes)} elements per bucket"
    return (f"Recommended: {size}, "
            f"{ms(recommendation.exposed_ms)} ms exposed; within {recommendation.tolerance:.0%} of it: "
            f"{span}.")


def verification_markdown(verification: Verification, element_bytes: int) -> str:
    rows = [{"role": c.role, "bucket size, elements": size_cell(c.bucket_size, element_bytes),
             "buckets": c.buckets, "predicted step (ms)": cell(c.predicted_ms),
             "measured step (ms)": cell(c.measured_ms), "error": _error(c.error)}
            for c in verification.checks]
    verdict = "**Verified**" if verification.verified else "**UNVERIFIED**"
    return (table(rows, numparse=False) + f"\n\n{verdict} (target ±{verification.target:.0%}): "
            + verification.evidence() + ".")


def inputs_markdown(record: BucketSizeRecord) -> str:
    inputs = record.inputs
    curve = ", ".join(f"{bytes_label(p.size_bytes)} {describe(p.time_ms)} ms" for p in inputs.curve)
    return (f"Launch cost per bucket {describe(inputs.launch_ms)} ms; compute {describe(inputs.compute_ms)} "
            "ms; "
            f"contention {describe(inputs.contention_ms_per_mb)} ms per MB moved beside the backward; "
            f"{inputs.collective} in place: {curve}. "
            f"How: {inputs.method}.")


def markdown(records: Sequence[BucketSizeRecord]) -> str:
    parts = []
    for r in records:
        model = r.model
        parts += [
            f"### {model.depth} x Linear({model.width}, {model.width}), batch {model.batch}, {r.impl}; "
            f"{r.wait_ms:.3g} ms emulated backward per layer; {r.world_size} ranks, {r.backend}",
            verification_markdown(r.verification, r.element_bytes),
            recommendation_line(r.recommendation, r.element_bytes),
            predictions_markdown(r.predictions, r.recommendation, r.element_bytes),
            inputs_markdown(r) + f" Sampled: {sampling_note(r.sampling)}",
        ]
    return "\n\n".join(parts) + (
        "\n\nEach round measures the inputs and the three steps side by side, and its inputs predict its "
        "steps; predicted and measured are medians [95% interval] over the rounds, and the error is "
        "predicted / measured - 1 per round. The method and what it leaves out: docs/tuning.md.")


def plots(records: Sequence[BucketSizeRecord], out: Path) -> list[Path]:
    return [plot_bucket_size(r, out) for r in records]


def _error(error) -> str:
    interval = error.interval
    shown = f"{error.median:+.1%}"
    return shown + (f" [{interval[0]:+.1%}, {interval[1]:+.1%}]" if interval else " [n<6]")
