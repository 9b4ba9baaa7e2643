"""The timing harness's own cost: ``timing.timed`` against a bare loop of the same all-reduce.

Measured in alternating rounds (harness first in even rounds, the bare loop
first in odd ones), so the ratio per round is taken side by side. Goal:
under 1.02, i.e. the harness adds less than 2% to what it measures.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from .busbw import ELEMENT
from .registry import Benchmark, Metric, Record, cell, figure_of, figures_json
from .stats import Figure
from .timing import timed

COUNT = 2**18  # 1 MiB of fp32
CALLS = 100  # a 1 MiB all-reduce on gloo varies 2-3x from call to call: average many

RECORD = Record({
    "count": "elements per all-reduce",
    "calls": "calls per round",
    "harness_over_bare": "figure: per round, the harness's time per call over the bare loop's",
    "world_size": "ranks",
})


def bare_loop(ctx, tensor: torch.Tensor, calls: int) -> float:
    """The same all-reduces, timed inline: the slowest rank's mean seconds per call."""
    dist.barrier(group=ctx.group)
    start = time.perf_counter()
    for _ in range(calls):
        dist.all_reduce(tensor, group=ctx.group)
    ctx.sync()
    elapsed = torch.tensor([(time.perf_counter() - start) / calls], dtype=torch.float64, device=ctx.device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=ctx.group)
    return float(elapsed.item())


def measure(ctx, settings) -> list[dict]:
    tensor = torch.ones(COUNT, dtype=ELEMENT, device=ctx.device)
    calls = 1 if settings.smoke else CALLS
    ratios = []
    for i in range(settings.warmup + settings.rounds):
        harness = lambda: timed(ctx, lambda: dist.all_reduce(tensor, group=ctx.group), calls)  # noqa: E731
        bare = lambda: bare_loop(ctx, tensor, calls)  # noqa: E731
        first, second = (harness, bare) if i % 2 == 0 else (bare, harness)
        a, b = first(), second()
        h, w = (a, b) if i % 2 == 0 else (b, a)
        if i >= settings.warmup:
            ratios.append(h / w)
    return [{"count": COUNT, "calls": calls, "world_size": ctx.world_size,
             **figures_json(harness_over_bare=Figure.of(ratios, "x", "lower"))}]


def metrics(records: list[dict]) -> list[Metric]:
    return [Metric("harness/overhead_ratio", "x", "lower", True, figure=figure_of(r, "harness_over_bare"))
            for r in records]


def markdown(records: list[dict]) -> str:
    return "\n".join(f"Timing harness vs a bare loop of the same all-reduce ({r['count']:,} fp32, "
                     f"{r['calls']} calls a round): {cell(r, 'harness_over_bare')}x (goal: < 1.02x)."
                     for r in records)


BENCHMARK = Benchmark(
    name="harness_overhead",
    title="Timing harness overhead",
    record=RECORD,
    run=measure,
    metrics=metrics,
    markdown=markdown,
)
