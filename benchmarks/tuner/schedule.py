"""A simulated backward: when each bucket's collective runs, and the step time that follows.

The model, upstream Megatron's with ``overlap_grad_reduce``:

- compute: the backward runs step by step in backward order (the reverse of
  ``parameters()``); a step ends when its param's grad is ready. A step may
  name no param (``None``): compute that readies no grad of its own, such as
  a tied embedding's output projection, which runs first while the
  embedding's grad is ready last;
- launch: when a bucket's last grad is ready, its collective is launched;
  what that costs on the backward's critical path (``launch_cost_s`` per
  bucket: a hook's bookkeeping, a call that blocks) delays the rest of the
  backward, and the bucket is ready for its collective after it;
- communication: one collective at a time on one stream, in the order the
  buckets become ready (ties in the order given), each starting at
  ``max(its bucket's ready time, the previous collective's end)``. Buckets of
  several buffers (dtype groups, expert buffers) interleave in that one
  order, as upstream's hooks launch each buffer's buckets when their params
  are ready. Expert buffers reduce over another communicator, whose
  collectives a device could run beside a dense one's; they share the same
  links, and are modelled one at a time;
- contention: a collective running beside the backward may slow it down
  (on a CPU the collective's threads take cores the backward needs; on a
  GPU its kernels take SMs and memory bandwidth). ``contention`` is the
  share of the backward's speed a running collective takes: while one
  runs, compute and launches progress at ``1 - share`` of their speed. One
  share for every collective, or a function of the bucket and its
  collective's seconds (a share per byte moved, say); 0, the default:
  collectives cost the backward nothing;
- the step ends when the backward and the last collective have both ended.

Definitions (seconds from the backward's start):

- ``compute_s``: the steps' compute, summed (the backward alone);
- ``launch_s``: ``launch_cost_s`` times the number of buckets: the
  implementation's own cost on the critical path;
- ``slowed_s``: what contention added to the backward;
- ``compute_end_s = compute_s + launch_s + slowed_s``: when the backward ends;
- ``step_s = max(compute_end_s, the last collective's end)``: what a timed
  step measures, from the backward's start until its last collective is
  waited for;
- ``exposed_s = step_s - compute_end_s``: communication the backward did not
  hide. Once the backward has ended every bucket has launched, so the stream
  runs without gaps: ``exposed_s`` is exactly the communication run after it;
- ``communication_s``: the collectives' times, summed; ``hidden_s =
  communication_s - exposed_s`` ran while the backward computed.

So ``step_s = compute_s + launch_s + slowed_s + exposed_s``.
"""

from __future__ import annotations

import heapq
import math
import numbers
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence, Union

from reference.layout import LayoutConfig, ModelLayout

DENSE_GROUP, EXPERT_GROUP = "dp", "expert-dp"
"""The communicators a bucket is reduced over: the data-parallel group, or the expert-data-parallel one."""

CollectiveSeconds = Callable[[int], float]
"""Seconds one collective of ``size_bytes`` takes (a ``benchmarks.tuner.curve.CollectiveCurve`` is one)."""
CollectiveTimes = Union[CollectiveSeconds, Mapping[str, CollectiveSeconds]]
"""One function for every bucket, or one per communicator (``DENSE_GROUP``, ``EXPERT_GROUP``)."""
Contention = Union[float, Callable[["SimulatedBucket", float], float]]
"""The share of the backward's speed a running collective takes: one for all, or (bucket, seconds) -> it."""
ComputeSteps = Sequence[tuple[Union[str, None], float]]
"""(param name, or None for compute that readies no grad; seconds), in backward order."""


@dataclass(frozen=True)
class SimulatedBucket:
    """One bucket as the simulation sees it: the bytes its collective moves (padded), and its params."""

    label: str
    size_bytes: int
    params: tuple[str, ...]
    group: str = DENSE_GROUP


@dataclass(frozen=True)
class BucketTiming:
    bucket: SimulatedBucket
    ready_s: float
    start_s: float
    end_s: float

    @property
    def collective_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def queued_s(self) -> float:
        """How long the ready bucket waited for the collectives before it."""
        return self.start_s - self.ready_s


