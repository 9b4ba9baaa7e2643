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
from dataclasses import dataclass
from typing import Literal, Sequence, get_args

from datamodel import doc
from hardware.node import Backend

from .measurable import Refusal
from .registry import Benchmark, Metric, absolute, gated
from .sampling import Sampled
from .stats import Figure

Collective = Literal["all_reduce", "reduce_scatter", "all_gather"]
Placement = Literal["out-of-place", "in-place"]
COLLECTIVES: tuple[Collective, ...] = get_args(Collective)
PLACEMENTS: tuple[Placement, ...] = get_args(Placement)
ELEMENT_BYTES = 4
"""Every bucket of the sweep is fp32."""
GATED_PLACEMENT: Placement = "in-place"  # how DDP uses a bucket: a view of the buffer, cached shard views

@dataclass(frozen=True)
class BusbwRecord:
    """One (size, collective, placement, padding) of the sweep, in nccl-tests' columns."""

    collective: Collective = doc("all_reduce, reduce_scatter or all_gather")
    policy: str = doc("unpadded, or the padding policy the bucket was padded under")
    placement: Placement = doc("out-of-place (separate tensors) or in-place (a bucket view and its cached shard views)")
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
    backend: Backend = doc("gloo or nccl")

    @property
    def requested_bytes(self) -> int:
        """The bucket's size before padding, which every padding of one cell shares."""
        return self.requested_count * ELEMENT_BYTES


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
    return max(1, requested_bytes // ELEMENT_BYTES - 37) | 1


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
    runner="benchmarks.measuring.busbw:measure",
    metrics=metrics,
)
