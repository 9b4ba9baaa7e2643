"""Bus bandwidth of bucket-sized collectives, unpadded and under each padding policy (nccl-tests' definitions).

For each size the bucket's element count is deliberately unaligned (as real
buckets are); each padding policy then pads it to its divisor, and
"unpadded" pads only as far as the collective needs (reduce-scatter and
all-gather need a multiple of the world size). Out-of-place uses separate
input and output tensors; in-place uses a bucket at an offset in a larger
buffer and its cached shard views, as the distributed optimizer does.

Every (size, collective, placement) is measured in rounds after a warm-up;
in each round every padding is timed once, in an order that rotates, so the
paddings share the machine's state and their ratio is measured side by side.
The gated cells (the largest size, in place) calibrate their rounds to the
ratios' target (``benchmarks.sampling``); the others run the sweep's count.
A round's sample is the slowest rank's mean time per call over a fixed
number of back-to-back calls (the same on every rank): on NCCL 20 at every
size, as nccl-tests times them; on gloo, whose calls take milliseconds, fewer
as sizes grow. After timing, each result is checked with exactly
representable values: ``wrong`` counts bad elements.
``effective_busbw`` counts only the unpadded bucket's bytes, since padding
inflates the bytes a collective moves; the effective ratio to unpadded is
what a padding policy buys the payload.

nccl-tests conventions (docs/rules.md, section 5): sizes in bytes, GB/s =
1e9 B/s; ``algbw = size / time``; all-reduce ``busbw = algbw * 2(n-1)/n``;
reduce-scatter and all-gather ``busbw = algbw * (n-1)/n`` with the full
(gathered) size. At one rank nothing crosses a bus: the bus factor is 0, so
busbw and everything derived from it are null (nccl-tests prints 0), and
algbw alone is recorded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import partial
from typing import Sequence

import torch
import torch.distributed as dist

from datamodel import doc
from reference.buffer import shard_buffer
from reference.collectives import all_gather, reduce_scatter
from reference.layout import POLICIES, get_policy, pad

from .measurable import Refusal, lone_rank, ratio
from .registry import Benchmark, Metric, absolute, gated
from .sampling import GATE_RULES, RoundProgress, Sampled, Sampling, Target, rotating_round, sample
from .stats import Figure
from .timing import timed

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather")
# "unpadded" beside every policy that pads for the distributed optimizer.
PADDINGS = ("unpadded", *(name for name, p in POLICIES.items() if p.distributed_optimizer))
PLACEMENTS = ("out-of-place", "in-place")
ELEMENT = torch.float32
GATED_PLACEMENT = "in-place"  # how DDP uses a bucket: a view of the buffer, cached shard views

@dataclass(frozen=True)
class BusbwRecord:
    """One (size, collective, placement, padding) of the sweep, in nccl-tests' columns."""

    collective: str = doc("all_reduce, reduce_scatter or all_gather")
    policy: str = doc("unpadded, or the padding policy the bucket was padded under")
    placement: str = doc("out-of-place (separate tensors) or in-place (a bucket view and its cached shard views)")
    size_bytes: int = doc("bytes the collective moves (the padded bucket; the full, gathered size)")
    count: int = doc("elements moved (padded)")
    requested_count: int = doc("elements of the bucket before padding (deliberately unaligned)")
    element_type: str = doc("element type", json="type")
    redop: str = doc("reduction op (none for all_gather)")
    time_us: Figure = doc("microseconds per call, the slowest rank's mean per round")
    calls: int = doc("back-to-back calls averaged into one sample")
    algbw_gbps: Figure = doc("nccl-tests algorithm bandwidth, size / time, GB/s (1e9 B/s)")
    busbw_gbps: Figure | None = doc("nccl-tests bus bandwidth, GB/s; null at one rank (no bus traffic)")
    effective_busbw_gbps: Figure | None = doc("bus bandwidth over the unpadded bucket's bytes only; null at one rank")
    effective_ratio_to_unpadded: Figure | None = doc("effective busbw over unpadded's, per round; null for unpadded "
                                                     "and when refused")
    refused: Refusal | None = doc("why the ratio is not given (one rank; benchmarks/measurable.py), or null")
    sampling: Sampled = doc("rounds, warm-up, why sampling stopped, the ratios' targets and whether they were met")
    wrong: int = doc("elements with a wrong value after the collective (checked after timing), summed over ranks")
    world_size: int = doc("ranks")
    backend: str = doc("gloo or nccl")

    @property
    def requested_bytes(self) -> int:
        """The bucket's size before padding, which every padding of one cell shares."""
        return self.requested_count * ELEMENT.itemsize


