"""Measuring MXFP8's reuse of the grad buffer (``benchmarks.quantized_params`` defines its records)."""

from __future__ import annotations

from functools import partial

import torch

from reference.config import DDPConfig
from reference.quantize import MX

from ..measurable import ratio
from ..quantized_params import BufferBytes, QuantizedParamsRecord
from ..sampling import GATE_RULES, rotating_round, sample
from ..stats import Figure
from . import implementations_for
from .emulation import layer_stack
from .timing import milliseconds

LR = 1e-3
GRADS = {"bf16": False, "fp32": True}
"""The grads' dtype, by whether they are reduced in fp32."""


def config(fp32_grads: bool, reuse: bool, bucket_elements: int) -> DDPConfig:
    return DDPConfig(policy="padded", overlap_grad_reduce=True, bucket_size=bucket_elements,
                     grad_reduce_in_fp32=fp32_grads, fp8_param_gather=True, reuse_grad_buf_for_mxfp8_param_ag=reuse)


def stack(model, device):
    net = layer_stack(model).to(torch.bfloat16).to(device)
    for param in net.parameters():
        param.fp8_recipe = MX
    return net


def buffer_bytes(ddp) -> BufferBytes:
    """The buffers' storages, each once (a view of the grad memory adds nothing), and the planner's word."""
    storages = {}
    for buf in ddp.buffers:
        for tensor in (buf.grad_data, buf.param_data):
            if tensor is not None:
                storages[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
    return BufferBytes(measured=sum(storages.values()), planned=sum(b.layout.memory().total for b in ddp.buffers))


def _step(ctx, impl, model, x, cfg):
    from suites.impls.stepping import optimizer_for

    net = stack(model, ctx.device)
    ddp = impl.wrap(net, cfg, ctx.group, ctx.control_group)
    opt = optimizer_for(impl, ddp, net, lambda ps: torch.optim.SGD(ps, lr=LR))

    def step():
        ddp(x).float().square().mean().backward()
        ddp.finish_grad_sync()
        opt.step()
        opt.zero_grad()

    return ddp, step


def measure(ctx, settings) -> list[QuantizedParamsRecord]:
    model = settings.real
    x = torch.randn(model.batch, model.width, generator=torch.Generator().manual_seed(ctx.rank)).to(ctx.device)
    x = x.to(torch.bfloat16)
    records = []
    for impl in implementations_for(settings.impls, config(True, True, model.bucket_elements), ctx):
        steps, sizes = {}, {}
        for grads, fp32 in GRADS.items():
            for reuse in (False, True):
                ddp, steps[(grads, reuse)] = _step(ctx, impl, model, x, config(fp32, reuse, model.bucket_elements))
                sizes[(grads, reuse)] = buffer_bytes(ddp)
        times = {key: [] for key in steps}
        one_round = rotating_round({key: partial(milliseconds, ctx, step) for key, step in steps.items()}, times)

        def ratios() -> dict:
            return {grads: ratio(times[(grads, True)], times[(grads, False)], "lower", "the step without the reuse",
                                 "ms") for grads in GRADS}

        def targets() -> dict:
            return {grads: (figure, GATE_RULES["ratio"].target) for grads, (figure, _) in ratios().items()}

        sampled = sample(ctx, settings.sampling("quantized_params"), one_round, targets)
        for grads, (figure, refused) in ratios().items():
            without, reused = sizes[(grads, False)], sizes[(grads, True)]
            records.append(QuantizedParamsRecord(
                impl=impl.name, grads=grads, without=without, reused=reused,
                saved=round(1 - reused.measured / without.measured, 4),
                plain_ms=Figure.of(times[(grads, False)], "ms", "lower"),
                reuse_ms=Figure.of(times[(grads, True)], "ms", "lower"), ratio=figure, refused=refused,
                sampling=sampled, width=model.width, depth=model.depth, world_size=ctx.world_size))
    return records
