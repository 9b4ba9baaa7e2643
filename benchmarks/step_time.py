"""Step time of every implementation against plain torch DistributedDataParallel, side by side in one run.

Each round times one training step (forward, backward, gradient sync, SGD
step, zeroing) of every implementation and of plain torch DDP on the same
model, data and bucket size, in an order that rotates from round to round,
so machine noise hits them alike; the figure per implementation is the
per-round ratio to torch DDP, gated, its rounds calibrated to its target
(``benchmarks.sampling``) and shared among ``BenchSettings.launches`` sets of
fresh ranks, since one process's level is its own. Goal for the reference:
<= 1.05 at world size 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from datamodel import doc

from .measurable import Refusal
from .registry import Benchmark, Metric, absolute, gated
from .sampling import Sampled
from .stats import Figure

BASELINE = "torch DDP (plain)"

@dataclass(frozen=True)
class StepModel:
    width: int = doc("width of each bias-free Linear layer")
    depth: int = doc("layers")
    batch: int = doc("rows of each rank's input")


@dataclass(frozen=True)
class StepTimeRecord:
    """One implementation's training step against plain torch DDP's, in the same rounds."""

    impl: str = doc("implementation")
    impl_ms: Figure = doc("the implementation's step")
    torch_ddp_ms: Figure = doc("plain torch DDP's step in the same rounds")
    ratio: Figure | None = doc("the implementation's step over torch DDP's, per round; null when refused")
    refused: Refusal | None = doc("why the ratio is not given (benchmarks/measurable.py), or null")
    sampling: Sampled = doc("rounds, warm-up, why sampling stopped, each ratio's target and whether it was met")
    model: StepModel = doc("width, depth and batch")
    world_size: int = doc("ranks")


def metrics(records: Sequence[StepTimeRecord]) -> dict[str, Metric]:
    out = {}
    for r in records:
        if r.ratio is not None:
            out[f"step_time/{r.impl}/ratio_to_torch_ddp"] = gated(r.ratio, "ratio", r.sampling, r.impl)
        out[f"step_time/{r.impl}/ms"] = absolute(r.impl_ms)
    return out


BENCHMARK = Benchmark(
    name="step_time",
    title="Step time against plain torch DDP",
    record=StepTimeRecord,
    runner="benchmarks.measuring.step_time:measure",
    metrics=metrics,
    relaunched=True,
)
