"""What the project's own machinery costs: the timing harness, and the recording group the suites hand out.

- **timing harness**: ``timing.timed`` against a bare loop of the same
  all-reduce. Goal: under 1.02, i.e. the harness adds less than 2% to what
  it measures. Gated: a harness that got slower would skew every figure.
- **recording group** (``ranks.recording``): the same all-reduces through a
  recorder of the group against the group itself, at a small size (where a
  per-call cost shows) and at 1 MiB. Informative: it is what the suites'
  observation costs a check, not what a user's training pays.

Each pair is measured in alternating rounds (one first in even rounds, the
other in odd ones), so the ratio per round is taken side by side. At one
rank the all-reduce moves nothing, so there is no collective for the
machinery's share to be taken of: the ratios are null, with that reason.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from ranks.recording import recording

from .busbw import ELEMENT
from .measurable import lone_rank
from .registry import Benchmark, Metric, Record, figure_of, figures_json
from .stats import Figure
from .timing import timed

COUNT = 2**18  # 1 MiB of fp32
SMALL = 256  # 1 KiB: where a per-call cost shows
CALLS = 100  # a 1 MiB all-reduce on gloo varies 2-3x from call to call: average many

RECORD = Record({
    "what": "timing harness (timed against a bare loop) or recording group (through a recorder against direct)",
    "count": "elements per all-reduce",
    "calls": "calls per round",
    "ratio": "figure: per round, the time per call with the machinery over without it; null when not measurable",
    "why_not_measurable": "why the ratio is not given (one rank), or null",
    "world_size": "ranks",
})


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


def side_by_side(rounds: int, warmup: int, with_it, without_it) -> list[float]:
    """Per round, ``with_it()`` over ``without_it()``, the order alternating from round to round."""
    ratios = []
    for i in range(warmup + rounds):
        if i % 2 == 0:
            a, b = with_it(), without_it()
        else:
            b, a = without_it(), with_it()
        if i >= warmup:
            ratios.append(a / b)
    return ratios


def measure(ctx, settings) -> list[dict]:
    calls = 1 if settings.smoke else CALLS
    why = lone_rank(ctx.world_size, "for the machinery to add to")
    if why:
        return [{"what": what, "count": count, "calls": 0, "world_size": ctx.world_size, "ratio": None,
                 "why_not_measurable": why}
                for what, count in (("timing harness", COUNT), ("recording group", SMALL), ("recording group", COUNT))]
    tensor = torch.ones(COUNT, dtype=ELEMENT, device=ctx.device)
    reduce = lambda: dist.all_reduce(tensor, group=ctx.group)  # noqa: E731
    harness = side_by_side(settings.rounds, settings.warmup, lambda: timed(ctx, reduce, calls),
                           lambda: bare_loop(ctx, reduce, calls))
    records = [{"what": "timing harness", "count": COUNT, "calls": calls, "world_size": ctx.world_size,
                "why_not_measurable": None, **figures_json(ratio=Figure.of(harness, "x", "lower"))}]
    recorder = recording(ctx.group)
    for count in (SMALL, COUNT):
        data = torch.ones(count, dtype=ELEMENT, device=ctx.device)
        through = lambda: dist.all_reduce(data, group=recorder)  # noqa: E731
        direct = lambda: dist.all_reduce(data, group=ctx.group)  # noqa: E731
        ratios = side_by_side(settings.rounds, settings.warmup, lambda: bare_loop(ctx, through, calls),
                              lambda: bare_loop(ctx, direct, calls))
        recorder.clear()  # the record of these calls is not wanted
        records.append({"what": "recording group", "count": count, "calls": calls, "world_size": ctx.world_size,
                        "why_not_measurable": None, **figures_json(ratio=Figure.of(ratios, "x", "lower"))})
    return records


def metrics(records: list[dict]) -> list[Metric]:
    out = []
    for r in (r for r in records if r["ratio"] is not None):
        if r["what"] == "timing harness":
            out.append(Metric("harness/overhead_ratio", "x", "lower", True, figure=figure_of(r, "ratio")))
        else:
            out.append(Metric(f"harness/recorder_overhead_ratio/{r['count']}", "x", "lower", False,
                              figure=figure_of(r, "ratio")))
    return out


BENCHMARK = Benchmark(
    name="harness_overhead",
    title="What the harness costs: timing, and the recording group",
    record=RECORD,
    run=measure,
    metrics=metrics,
)
