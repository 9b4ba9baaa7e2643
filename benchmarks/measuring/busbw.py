"""Measuring the bus-bandwidth sweep (``benchmarks.busbw`` defines its records and the method)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import torch
import torch.distributed as dist

from reference.buffer import shard_buffer
from reference.collectives import all_gather, reduce_scatter
from reference.layout import POLICIES, get_policy, pad

from ..busbw import COLLECTIVES, GATED_PLACEMENT, PLACEMENTS, BusbwRecord, bandwidths, bucket_count
from ..measurable import Refusal, lone_rank, ratio
from ..sampling import GATE_RULES, Sampled, Sampling, rotating_round, sample
from ..stats import Figure
from .timing import timed

# "unpadded" beside every policy that pads for the distributed optimizer.
PADDINGS = ("unpadded", *(name for name, p in POLICIES.items() if p.distributed_optimizer))
ELEMENT = torch.float32
"""Of ``ELEMENT_BYTES`` each (tests/benchmarks/test_busbw.py holds them together)."""


def padded_count(count: int, policy: str, collective: str, n: int) -> int:
    if policy == "unpadded":
        return count if collective == "all_reduce" else pad(count, n)
    return pad(count, get_policy(policy).bucket_divisor(n))


NCCL_CALLS = 20  # nccl-tests' default -n: back-to-back calls per timed sample


def calls_per_round(size_bytes: int, smoke: bool, backend: str = "gloo") -> int:
    """Calls averaged into one sample: enough to outlast the timer, fixed by size, identical on every rank.

    NCCL's large collectives take a millisecond or less: one call between two device syncs and a barrier
    would time the syncs, so every sample is 20 calls, as nccl-tests'.
    """
    if smoke:
        return 1
    if backend == "nccl":
        return NCCL_CALLS
    if size_bytes <= 64 * 2**10:
        return 20
    if size_bytes <= 2**20:
        return 5
    return 1


@dataclass
class Buffers:
    """Tensors for one (collective, placement, count): reset to known values before the check."""

    collective: str
    placement: str
    bucket: torch.Tensor
    shards: list[torch.Tensor]
    out: torch.Tensor | None

    def op(self, rank: int, group):
        if self.collective == "all_reduce":
            return lambda: dist.all_reduce(self.bucket, group=group)
        if self.collective == "reduce_scatter":
            target = self.shards[rank] if self.placement == "in-place" else self.out
            return lambda: reduce_scatter(target, self.bucket, group=group)
        source = self.shards[rank] if self.placement == "in-place" else self.out
        return lambda: all_gather(self.bucket, source, group=group)

    def fill(self, rank: int) -> None:
        """All-reduce / reduce-scatter inputs hold rank+1; an all-gather source holds rank+1."""
        if self.collective == "all_gather":
            (self.shards[rank] if self.placement == "in-place" else self.out).fill_(rank + 1)
        else:
            self.bucket.fill_(rank + 1)

    def wrong(self, rank: int, n: int) -> int:
        total = n * (n + 1) / 2
        if self.collective == "all_reduce":
            return int((self.bucket != total).sum())
        if self.collective == "reduce_scatter":
            got = self.shards[rank] if self.placement == "in-place" else self.out
            return int((got != total).sum())
        expected = torch.cat([torch.full_like(s, r + 1) for r, s in enumerate(self.shards)])
        return int((self.bucket != expected).sum())


def make_buffers(collective: str, placement: str, count: int, n: int, device) -> Buffers:
    """In-place: the bucket is the second bucket of a two-bucket buffer (a view at an offset,
    as DDP uses it) and shards are its cached views; out-of-place: standalone tensors.
    torch's all-reduce always works in place, so for it only the bucket's home differs."""
    if placement == "in-place":
        offset = pad(count, 128)
        bucket = torch.zeros(offset + count, dtype=ELEMENT, device=device)[offset:]
    else:
        bucket = torch.zeros(count, dtype=ELEMENT, device=device)
    shards = shard_buffer(bucket, n) if collective != "all_reduce" else []
    out = None
    if placement == "out-of-place" and collective != "all_reduce":
        out = torch.zeros(count // n, dtype=ELEMENT, device=device)
    return Buffers(collective, placement, bucket, shards, out)


def measure(ctx, settings) -> list[dict]:
    """Every (size, collective, placement) with its paddings interleaved per round; identical on every rank."""
    sweep, n, records = settings.busbw, ctx.world_size, []
    fixed = Sampling(fixed_rounds=sweep.rounds, fixed_warmup=sweep.warmup)
    for size in sweep.sizes:
        requested = bucket_count(size)
        calls = calls_per_round(size, settings.smoke, ctx.backend)
        for collective in COLLECTIVES:
            for placement in PLACEMENTS:
                counts = {p: padded_count(requested, p, collective, n) for p in PADDINGS}
                buffers = {p: make_buffers(collective, placement, counts[p], n, ctx.device) for p in PADDINGS}
                ops = {p: b.op(ctx.rank, ctx.group) for p, b in buffers.items()}
                seconds: dict[str, list[float]] = {p: [] for p in PADDINGS}
                one_round = rotating_round({p: partial(timed, ctx, ops[p], calls) for p in PADDINGS}, seconds)

                def effective_now() -> dict:
                    return {p: _effective(collective, counts[p], requested, seconds[p], n) for p in PADDINGS}

                def ratios(effective: dict) -> dict:
                    refused = lone_rank(n, "over a bus")
                    return {p: (None, refused) if refused else
                            ratio(effective[p], effective["unpadded"], "higher", "the unpadded effective busbw",
                                  "GB/s") for p in PADDINGS if p != "unpadded"}

                def targets() -> dict:
                    return {p: (figure, GATE_RULES["busbw_ratio"].target)
                            for p, (figure, _) in ratios(effective_now()).items()}

                # one rank: nothing crosses a bus, whatever the rounds
                is_gated = size == sweep.sizes[-1] and placement == GATED_PLACEMENT and n > 1
                sampled = sample(ctx, _share(settings, len(COLLECTIVES)) if is_gated else fixed, one_round,
                                 targets if is_gated else dict)
                effective = effective_now()
                final = ratios(effective)
                for p in PADDINGS:
                    figure, refused = final.get(p, (None, None))
                    records.append(_record(ctx, collective, placement, p, counts[p], requested, seconds[p], calls,
                                           effective[p], figure, refused, sampled, _wrong(ctx, buffers[p], ops[p])))
    return records


def _share(settings, cells: int) -> Sampling:
    """The sweep's calibrated sampling, its budget shared among the gated cells."""
    sampling = settings.sampling("busbw")
    return replace(sampling, budget_s=sampling.budget_s / cells)


