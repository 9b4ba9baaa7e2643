"""Step time of every implementation against plain torch DistributedDataParallel, side by side in one run.

Each round times one training step (forward, backward, gradient sync, SGD
step, zeroing) of every implementation and of plain torch DDP on the same
model, data and bucket size, in an order that rotates from round to round,
so machine noise hits them alike; the figure per implementation is the
per-round ratio to torch DDP, gated, its rounds calibrated to its target
(``benchmarks.sampling``). Goal for the reference: <= 1.05 at world size 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Sequence

import torch

from datamodel import doc
from reference.config import DDPConfig

from .emulation import layer_stack
from .measurable import Refusal, ratio
from .registry import Benchmark, Metric, absolute, gated
from .sampling import GATE_RULES, Sampled, rotating_round, sample
from .stats import Figure
from .timing import milliseconds

BASELINE = "torch DDP (plain)"
LR = 1e-3

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


def _impl_step(ctx, impl, model, x):
    from suites.impls.stepping import optimizer_for

    net = layer_stack(model).to(ctx.device)
    ddp = impl.wrap(net, DDPConfig(overlap_grad_reduce=True, bucket_size=model.bucket_elements), ctx.group,
                    ctx.control_group)
    opt = optimizer_for(impl, ddp, net, lambda ps: torch.optim.SGD(ps, lr=LR))

    def step():
        ddp(x).square().mean().backward()
        ddp.finish_grad_sync()
        opt.step()
        ddp.zero_grad_buffer()

    return step


def _baseline_step(ctx, model, x):
    net = layer_stack(model).to(ctx.device)
    device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    ddp = torch.nn.parallel.DistributedDataParallel(
        net, device_ids=device_ids, process_group=ctx.group, bucket_cap_mb=model.bucket_elements * 4 / 2**20)
    opt = torch.optim.SGD(net.parameters(), lr=LR)

    def step():
        ddp(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def measure(ctx, settings) -> list[StepTimeRecord]:
    from suites.impls import load_implementation

    model = settings.real
    x = torch.randn(model.batch, model.width, generator=torch.Generator().manual_seed(ctx.rank)).to(ctx.device)
    impls = [load_implementation(spec) for spec in settings.impls]
    steps = {i.name: _impl_step(ctx, i, model, x)
             for i in impls if i.unavailable is None and "ddp" in i.capabilities}
    steps[BASELINE] = _baseline_step(ctx, model, x)
    times = {name: [] for name in steps}
    order = list(steps)
    one_round = rotating_round({name: partial(milliseconds, ctx, step) for name, step in steps.items()}, times)

    def ratios() -> dict:
        return {name: ratio(times[name], times[BASELINE], "lower", "torch DDP's step", "ms")
                for name in order if name != BASELINE}

    def targets() -> dict:
        return {name: (figure, GATE_RULES["ratio"].target) for name, (figure, _) in ratios().items()}

    sampled = sample(ctx, settings.sampling("step_time"), one_round, targets)
    base = Figure.of(times[BASELINE], "ms", "lower")
    shape = StepModel(model.width, model.depth, model.batch)
    return [StepTimeRecord(impl=name, impl_ms=Figure.of(times[name], "ms", "lower"), torch_ddp_ms=base, ratio=figure,
                           refused=refused, sampling=sampled, model=shape, world_size=ctx.world_size)
            for name, (figure, refused) in ratios().items()]


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
    run=measure,
    metrics=metrics,
)
