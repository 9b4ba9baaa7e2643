"""What bucketing buys: a naive per-parameter all-reduce against the reference's bucketed, overlapped sync.

The design notes claim bucketing speeds a step up 1.2-1.5x for models under
10M params, 1.5-2x up to 100M and 2-3x beyond. Each round times one step
(forward, backward, gradient sync) of both on the same model, side by side:
naive all-reduces every param's grad on its own after backward (and divides
by the world size); bucketed is the reference with 25 MiB buckets (the notes'
typical size) and overlap. The figure is naive's step over bucketed's, per
round. Models: bias-free Linear(width, width) stacks of about 2M and 13M
params; a model over 100M params does not fit this benchmark's time. At one
rank there is no communication for bucketing to save: the speed-up is null,
with that reason (``benchmarks.measurable``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from datamodel import doc

from .measurable import Refusal
from .registry import Benchmark, Metric, informative
from .sampling import Sampled
from .settings import Model
from .stats import Figure

MODELS = {"small (<10M)": Model(width=512, depth=8, batch=8), "medium (10M-100M)": Model(width=1024, depth=12, batch=8)}
BUCKET_MIB = 25

@dataclass(frozen=True)
class SizedModel:
    size_class: str = doc("the size class the notes name", json="class")
    width: int = doc("width of each bias-free Linear layer")
    depth: int = doc("layers")
    batch: int = doc("rows of each rank's input")
    params: int = doc("parameters")


@dataclass(frozen=True)
class BucketingRecord:
    """One model's step with a per-parameter all-reduce against the reference's bucketed, overlapped sync."""

    model: SizedModel = doc("size class the notes name, with width, depth, batch and params")
    naive_ms: Figure = doc("step with one all-reduce per param after backward")
    bucketed_ms: Figure = doc("step with the reference's 25 MiB buckets, overlapped")
    speedup: Figure | None = doc("naive step over bucketed step, per round; null when refused")
    refused: Refusal | None = doc("why the speed-up is not given (benchmarks/measurable.py), or null")
    sampling: Sampled = doc("rounds, warm-up and why sampling stopped (a fixed count: the speed-up is informative)")
    world_size: int = doc("ranks")


def metrics(records: Sequence[BucketingRecord]) -> dict[str, Metric]:
    return {f"bucketing/{r.model.size_class.split()[0]}/speedup": informative(r.speedup)
            for r in records if r.speedup is not None}


BENCHMARK = Benchmark(
    name="bucketing",
    title="Bucketing: per-parameter all-reduce against bucketed, overlapped sync",
    record=BucketingRecord,
    runner="benchmarks.measuring.bucketing:measure",
    metrics=metrics,
)
