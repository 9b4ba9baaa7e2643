"""Measuring a per-parameter all-reduce against bucketed, overlapped sync (``benchmarks.bucketing`` defines its records)."""

from __future__ import annotations

from functools import partial

import torch
import torch.distributed as dist

from reference.config import DDPConfig
from reference.ddp import DistributedDataParallel

from ..bucketing import BUCKET_MIB, MODELS, BucketingRecord, SizedModel
from ..measurable import lone_rank, ratio
from ..sampling import rotating_round, sample
from ..settings import Model
from ..stats import Figure
from .emulation import layer_stack
from .timing import milliseconds


def _steps(ctx, model: Model):
    x = torch.randn(model.batch, model.width, generator=torch.Generator().manual_seed(ctx.rank)).to(ctx.device)
    naive_net = layer_stack(model).to(ctx.device)

    def naive():
        naive_net(x).square().mean().backward()
        for p in naive_net.parameters():
            dist.all_reduce(p.grad, group=ctx.group)
            p.grad.div_(ctx.world_size)
        naive_net.zero_grad(set_to_none=True)

    config = DDPConfig(overlap_grad_reduce=True, bucket_size=BUCKET_MIB * 2**20 // 4)
    ddp = DistributedDataParallel(layer_stack(model).to(ctx.device), config, ctx.group)

    def bucketed():
        ddp(x).square().mean().backward()
        ddp.finish_grad_sync()
        ddp.zero_grad_buffer()

    return naive, bucketed


def measure(ctx, settings) -> list[BucketingRecord]:
    records = []
    for label, model in MODELS.items():
        if settings.smoke:
            model = settings.real
        naive, bucketed = _steps(ctx, model)
        times = {"naive": [], "bucketed": []}
        one_round = rotating_round({"naive": partial(milliseconds, ctx, naive),
                                    "bucketed": partial(milliseconds, ctx, bucketed)}, times)
        sampled = sample(ctx, settings.sampling("bucketing", gated=False), one_round, dict)
        refused = lone_rank(ctx.world_size, "for buckets to save")
        speedup, refused = (None, refused) if refused else ratio(times["naive"], times["bucketed"], "higher",
                                                                 "the bucketed step", "ms")
        records.append(BucketingRecord(
            model=SizedModel(label, model.width, model.depth, model.batch, model.width * model.width * model.depth),
            naive_ms=Figure.of(times["naive"], "ms", "lower"), bucketed_ms=Figure.of(times["bucketed"], "ms", "lower"),
            speedup=speedup, refused=refused, sampling=sampled, world_size=ctx.world_size))
    return records
