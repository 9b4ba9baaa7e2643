"""What bucketing buys: a naive per-parameter all-reduce against the reference's bucketed, overlapped sync.

The design notes claim bucketing speeds a step up 1.2-1.5x for models under
10M params, 1.5-2x up to 100M and 2-3x beyond. Each round times one step
(forward, backward, gradient sync) of both on the same model, side by side:
naive all-reduces every param's grad on its own after backward (and divides
by the world size); bucketed is the reference with 25 MiB buckets (the notes'
typical size) and overlap. The figure is naive's step over bucketed's, per
round. Models: bias-free Linear(width, width) stacks of about 2M and 13M
params; a model over 100M params does not fit this benchmark's time. At one
rank there is no communication for bucketing to save: the speed-up is null,
with that reason (``benchmarks.measurable``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Sequence

import torch
import torch.distributed as dist

from datamodel import doc
from reference.config import DDPConfig
from reference.ddp import DistributedDataParallel

from .emulation import layer_stack
from .measurable import Refusal, lone_rank, ratio
from .registry import Benchmark, Metric, informative
from .settings import Model
from .sampling import Sampled, rotating_round, sample
from .stats import Figure
from .timing import milliseconds

MODELS = {"small (<10M)": Model(width=512, depth=8, batch=8), "medium (10M-100M)": Model(width=1024, depth=12, batch=8)}
BUCKET_MIB = 25

@dataclass(frozen=True)
class SizedModel:
    size_class: str = doc("the size class the notes name", json="class")
    width: int = doc("width of each bias-free Linear layer")
    depth: int = doc("layers")
    batch: int = doc("rows of each rank's input")
    params: int = doc("parameters")


@dataclass(frozen=True)
class BucketingRecord:
    """One model's step with a per-parameter all-reduce against the reference's bucketed, overlapped sync."""

    model: SizedModel = doc("size class the notes name, with width, depth, batch and params")
    naive_ms: Figure = doc("step with one all-reduce per param after backward")
    bucketed_ms: Figure = doc("step with the reference's 25 MiB buckets, overlapped")
    speedup: Figure | None = doc("naive step over bucketed step, per round; null when refused")
    refused: Refusal | None = doc("why the speed-up is not given (benchmarks/measurable.py), or null")
    sampling: Sampled = doc("rounds, warm-up and why sampling stopped (a fixed count: the speed-up is informative)")
    world_size: int = doc("ranks")


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


def metrics(records: Sequence[BucketingRecord]) -> dict[str, Metric]:
    return {f"bucketing/{r.model.size_class.split()[0]}/speedup": informative(r.speedup)
            for r in records if r.speedup is not None}


BENCHMARK = Benchmark(
    name="bucketing",
    title="Bucketing: per-parameter all-reduce against bucketed, overlapped sync",
    record=BucketingRecord,
    run=measure,
    metrics=metrics,
)
