"""What one benchmark run measures: rounds, sizes, models and implementations, and their smoke versions."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .busbw import Sweep

DEFAULT_IMPLS = ("reference", "torch", "megatron", "fsdp2", "replicate", "deepspeed")
GLOO_LARGEST = 2**24  # bytes: 16 MiB, what two local gloo ranks sweep in seconds
NCCL_LARGEST = 2**30  # bytes: 1 GiB, where upstream's 40M-element buckets live


@dataclass(frozen=True)
class Model:
    """Bias-free Linear(width, width) layers, one bucket each; ``wait_ms`` of emulated backward per layer."""

    width: int = 1024
    depth: int = 8
    batch: int = 32
    wait_ms: float = 0.0

    @property
    def bucket_elements(self) -> int:
        return self.width * self.width


@dataclass(frozen=True)
class BenchSettings:
    busbw: Sweep = field(default_factory=lambda: Sweep.geometric(2**10, GLOO_LARGEST, rounds=10))
    rounds: int = 15
    """Samples per figure of the real-compute overlap, step-time, bucketing and harness benchmarks."""
    emulated_rounds: int = 30
    """Samples per emulated-overlap figure: its efficiency is gated, and a difference of differences."""
    warmup: int = 3
    impls: tuple[str, ...] = DEFAULT_IMPLS
    """Implementations (ddp level) whose overlap and step time are measured, side by side."""
    emulated: Model = Model(batch=4, wait_ms=6.0)
    """Batch 4 keeps the layers' real backward under a millisecond: the 6 ms waits are the compute."""
    real: Model = Model(depth=6)
    smoke: bool = False

    @classmethod
    def for_backend(cls, backend: str, largest: int | None = None, **changes) -> "BenchSettings":
        top = largest or (NCCL_LARGEST if backend == "nccl" else GLOO_LARGEST)
        return cls(busbw=Sweep.geometric(2**10, top, rounds=10), **changes)

    def smoked(self) -> "BenchSettings":
        """Each benchmark once on tiny inputs: proves the code paths and checks; the timings mean nothing."""
        tiny = Model(width=64, depth=3, batch=4)
        return replace(self, busbw=Sweep.geometric(2**10, 2**12, rounds=1, warmup=0), rounds=1, emulated_rounds=1,
                       warmup=0, emulated=replace(tiny, wait_ms=1.0), real=tiny, smoke=True)