@dataclass(frozen=True)
class Schedule:
    """One simulated backward; the module docstring defines every figure."""

    buckets: tuple[BucketTiming, ...]
    """In the order their collectives ran."""
    compute_s: float
    launch_s: float
    compute_end_s: float
    step_s: float

    @property
    def slowed_s(self) -> float:
        """What collectives running beside the backward added to it (``contention``)."""
        return self.compute_end_s - self.compute_s - self.launch_s

    @property
    def exposed_s(self) -> float:
        return self.step_s - self.compute_end_s

    @property
    def communication_s(self) -> float:
        return sum(t.collective_s for t in self.buckets)

    @property
    def hidden_s(self) -> float:
        return self.communication_s - self.exposed_s


def simulate(buckets: Sequence[SimulatedBucket], compute: ComputeSteps, collective_seconds: CollectiveTimes, *,
             launch_cost_s: float, contention: Contention = 0.0) -> Schedule:
    """Simulate one backward: ``compute`` in backward order; ``buckets`` in launch order, which decides only
    between buckets ready at the same moment (collectives run in the order their buckets become ready).

    ``launch_cost_s`` has no default: a caller that means 0 says so.
    """
    if not buckets:
        raise ValueError("buckets: got none, but a backward reduces at least one bucket")
    _check_seconds("launch_cost_s", launch_cost_s)
    seconds = _collective_times(buckets, collective_seconds)
    shares = [contention(b, t) if callable(contention) else contention for b, t in zip(buckets, seconds)]
    for bucket, share in zip(buckets, shares):
        if isinstance(share, bool) or not isinstance(share, numbers.Real) or not 0 <= share < 1:
            raise ValueError(f"contention of {bucket.label}: got {share!r}, but should be a share of the "
                             "backward's speed in [0, 1)")
    stream = _Stream(seconds, shares)
    completing = _completing_buckets(buckets, compute)
    clock = compute_s = 0.0
    for position, (_, step_s) in enumerate(compute):
        clock = stream.compute(clock, step_s)
        compute_s += step_s
        bucket = completing.get(position)
        if bucket is not None:
            clock = stream.compute(clock, launch_cost_s)
            stream.ready(bucket, clock)
    stream.run_until(math.inf)
    timings = tuple(BucketTiming(buckets[i], ready, start, end) for i, ready, start, end in stream.ran)
    return Schedule(timings, compute_s, launch_cost_s * len(buckets), clock, max(clock, stream.end))


class _Stream:
    """The one stream collectives run on: each starts when its bucket is ready and the one before it has
    ended, in (ready time, given order) order."""

    def __init__(self, seconds: list[float], shares: list[float]) -> None:
        self.seconds, self.shares = seconds, shares
        self.contended = any(shares)
        self.waiting: list[tuple[float, int]] = []  # (ready time, bucket index), a heap
        self.end = 0.0
        self.share = 0.0  # of the collective that ends at ``end``
        self.ran: list[tuple[int, float, float, float]] = []  # (bucket index, ready, start, end)

    def ready(self, index: int, at: float) -> None:
        heapq.heappush(self.waiting, (at, index))

    def run_until(self, at: float) -> None:
        """Start every waiting collective whose start comes at or before ``at``. Called only when the clock is
        about to pass ``at``: every bucket ready by then is known, so ties go in the given order."""
        while self.waiting and max(self.waiting[0][0], self.end) <= at:
            ready, index = heapq.heappop(self.waiting)
            start = max(ready, self.end)
            self.end, self.share = start + self.seconds[index], self.shares[index]
            self.ran.append((index, ready, start, self.end))

    def compute(self, clock: float, work: float) -> float:
        """When ``work`` seconds of backward starting at ``clock`` end, at ``1 - share`` of full speed while a
        collective runs."""
        if not self.contended:
            return clock + work
        while work > 0:
            self.run_until(clock)
            if self.end <= clock:
                return clock + work
            busy, speed = self.end - clock, 1.0 - self.share
            if work <= busy * speed:
                return clock + work / speed
            work -= busy * speed
            clock = self.end
        return clock


