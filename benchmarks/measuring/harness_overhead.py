"""Measuring what the project's own machinery costs (``benchmarks.harness_overhead`` defines its records)."""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from ranks.recording import recording

from ..harness_overhead import HarnessRecord
from ..measurable import Refusal, lone_rank, ratio
from ..sampling import GATE_RULES, Sampled, rotating_round, sample
from ..stats import Figure
from .busbw import ELEMENT
from .timing import timed

COUNT = 2**18  # 1 MiB of fp32
SMALL = 256  # 1 KiB: where a per-call cost shows
CALLS = 100  # a 1 MiB all-reduce on gloo varies 2-3x from call to call: average many


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
