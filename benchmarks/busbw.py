"""Bus bandwidth of bucket-sized collectives, unpadded and padded, with nccl-tests' definitions.

For each requested size the bucket's element count is deliberately unaligned
(as real buckets are); each padding policy then pads it to its divisor, and
"unpadded" pads only as far as the collective needs (reduce-scatter and
all-gather need a multiple of the world size). Out-of-place uses separate
input and output tensors; in-place uses one bucket and its cached shard views,
as the distributed optimizer does. Every rank runs the same fixed number of
iterations per size (no per-rank calibration). After timing, each result is
checked with exactly representable values: ``wrong`` counts bad elements.
``effective_busbw_gbps`` counts only the unpadded bucket's bytes, since
padding inflates the bytes a collective moves.

nccl-tests conventions (docs/rules.md, section 5): sizes in bytes, GB/s = 1e9 B/s;
all-reduce ``busbw = algbw * 2(n-1)/n``; reduce-scatter and all-gather
``busbw = algbw * (n-1)/n`` with the full (gathered) size.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

from reference.buffer import shard_buffer
from reference.collectives import all_gather, reduce_scatter
from reference.layout import POLICIES, get_policy, pad

from .launch import BenchContext

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather")
# "unpadded" beside every policy that pads for the distributed optimizer.
PADDINGS = ("unpadded", *(name for name, p in POLICIES.items() if p.distributed_optimizer))
PLACEMENTS = ("out-of-place", "in-place")
ELEMENT = torch.float32


def bus_factor(collective: str, n: int) -> float:
    return 2 * (n - 1) / n if collective == "all_reduce" else (n - 1) / n


def bandwidths(collective: str, size_bytes: int, seconds: float, n: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s for one collective of ``size_bytes`` taking ``seconds``."""
    algbw = size_bytes / seconds / 1e9
    return algbw, algbw * bus_factor(collective, n)


def bucket_count(requested_bytes: int) -> int:
    """An unaligned element count near the requested size: odd, not a multiple of 128."""
    return max(1, requested_bytes // ELEMENT.itemsize - 37) | 1


def padded_count(count: int, policy: str, collective: str, n: int) -> int:
    if policy == "unpadded":
        return count if collective == "all_reduce" else pad(count, n)
    return pad(count, get_policy(policy).bucket_divisor(n))


def iterations(size_bytes: int, smoke: bool) -> tuple[int, int]:
    """(warm-up, timed) iterations: fixed by size, identical on every rank."""
    if smoke:
        return 0, 1
    if size_bytes <= 64 * 2**10:
        return 5, 50
    if size_bytes <= 2**20:
        return 3, 20
    return 2, 8


@dataclass
class Buffers:
    """Tensors for one (collective, placement, count): reset to known values before the check."""

    collective: str
    placement: str
    bucket: torch.Tensor
    shards: list[torch.Tensor]
    out: torch.Tensor | None

    def op(self, rank: int):
        if self.collective == "all_reduce":
            return lambda: dist.all_reduce(self.bucket)
        if self.collective == "reduce_scatter":
            target = self.shards[rank] if self.placement == "in-place" else self.out
            return lambda: reduce_scatter(target, self.bucket)
        source = self.shards[rank] if self.placement == "in-place" else self.out
        return lambda: all_gather(self.bucket, source)

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


def time_op(ctx: BenchContext, op, warmup: int, iters: int) -> float:
    """Seconds per call, the slowest rank's average (all ranks run the same iterations)."""
    for _ in range(warmup):
        op()
    ctx.sync()
    dist.barrier(group=ctx.group)
    start = time.perf_counter()
    for _ in range(iters):
        op()
    ctx.sync()
    elapsed = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64, device=ctx.device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=ctx.group)
    return float(elapsed.item())


def sweep(ctx: BenchContext, sizes: list[int], smoke: bool = False) -> list[dict]:
    """Every (size, collective, policy, placement); identical records on every rank."""
    n, records = ctx.world_size, []
    for size in sizes:
        requested = bucket_count(size)
        warmup, iters = iterations(size, smoke)
        for collective in COLLECTIVES:
            for policy in PADDINGS:
                count = padded_count(requested, policy, collective, n)
                for placement in PLACEMENTS:
                    buffers = make_buffers(collective, placement, count, n, ctx.device)
                    op = buffers.op(ctx.rank)
                    seconds = time_op(ctx, op, warmup, iters)
                    buffers.fill(ctx.rank)
                    op()
                    ctx.sync()
                    wrong = torch.tensor([buffers.wrong(ctx.rank, n)], device=ctx.device)
                    dist.all_reduce(wrong, group=ctx.group)
                    size_bytes = count * ELEMENT.itemsize
                    algbw, busbw = bandwidths(collective, size_bytes, seconds, n)
                    records.append({
                        "collective": collective, "policy": policy, "placement": placement,
                        "size_bytes": size_bytes, "count": count, "requested_count": requested,
                        "type": "float32", "redop": "none" if collective == "all_gather" else "sum",
                        "time_us": seconds * 1e6, "algbw_gbps": algbw, "busbw_gbps": busbw,
                        # busbw over the bucket's own bytes: what padding buys or costs the payload.
                        "effective_busbw_gbps": busbw * requested / count,
                        "wrong": int(wrong.item()), "world_size": n, "backend": ctx.backend,
                    })
    return records


def geometric_sizes(smallest: int, largest: int, factor: int = 4) -> list[int]:
    steps = int(math.log(largest / smallest, factor)) + 1
    return [smallest * factor**i for i in range(steps)]


def averages(records: list[dict]) -> dict[str, dict[str, float]]:
    """nccl-tests' footer: mean busbw per collective and policy, over sizes and placements."""
    sums: dict[tuple[str, str], list[float]] = {}
    for r in records:
        sums.setdefault((r["collective"], r["policy"]), []).append(r["busbw_gbps"])
    out: dict[str, dict[str, float]] = {}
    for (collective, policy), values in sums.items():
        out.setdefault(collective, {})[policy] = sum(values) / len(values)
    return out


def bare_loop_overhead(ctx: BenchContext, count: int = 2**18, iters: int = 50, rounds: int = 5) -> dict:
    """The harness's cost: ``time_op`` against an inline loop of the same all-reduce, alternating."""
    t = torch.ones(count, dtype=ELEMENT, device=ctx.device)
    harness, bare = [], []
    for _ in range(rounds):
        harness.append(time_op(ctx, lambda: dist.all_reduce(t), 2, iters))
        dist.barrier(group=ctx.group)
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        ctx.sync()
        elapsed = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64, device=ctx.device)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=ctx.group)
        bare.append(float(elapsed.item()))
    ratio = sorted(h / b for h, b in zip(harness, bare))[len(bare) // 2]
    return {"count": count, "iters": iters, "rounds": rounds, "harness_over_bare_median": ratio}
