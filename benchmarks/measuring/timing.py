"""One timed sample on every rank: the slowest rank's seconds, the same number on every rank."""

from __future__ import annotations

import time

import torch
import torch.distributed as dist


def timed(ctx, op, calls: int = 1) -> float:
    """Seconds per call of ``calls`` back-to-back calls of ``op``, started together, the slowest rank's mean.

    Ranks start after a barrier; queued device work is waited for on both
    sides, so the timer measures the work and not its launch.
    """
    ctx.sync()
    dist.barrier(group=ctx.group)
    start = time.perf_counter()
    for _ in range(calls):
        op()
    ctx.sync()
    return slowest(ctx, (time.perf_counter() - start) / calls)


def slowest(ctx, seconds: float) -> float:
    """The largest of every rank's ``seconds``: a step is as slow as its slowest rank."""
    elapsed = torch.tensor([seconds], dtype=torch.float64, device=ctx.device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=ctx.group)
    return float(elapsed.item())


def milliseconds(ctx, op) -> float:
    """``timed`` for one call, in milliseconds: the unit the step-time figures are shown in."""
    return timed(ctx, op) * 1e3