def buckets_of(layout: ModelLayout, element_bytes: int | None = None) -> tuple[SimulatedBucket, ...]:
    """A planned layout's buckets, buffer by buffer: padded bytes (``bucket_indices``) and their params.

    ``element_bytes``: bytes per grad element; None reads each buffer's grad
    dtype. Params are grouped by bucket in one pass (the same lists as
    ``bucket_param_names``, which scans every param once per bucket).
    """
    if element_bytes is not None and (not isinstance(element_bytes, int) or element_bytes < 1):
        raise ValueError(f"element_bytes: got {element_bytes!r}, but should be a positive integer, or None "
                         "for each buffer's grad dtype")
    buckets = []
    for index, buffer in enumerate(layout.buffers):
        itemsize = element_bytes or buffer.grad_dtype.itemsize
        placed: list[list[tuple[int, str]]] = [[] for _ in buffer.bucket_indices]
        for name, (start, _, bucket) in buffer.param_index_map.items():
            placed[bucket].append((start, name))
        group = EXPERT_GROUP if buffer.expert_parallel else DENSE_GROUP
        kind = str(buffer.grad_dtype).removeprefix("torch.") + (", expert" if buffer.expert_parallel else "")
        for b, (lo, hi) in enumerate(buffer.bucket_indices):
            names = tuple(name for _, name in sorted(placed[b]))
            buckets.append(SimulatedBucket(f"buffer {index} ({kind}) bucket {b}", (hi - lo) * itemsize, names, group))
    return tuple(buckets)


def simulate_layout(layout: ModelLayout, compute: ComputeSteps, collective_seconds: CollectiveTimes, *,
                    launch_cost_s: float, contention: Contention = 0.0, element_bytes: int | None = None
                    ) -> Schedule:
    """``simulate`` over a planned layout's buckets: what the tuner calls for each candidate bucket size."""
    buckets = buckets_of(layout, element_bytes)
    return simulate(buckets, compute, collective_seconds, launch_cost_s=launch_cost_s, contention=contention)


def collective_for(config: LayoutConfig) -> str:
    """The collective a bucket runs: reduce-scatter under the distributed optimizer, all-reduce otherwise."""
    return "reduce_scatter" if config.padding.distributed_optimizer else "all_reduce"


def _collective_times(buckets: Sequence[SimulatedBucket], collective_seconds: CollectiveTimes) -> list[float]:
    if isinstance(collective_seconds, Mapping):
        missing = sorted({b.group for b in buckets} - set(collective_seconds))
        if missing:
            raise ValueError(f"collective_seconds: got functions for {sorted(collective_seconds)}, but "
                             f"should have one for every bucket's group (missing {missing})")
        times = [collective_seconds[b.group](b.size_bytes) for b in buckets]
    else:
        times = [collective_seconds(b.size_bytes) for b in buckets]
    for bucket, seconds in zip(buckets, times):
        _check_seconds(f"collective time of {bucket.label} ({bucket.size_bytes} bytes)", seconds)
    return times


def _completing_buckets(buckets: Sequence[SimulatedBucket], compute: ComputeSteps) -> dict[int, int]:
    """Position in ``compute`` of each bucket's last grad -> that bucket's index; every name checked first."""
    position: dict[str, int] = {}
    for i, (name, seconds) in enumerate(compute):
        _check_seconds(f"compute time of {name!r}", seconds)
        if name is not None:
            if name in position:
                raise ValueError(f"compute: got {name!r} twice, but each param's grad is ready once")
            position[name] = i
    owner: dict[str, str] = {}
    completing: dict[int, int] = {}
    for index, bucket in enumerate(buckets):
        if not bucket.params:
            raise ValueError(f"buckets: {bucket.label} holds no params, but every bucket should hold one")
        for name in bucket.params:
            if name in owner:
                raise ValueError(f"buckets: {name!r} is in {owner[name]} and {bucket.label}, but a param "
                                 "should be in one bucket")
            if name not in position:
                raise ValueError(f"compute: got no time for {name!r} of {bucket.label}, but every bucketed "
                                 "param needs one")
            owner[name] = bucket.label
        completing[max(position[name] for name in bucket.params)] = index
    strays = [name for name in position if name not in owner]
    if strays:
        raise ValueError(f"compute: got {len(strays)} params in no bucket (first {strays[0]!r}), but every "
                         "named step should ready a bucketed grad; name compute that readies none None")
    return completing


def _check_seconds(field: str, value: float) -> None:
    if type(value) is float and 0 <= value < math.inf:  # the common case, checked fast: it runs per step
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value < math.inf:
        raise ValueError(f"{field}: got {value!r}, but should be a finite number of seconds >= 0")