def _effective(collective: str, count: int, requested: int, seconds: list[float], n: int) -> list[float]:
    """Per-round busbw over the unpadded bucket's bytes (zero at one rank, where nothing crosses a bus)."""
    return [bandwidths(collective, count * ELEMENT.itemsize, s, n)[1] * requested / count for s in seconds]


def _wrong(ctx, buffers: Buffers, op) -> int:
    buffers.fill(ctx.rank)
    op()
    ctx.sync()
    wrong = torch.tensor([buffers.wrong(ctx.rank, ctx.world_size)], device=ctx.device)
    dist.all_reduce(wrong, group=ctx.group)
    return int(wrong.item())


def _record(ctx, collective: str, placement: str, policy: str, count: int, requested: int, seconds: list[float],
            calls: int, effective: list[float], ratio_figure: Figure | None, refused: Refusal | None, sampled: Sampled,
            wrong: int) -> BusbwRecord:
    n, size_bytes = ctx.world_size, count * ELEMENT.itemsize
    bus = n > 1  # at one rank nothing crosses a bus: busbw is undefined
    busbw = [bandwidths(collective, size_bytes, s, n)[1] for s in seconds]
    return BusbwRecord(
        collective=collective, policy=policy, placement=placement, size_bytes=size_bytes, count=count,
        requested_count=requested, element_type="float32", redop="none" if collective == "all_gather" else "sum",
        time_us=Figure.of([s * 1e6 for s in seconds], "us", "lower"), calls=calls,
        algbw_gbps=Figure.of([bandwidths(collective, size_bytes, s, n)[0] for s in seconds], "GB/s", "higher"),
        busbw_gbps=Figure.of(busbw, "GB/s", "higher") if bus else None,
        effective_busbw_gbps=Figure.of(effective, "GB/s", "higher") if bus else None,
        effective_ratio_to_unpadded=ratio_figure, refused=refused, sampling=sampled, wrong=wrong, world_size=n,
        backend=ctx.backend)