@dataclass(frozen=True)
class Sweep:
    """What the sweep measures; sizes are the requested bucket sizes in bytes, before padding."""

    sizes: tuple[int, ...] = doc("bucket sizes in bytes, before padding")
    rounds: int = doc("rounds of the cells that are not gated (the gated ones calibrate theirs)")
    warmup: int = doc("warm-up rounds of those cells")

    @classmethod
    def geometric(cls, smallest: int, largest: int, rounds: int, warmup: int = 2, factor: int = 4) -> "Sweep":
        if not 0 < smallest <= largest:
            raise ValueError(f"busbw sizes: got {smallest} to {largest} bytes, but should be 0 < smallest <= largest")
        steps = int(math.log(largest / smallest, factor)) + 1
        return cls(tuple(smallest * factor**i for i in range(steps)), rounds, warmup)


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


CURVE_TARGET = Target(0.05, "relative")


@dataclass(frozen=True)
class CurveRequest:
    """A curve to measure: one collective, in place, padded under ``policy``, at each requested size
    (bytes)."""

    collective: str
    policy: str
    sizes: tuple[int, ...]
    sampling: Sampling


def curve_policy(policy: str) -> str:
    """The sweep's padding that matches a layout policy: the policy itself where the sweep pads by it (the
    distributed optimizer's), unpadded otherwise (a packed bucket is padded by nothing)."""
    return policy if policy in PADDINGS else "unpadded"


def sweep_curve(ctx, collective: str, policy: str, sizes: Sequence[int], sampling: Sampling,
                progress=lambda _: None) -> list[tuple[int, Figure]]:
    """(padded bytes, seconds per call per round) of ``collective`` in place (as DDP uses a bucket) at each
    size, every size timed once a round in a rotating order, rounds calibrated to ±5% on every size's time."""
    n, ops = ctx.world_size, {}
    for size in sizes:
        count = padded_count(bucket_count(size), policy, collective, n)
        buffers = make_buffers(collective, "in-place", count, n, ctx.device)
        calls = calls_per_round(size, sampling.fixed_rounds == 1, ctx.backend)
        ops[count * ELEMENT.itemsize] = partial(timed, ctx, buffers.op(ctx.rank, ctx.group), calls)
    times: dict[int, list[float]] = {size: [] for size in ops}
    one_round = rotating_round(ops, times)
    shown = RoundProgress(progress, f"curve ({collective}, {len(ops)} sizes)", sampling)

    def reported(index: int, keep: bool) -> float:
        seconds = one_round(index, keep)
        if keep:
            shown(len(next(iter(times.values()))), seconds)
        return seconds

    def targets() -> dict:
        return {size: (Figure.of(t, "s", "lower") if t else None, CURVE_TARGET) for size, t in times.items()}

    sample(ctx, sampling, reported, targets)
    return [(size, Figure.of(t, "s", "lower")) for size, t in sorted(times.items())]


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


def largest(records: Sequence[BusbwRecord]) -> int:
    return max(r.requested_count for r in records)


def gated_cells(records: Sequence[BusbwRecord]) -> list[BusbwRecord]:
    """The records the gate reads: the largest size, in place (as DDP uses buckets)."""
    top = largest(records) if records else None
    return [r for r in records if r.requested_count == top and r.placement == GATED_PLACEMENT]


def metrics(records: Sequence[BusbwRecord]) -> dict[str, Metric]:
    """Absolute busbw is informative (per size, and at the largest size); gated are each policy's
    effective ratio to unpadded at the largest size, in place (as DDP uses buckets), measured in the
    same rounds, and the total of wrong results."""
    out: dict[str, Metric] = {}
    for r in records:  # keyed by the bucket's size before padding, which every policy shares
        where = f"{r.collective}/{r.policy}/{r.placement}/{r.requested_bytes}"
        out[f"wrong/{where}"] = Metric.count(r.wrong, "elements", "lower", False)
        if r.busbw_gbps is not None:  # one rank: algbw only, which the table shows
            out[f"busbw/{where}"] = absolute(r.busbw_gbps)
    for r in gated_cells(records):
        if r.busbw_gbps is not None:
            out[f"busbw_largest/{r.collective}/{r.policy}"] = absolute(r.busbw_gbps)
        if r.effective_ratio_to_unpadded is not None:
            out[f"padding_ratio/{r.collective}/{r.policy}"] = gated(r.effective_ratio_to_unpadded, "busbw_ratio",
                                                                    r.sampling, r.policy)
    if records:
        out["wrong/total"] = Metric.count(sum(r.wrong for r in records), "elements", "lower", True)
    return out


BENCHMARK = Benchmark(
    name="busbw",
    title="Bus bandwidth: padded and unpadded buckets",
    record=BusbwRecord,
    run=measure,
    metrics=metrics,
)
