"""What the project's own machinery costs: the timing harness, and the recording group the suites hand out.

- **timing harness**: ``timing.timed`` against a bare loop of the same
  all-reduce. Goal: under 1.02, i.e. the harness adds less than 2% to what
  it measures. Gated: a harness that got slower would skew every figure.
- **recording group** (``ranks.recording``): the same all-reduces through a
  recorder of the group against the group itself, at a small size (where a
  per-call cost shows) and at 1 MiB. Informative: it is what the suites'
  observation costs a check, not what a user's training pays.

Each pair is measured in alternating rounds (one first in even rounds, the
other in odd ones), so the ratio per round is taken side by side; the
timing harness's rounds are calibrated to its target (``benchmarks.sampling``).
At one rank the all-reduce moves nothing, so there is no collective for the
machinery's share to be taken of: the ratios are refused, with that reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

from datamodel import doc

from .measurable import Refusal
from .registry import Benchmark, Metric, gated, informative
from .sampling import Sampled
from .stats import Figure


@dataclass(frozen=True)
class HarnessRecord:
    """One piece of machinery, timed against the same all-reduces without it."""

    what: Literal["timing harness", "recording group"] = doc("timing harness (timed against a bare loop) or recording group (through a recorder against "
                    "direct)")
    count: int = doc("elements per all-reduce")
    calls: int = doc("calls per round")
    ratio: Figure | None = doc("per round, the time per call with the machinery over without it; null when refused")
    refused: Refusal | None = doc("why the ratio is not given (benchmarks/measurable.py), or null")
    sampling: Sampled | None = doc("rounds, warm-up, why sampling stopped, the target and whether it was met; null "
                                   "when nothing was sampled")
    world_size: int = doc("ranks")


def metrics(records: Sequence[HarnessRecord]) -> dict[str, Metric]:
    out = {}
    for r in (r for r in records if r.ratio is not None):
        if r.what == "timing harness":
            out["harness/overhead_ratio"] = gated(r.ratio, "ratio", r.sampling, "ratio")
        else:
            out[f"harness/recorder_overhead_ratio/{r.count}"] = informative(r.ratio)
    return out


BENCHMARK = Benchmark(
    name="harness_overhead",
    title="What the harness costs: timing, and the recording group",
    record=HarnessRecord,
    runner="benchmarks.measuring.harness_overhead:measure",
    metrics=metrics,
)
