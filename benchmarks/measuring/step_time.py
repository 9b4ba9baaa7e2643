"""Measuring the step time (``benchmarks.step_time`` defines its records)."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Sequence

import torch


from ..measurable import ratio
from ..sampling import GATE_RULES, carried, launch_target, rotating_round, sample
from ..stats import Figure
from ..step_time import BASELINE, StepModel, StepTimeRecord
from . import implementations_for
from .emulation import layer_stack, step_config
from .timing import milliseconds

LR = 1e-3


def _impl_step(ctx, impl, model, x):
    from suites.impls.stepping import optimizer_for

    net = layer_stack(model).to(ctx.device)
    ddp = impl.wrap(net, step_config(model), ctx.group, ctx.control_group)
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


def measure(ctx, settings, earlier: Sequence[StepTimeRecord] = ()) -> list[StepTimeRecord]:
    """The records over this launch's rounds and those of the launches before it (``earlier``: their records)."""
    model = settings.real
    x = torch.randn(model.batch, model.width, generator=torch.Generator().manual_seed(ctx.rank)).to(ctx.device)
    steps = {i.name: _impl_step(ctx, i, model, x) for i in implementations_for(settings.impls, step_config(model), ctx)}
    steps[BASELINE] = _baseline_step(ctx, model, x)
    times = {name: [] for name in steps}
    order = list(steps)
    before = _rounds_before(earlier, order)
    launch = earlier[0].sampling.launches + 1 if earlier else 1
    one_round = rotating_round({name: partial(milliseconds, ctx, step) for name, step in steps.items()}, times)

    def so_far(name: str) -> list[float]:
        return [*before[name], *times[name]]

    def ratios() -> dict:
        return {name: ratio(so_far(name), so_far(BASELINE), "lower", "torch DDP's step", "ms")
                for name in order if name != BASELINE}

    def targets() -> dict:
        target = launch_target(GATE_RULES["ratio"].target, launch, settings.launches)
        return {name: (figure, target) for name, (figure, _) in ratios().items()}

    sampling = settings.sampling("step_time")
    if sampling.fixed_rounds is None:
        sampling = replace(sampling, budget_s=sampling.budget_s / settings.launches)
    sampled = carried(earlier[0].sampling if earlier else None, sample(ctx, sampling, one_round, targets))
    base = Figure.of(so_far(BASELINE), "ms", "lower")
    shape = StepModel(model.width, model.depth, model.batch)
    return [StepTimeRecord(impl=name, impl_ms=Figure.of(so_far(name), "ms", "lower"), torch_ddp_ms=base,
                           ratio=figure, refused=refused, sampling=sampled, model=shape, world_size=ctx.world_size)
            for name, (figure, refused) in ratios().items()]


def _rounds_before(earlier: Sequence[StepTimeRecord], order: Sequence[str]) -> dict[str, tuple[float, ...]]:
    """Each step's rounds in the launches before this one; refused when they timed other implementations."""
    if not earlier:
        return {name: () for name in order}
    got = sorted([r.impl for r in earlier] + [BASELINE])
    if got != sorted(order):
        raise ValueError(f"earlier launches: got the steps of {got}, but should be those of {sorted(order)}")
    return {BASELINE: earlier[0].torch_ddp_ms.samples, **{r.impl: r.impl_ms.samples for r in earlier}}
