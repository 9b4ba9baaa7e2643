"""What a bucket-size prediction rests on, measured on the ranks at hand, round by round.

The model is the emulated-overlap benchmark's (``benchmarks.measuring.emulation``):
bias-free Linear(width, width) layers whose backward also waits a fixed time,
reduced by an implementation in overlapped buckets of whole layers. Each
input is the slowest rank's, per round:

- **curve**: an in-place all-reduce (a bucket is a view of its grad buffer)
  of every size a candidate's buckets have, alone;
- **launch cost** per bucket: the backward of a ``depth``-layer
  Linear(32) stack with one bucket per layer, minus the same with one
  bucket, over the extra buckets. Its collectives (4 KB) are too small to
  contend with anything, so what is left is the implementation's own work
  per bucket on the backward's critical path;
- **compute**: the model's backward with one bucket, whose one launch comes
  at its end (so nothing overlaps it), less one launch: the hooks' work per
  param and the launch's work per byte (scaling the grads) are in it, as
  they are at every bucket size;
- **contention**: the same backward with an all-reduce of half the model
  launched at its start, minus without, per MB that all-reduce moved: the
  backward time a collective costs per byte it moves beside it (on CPU
  ranks, the copying and summing of gloo's threads; a latency-bound
  collective, moving few bytes for its time, costs little). It is used
  held at 0 or more.

A step is the backward and ``finish_grad_sync`` from the backward's start
(the forward is not timed), the slowest rank's.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Callable, Sequence

import torch
import torch.distributed as dist

from reference.config import DDPConfig
from reference.layout import LayoutConfig, ParamSpec

from ..measuring.busbw import ELEMENT, make_buffers
from ..measuring.emulation import layer_stack
from ..measuring.timing import slowest
from ..settings import Model
from ..stats import Figure
from .compute import profile_given_total
from .curve import CollectiveCurve
from .method import Inputs
from .records import CurvePoint, MeasuredInputs

COLLECTIVE = "all_reduce"  # packed buckets, no distributed optimizer: what the emulated model runs
TINY_WIDTH = 32
TINY_WAIT_S = 5e-4  # long enough for a 4 KB all-reduce to finish inside each layer's backward
Op = Callable[[], float]


def model_specs(model: Model) -> list[ParamSpec]:
    """The emulated model's params as the implementation names them."""
    return [ParamSpec(f"{i}.linear.weight", (model.width, model.width)) for i in range(model.depth)]


def layout_config(world_size: int, bucket_size: int | None) -> LayoutConfig:
    """How the implementation plans the model: packed buckets (all-reduce), as ``ddp_config`` asks."""
    return LayoutConfig(dp=world_size, policy="packed", bucket_size=bucket_size)


def ddp_config(bucket_size: int | None) -> DDPConfig:
    """Overlapped buckets of ``bucket_size`` elements; None: one bucket."""
    return DDPConfig(overlap_grad_reduce=True, bucket_size=bucket_size, disable_bucketing=bucket_size is None)


def wrapped(ctx, impl, model: Model, wait_s: float, bucket_size: int | None):
    """``impl``'s DDP over the emulated model (``wait_s`` a layer's backward), buckets of ``bucket_size``."""
    net = layer_stack(model, wait_s).to(ctx.device)
    return impl.wrap(net, ddp_config(bucket_size), ctx.group, ctx.control_group)


class Probe:
    """The models, buffers and timed operations of one tuning measurement, on this rank."""

    def __init__(self, ctx, impl, model: Model, wait_s: float, curve_bytes: Sequence[int],
                 beside_bytes: int) -> None:
        self.ctx, self.impl, self.model, self.wait_s = ctx, impl, model, wait_s
        gen = torch.Generator().manual_seed(ctx.rank)
        self.x = torch.randn(model.batch, model.width, generator=gen).to(ctx.device)
        self.launch = launch_ops(ctx, impl, model.depth, model.batch)
        self.one = wrapped(ctx, impl, model, wait_s, None)
        self.buckets = {size: make_buffers(COLLECTIVE, "in-place", size // ELEMENT.itemsize, ctx.world_size,
                                           ctx.device).bucket for size in curve_bytes}
        self.beside = self.buckets[beside_bytes]
        self.steps: dict[str, object] = {}

    def add_steps(self, sizes: dict[str, int | None]) -> None:
        """The models whose steps are measured, by role, with buckets of each size."""
        self.steps = {role: wrapped(self.ctx, self.impl, self.model, self.wait_s, size)
                      for role, size in sizes.items()}

    def ops(self) -> dict[str, Op]:
        """Every timed operation of a round, by name."""
        return {**self.launch,
                "compute": partial(backward_s, self.ctx, self.one, self.x),
                "compute beside": partial(backward_s, self.ctx, self.one, self.x, self.beside),
                **{f"curve/{size}": partial(collective_s, self.ctx, b) for size, b in self.buckets.items()},
                **{f"step/{role}": partial(step_s, self.ctx, d, self.x) for role, d in self.steps.items()}}


