"""A collective's time for any size, from a measured curve: what a simulated backward reads for each bucket.

Measured points are (size in bytes, seconds per call) for one collective at
one world size; several samples of a size are reduced to their median. The
curve is read at the bytes the collective moves, which for a bucket is its
PADDED size (``bucket_indices``), never ``per_bucket_numel_unpadded``:
padding is sent like any other byte.

Reading between and beyond the measured sizes:

- between two measured sizes: linear in log(size) against log(time), so a
  power law between neighbours (exact at the measured points);
- below the smallest measured size: the smallest size's time, a latency
  floor (a collective that small costs its fixed latency, and a smaller one
  cannot be assumed faster than anything measured);
- above the largest measured size: the largest size's bus bandwidth held,
  so the time grows linearly with size (the tuner's output says so).

Sizes follow nccl-tests (docs/rules.md, section 5): the full (gathered) size
for reduce-scatter and all-gather.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from functools import cached_property
from typing import Iterable

import numpy as np

from ..busbw import COLLECTIVES, bus_factor

WORLD_SIZE_ASSUMPTION = (
    "converted from world size {n} to {m} by nccl-tests' bus-bandwidth factor, assuming the bus "
    "bandwidth at each size stays the same: time x {ratio:.4g} ({collective} factor {fm:.4g} at {m} over "
    "{fn:.4g} at {n}); latency-bound small sizes follow the ring's step count only roughly"
)


@dataclass(frozen=True)
class CollectiveCurve:
    """Median seconds per call at measured sizes (ascending) for ``collective`` at ``world_size`` ranks.

    ``assumption`` says what the figures rest on beyond measurement (empty
    for a measured curve; the world-size conversion's assumption otherwise),
    for the tuner to print beside its answer.
    """

    collective: str
    world_size: int
    sizes: tuple[int, ...]
    seconds: tuple[float, ...]
    assumption: str = ""

    def __post_init__(self) -> None:
        if self.collective not in COLLECTIVES:
            raise ValueError(f"collective: got {self.collective!r}, but should be one of "
                             f"{', '.join(COLLECTIVES)}")
        if not isinstance(self.world_size, int) or self.world_size < 1:
            raise ValueError(f"world_size: got {self.world_size!r}, but should be an integer >= 1")
        if not self.sizes or len(self.sizes) != len(self.seconds):
            raise ValueError(f"points: got {len(self.sizes)} sizes and {len(self.seconds)} times, but "
                             "should be at least one size with one time each")
        if list(self.sizes) != sorted(set(self.sizes)):
            raise ValueError(f"sizes: got {self.sizes}, but should be distinct and ascending "
                             "(from_points sorts them)")
        _check_positive("size_bytes", self.sizes)
        _check_positive("seconds", self.seconds)

    @classmethod
    def from_points(cls, collective: str, world_size: int,
                    points: Iterable[tuple[int, float]]) -> CollectiveCurve:
        """A curve from (size_bytes, seconds) samples in any order; a size's samples give their median."""
        pairs = list(points)
        if not pairs:
            raise ValueError("points: got none, but a curve needs at least one (size_bytes, seconds) point")
        _check_positive("size_bytes", [size for size, _ in pairs])
        _check_positive("seconds", [seconds for _, seconds in pairs])
        by_size: dict[int, list[float]] = {}
        for size, seconds in pairs:
            by_size.setdefault(size, []).append(seconds)
        sizes = tuple(sorted(by_size))
        return cls(collective, world_size, sizes, tuple(float(np.median(by_size[s])) for s in sizes))

    def __call__(self, size_bytes: int) -> float:
        """Seconds per call for ``size_bytes``: the function a simulated backward takes (no checks, fast)."""
        if size_bytes > self.sizes[-1]:
            return self.seconds[-1] * size_bytes / self.sizes[-1]
        log_seconds = np.interp(math.log(size_bytes), self._log_sizes, self._log_seconds)
        return math.exp(float(log_seconds))  # np.interp holds the ends: the latency floor below

    @cached_property
    def _log_sizes(self) -> np.ndarray:
        return np.log(np.asarray(self.sizes, dtype=np.float64))

    @cached_property
    def _log_seconds(self) -> np.ndarray:
        return np.log(np.asarray(self.seconds, dtype=np.float64))

    def at_world_size(self, world_size: int) -> CollectiveCurve:
        """The curve at ``world_size`` ranks, assuming the bus bandwidth of every size stays the same.

        nccl-tests: ``busbw = size / time * factor(n)``, with factor ``2(n-1)/n``
        for all-reduce and ``(n-1)/n`` for reduce-scatter and all-gather; equal
        bus bandwidth gives ``time_m = time_n * factor(m) / factor(n)``. Both
        world sizes must be at least 2: at one rank nothing crosses a bus.
        """
        for field, n in (("world_size", world_size), ("the curve's world_size", self.world_size)):
            if not isinstance(n, int) or n < 2:
                raise ValueError(
                    f"{field}: got {n!r}, but should be >= 2 to convert by bus bandwidth: at one rank "
                    "nothing crosses a bus (the bus factor is 0), so a collective's time there is 0; "
                    "simulate one rank with a collective time of 0 instead")
        fn, fm = bus_factor(self.collective, self.world_size), bus_factor(self.collective, world_size)
        ratio = fm / fn
        assumption = WORLD_SIZE_ASSUMPTION.format(n=self.world_size, m=world_size, ratio=ratio, fm=fm, fn=fn,
                                                  collective=self.collective)
        seconds = tuple(t * ratio for t in self.seconds)
        return CollectiveCurve(self.collective, world_size, self.sizes, seconds,
                               "; ".join(filter(None, (self.assumption, assumption))))


def _check_positive(field: str, values: Iterable[float]) -> None:
    for value in values:
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < math.inf:
            raise ValueError(f"{field}: got {value!r}, but should be a positive finite number")
