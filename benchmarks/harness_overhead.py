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

import time
from dataclasses import dataclass
from typing import Sequence

import torch
import torch.distributed as dist

from datamodel import doc
from ranks.recording import recording

from .busbw import ELEMENT
from .measurable import Refusal, lone_rank, ratio
from .registry import Benchmark, Metric, gated, informative
from .sampling import GATE_RULES, Sampled, rotating_round, sample
from .stats import Figure
from .timing import timed

COUNT = 2**18  # 1 MiB of fp32
SMALL = 256  # 1 KiB: where a per-call cost shows
CALLS = 100  # a 1 MiB all-reduce on gloo varies 2-3x from call to call: average many

@dataclass(frozen=True)
class HarnessRecord:
    """One piece of machinery, timed against the same all-reduces without it."""

    what: str = doc("timing harness (timed against a bare loop) or recording group (through a recorder against "
                    "direct)")
    count: int = doc("elements per all-reduce")
    calls: int = doc("calls per round")
    ratio: Figure | None = doc("per round, the time per call with the machinery over without it; null when refused")
    refused: Refusal | None = doc("why the ratio is not given (benchmarks/measurable.py), or null")
    sampling: Sampled | None = doc("rounds, warm-up, why sampling stopped, the target and whether it was met; null "
                                   "when nothing was sampled")
    world_size: int = doc("ranks")


def bare_loop(ctx, op, calls: int) -> float:
    """The calls timed inline: the slowest rank's mean seconds per call."""
    dist.barrier(group=ctx.group)
    start = time.perf_counter()
    for _ in range(calls):
        op()
    ctx.sync()
    elapsed = torch.tensor([(time.perf_counter() - start) / calls], dtype=torch.float64, device=ctx.device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=ctx.group)
    return float(elapsed.item())


def side_by_side(ctx, sampling, with_it, without_it, gated_as: str | None
                 ) -> tuple[Figure | None, Refusal | None, Sampled]:
    """``with_it()`` and ``without_it()`` per round, the order alternating; the record of the pair (its ratio or
    why it is refused, and how it was sampled). ``gated_as``: the gate rule its rounds are calibrated to."""
    times: dict[str, list[float]] = {"with": [], "without": []}
    one_round = rotating_round({"with": with_it, "without": without_it}, times)

    def targets() -> dict:
        figure, _ = ratio(times["with"], times["without"], "lower", "the time without it", "s")
        return {"ratio": (figure, GATE_RULES[gated_as].target)} if gated_as else {}

    sampled = sample(ctx, sampling, one_round, targets)
    return *ratio(times["with"], times["without"], "lower", "the time without it", "s"), sampled


def measure(ctx, settings) -> list[HarnessRecord]:
    calls = 1 if settings.smoke else CALLS
    refused = lone_rank(ctx.world_size, "for the machinery to add to")
    if refused:
        return [HarnessRecord(what=what, count=count, calls=0, ratio=None, refused=refused, sampling=None,
                              world_size=ctx.world_size)
                for what, count in (("timing harness", COUNT), ("recording group", SMALL), ("recording group", COUNT))]
    tensor = torch.ones(COUNT, dtype=ELEMENT, device=ctx.device)
    reduce = lambda: dist.all_reduce(tensor, group=ctx.group)  # noqa: E731
    figure, refused, sampled = side_by_side(ctx, settings.sampling("harness_overhead"),
                                            lambda: timed(ctx, reduce, calls), lambda: bare_loop(ctx, reduce, calls),
                                            "ratio")
    records = [HarnessRecord(what="timing harness", count=COUNT, calls=calls, ratio=figure, refused=refused,
                             sampling=sampled, world_size=ctx.world_size)]
    recorder = recording(ctx.group)
    for count in (SMALL, COUNT):
        data = torch.ones(count, dtype=ELEMENT, device=ctx.device)
        through = lambda: dist.all_reduce(data, group=recorder)  # noqa: E731
        direct = lambda: dist.all_reduce(data, group=ctx.group)  # noqa: E731
        figure, refused, sampled = side_by_side(ctx, settings.sampling("harness_overhead", gated=False),
                                                lambda: bare_loop(ctx, through, calls),
                                                lambda: bare_loop(ctx, direct, calls), None)
        recorder.clear()  # the record of these calls is not wanted
        records.append(HarnessRecord(what="recording group", count=count, calls=calls, ratio=figure, refused=refused,
                                     sampling=sampled, world_size=ctx.world_size))
    return records


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
    run=measure,
    metrics=metrics,
)