def launch_ops(ctx, impl, depth: int, batch: int, prefix: str = "launch") -> dict[str, Op]:
    """The two backwards whose difference is ``impl``'s launch cost (``launch_cost``): a ``depth``-layer
    Linear(32) stack with one bucket per layer, and with one bucket."""
    tiny = Model(width=TINY_WIDTH, depth=depth, batch=batch)
    x = torch.randn(batch, TINY_WIDTH, generator=torch.Generator().manual_seed(ctx.rank)).to(ctx.device)
    return {f"{prefix}/{name}": partial(backward_s, ctx, wrapped(ctx, impl, tiny, TINY_WAIT_S, size), x)
            for name, size in (("per layer", tiny.bucket_elements), ("one bucket", None))}


def launch_cost(times: dict[str, list[float]], depth: int, prefix: str = "launch") -> list[float]:
    """Seconds per bucket, per round: the per-layer backward minus the one-bucket one, over the extra
    buckets."""
    many, one = times[f"{prefix}/per layer"], times[f"{prefix}/one bucket"]
    if depth < 2:
        return [0.0] * len(one)
    return [(m - o) / (depth - 1) for m, o in zip(many, one)]


def backward_s(ctx, ddp, x: torch.Tensor, beside: torch.Tensor | None = None) -> float:
    """Seconds from the backward's start until it returned (on CUDA: until its compute stream is done; the
    collectives run on their own), with ``beside`` all-reduced from its start; the sync is not timed."""
    loss = ddp(x).square().mean()
    _start(ctx)
    start = time.perf_counter()
    work = dist.all_reduce(beside, group=ctx.group, async_op=True) if beside is not None else None
    loss.backward()
    if ctx.device.type == "cuda":
        torch.cuda.current_stream(ctx.device).synchronize()
    seconds = time.perf_counter() - start
    ddp.finish_grad_sync()
    if work is not None:
        work.wait()
    ctx.sync()
    ddp.zero_grad_buffer()
    return slowest(ctx, seconds)


def step_s(ctx, ddp, x: torch.Tensor) -> float:
    """Seconds of the backward and the gradient sync."""
    loss = ddp(x).square().mean()
    _start(ctx)
    start = time.perf_counter()
    loss.backward()
    ddp.finish_grad_sync()
    ctx.sync()
    seconds = time.perf_counter() - start
    ddp.zero_grad_buffer()
    return slowest(ctx, seconds)


def collective_s(ctx, bucket: torch.Tensor) -> float:
    _start(ctx)
    start = time.perf_counter()
    dist.all_reduce(bucket, group=ctx.group)
    ctx.sync()
    return slowest(ctx, time.perf_counter() - start)


def _start(ctx) -> None:
    """Every rank starts the timed work together."""
    ctx.sync()
    dist.barrier(group=ctx.group)


def measured_inputs(times: dict[str, list[float]], depth: int, beside_bytes: int, curve_bytes: Sequence[int],
                    world_size: int) -> MeasuredInputs:
    """The inputs, round by round, from the rounds' timed operations (seconds)."""
    launch = launch_cost(times, depth)
    compute = [c - l for c, l in zip(times["compute"], launch)]
    per_mb = beside_bytes / 1e6
    contention = [(b - c) * 1e3 / per_mb for c, b in zip(times["compute"], times["compute beside"])]
    ms = lambda seconds: Figure.of([s * 1e3 for s in seconds], "ms", "lower")  # noqa: E731
    curve = tuple(CurvePoint(size, ms(times[f"curve/{size}"])) for size in sorted(curve_bytes))
    method = (f"curve: an in-place {COLLECTIVE} of each bucket size, alone; launch cost: the backward of a "
              f"{depth}-layer Linear({TINY_WIDTH}) stack with one bucket per layer minus with one bucket, "
              f"over the {depth - 1} extra buckets (its collectives too small to contend); compute: the "
              "model's backward with one bucket (launched at its end, nothing overlaps) less one launch; "
              f"contention: that backward with an all-reduce of {beside_bytes:,} B launched at its start, "
              "minus without, per MB that all-reduce moved; every figure the slowest rank's, measured in the "
              "same rounds as the steps")
    return MeasuredInputs(COLLECTIVE, world_size, curve, ms(launch), ms(compute),
                          Figure.of(contention, "ms/MB", "lower", "absolute"), method)


def inputs_at(measured: MeasuredInputs, index: int | None, specs: Sequence[ParamSpec]) -> Inputs:
    """The inputs of round ``index`` (None: every figure's median) for a model of ``specs``."""
    def pick(figure: Figure) -> float:
        return figure.median if index is None else figure.samples[index]

    points = [(p.size_bytes, pick(p.time_ms) / 1e3) for p in measured.curve]
    curve = CollectiveCurve.from_points(measured.collective, measured.world_size, points)
    compute = profile_given_total(specs, max(pick(measured.compute_ms), 1e-6) / 1e3).backward()
    return Inputs(compute, curve, max(pick(measured.launch_ms), 0.0) / 1e3,
                  max(pick(measured.contention_ms_per_mb), 0.0) / 1e9)
