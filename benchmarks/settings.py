"""What one benchmark run measures: rounds, sizes, models and implementations, and their smoke versions."""

from __future__ import annotations

from dataclasses import dataclass, replace

from datamodel import doc

from .busbw import Sweep
from .sampling import Sampling

DEFAULT_PEERS = ("torch", "megatron", "fsdp2", "replicate", "deepspeed", "megatron-fsdp")
"""The peers the nightly job runs beside the reference when neither --impl nor --peer is given (registered names,
suites/impls/__init__.py). The docs name them where they name ``DEFAULT_PEERS``, and tests/test_docs.py compares."""
DEFAULT_IMPLS = ("reference", *DEFAULT_PEERS)
GLOO_LARGEST = 2**24  # bytes: 16 MiB, what two local gloo ranks sweep in seconds
NCCL_LARGEST = 2**30  # bytes: 1 GiB, where upstream's 40M-element buckets live
NCCL_EMULATED_WIDTH = 4096  # 64 MiB fp32 buckets
INFORMATIVE_ROUNDS = 15
BUDGETS = {"busbw": 45.0, "harness_overhead": 20.0, "overlap": 120.0, "step_time": 90.0, "bucket_size": 30.0,
           "quantized_params": 15.0}
"""Seconds of calibrated rounds of each benchmark that samples to a target (its gated figures, or, as
``bucket_size``, a curve of its own; its warm-up and informative parts aside); docs/measurements/benchmarks.md
says what the whole job's benchmarks take with them."""
LAUNCHES = 1
"""Launches the step-time benchmark's rounds are shared among: 3 caught a 5% slowdown no more often than 1 on this
project's machine, at twice the time (docs/measurements/gate.md); more may pay on a node where a process's
level is most of a run's spread."""


@dataclass(frozen=True)
class Model:
    """Bias-free Linear(width, width) layers, one bucket each.

    ``wait_ratio``: each layer's backward also takes emulated compute of this many times one bucket's
    measured collective time (benchmarks/overlap.py), so communication is the same share of the step on
    any interconnect; 0 for the layers' real backward only.
    """

    width: int = doc("width of each bias-free Linear layer", 1024)
    depth: int = doc("layers, one bucket each", 8)
    batch: int = doc("rows of each rank's input", 32)
    wait_ratio: float = doc("emulated compute per layer's backward, in bucket collectives (0: real compute only)",
                            0.0)

    @property
    def bucket_elements(self) -> int:
        return self.width * self.width


TUNING_MODEL = Model(width=256, depth=64, batch=4, wait_ratio=2.0)
NCCL_TUNING_MODEL = Model(width=2048, depth=32, batch=4, wait_ratio=2.0)
"""16 MiB fp32 layers, 512 MiB in all: the sizes the design notes' bucket-size claims are about fit in it."""


@dataclass(frozen=True)
class BenchSettings:
    """What one run of the benchmarks measured."""

    busbw: Sweep = doc("the bus-bandwidth sweep: bucket sizes (bytes, before padding), rounds and warm-up",
                       default_factory=lambda: Sweep.geometric(2**10, GLOO_LARGEST, rounds=10))
    rounds: int | None = doc("a fixed count of rounds for every figure (smoke mode: 1); null: the gated figures' "
                             "rounds are calibrated to their targets within each benchmark's budget, the "
                             f"informative ones get {INFORMATIVE_ROUNDS}", None)
    warmup: int | None = doc("a fixed warm-up (smoke mode: none); null: calibrated, rounds dropped until the "
                             "round's time settles", None)
    budgets: dict[str, float] = doc("seconds of calibrated rounds of each benchmark that samples to a target",
                                    default_factory=lambda: dict(BUDGETS))
    impls: tuple[str, ...] = doc("implementations (ddp level) whose overlap and step time are measured, side by "
                                 "side", DEFAULT_IMPLS)
    emulated: Model = doc("the emulated-overlap model: batch 4 keeps the layers' real backward well under a "
                          "bucket's collective, so the waits are the compute", Model(batch=4, wait_ratio=1.0))
    real: Model = doc("the real-compute model of the overlap and step-time benchmarks", Model(depth=6))
    tuning: Model = doc("the bucket-size benchmark's emulated model (benchmarks/bucket_size.py): layers "
                        "small enough that a collective's latency and the launch cost per bucket matter, "
                        "many enough that the last bucket's exposure does too", TUNING_MODEL)
    smoke: bool = doc("each benchmark once on tiny inputs: timings mean nothing", False)
    launches: int = doc("sets of fresh rank processes the step-time rounds are shared among, each carrying on the "
                        "rounds of those before it: a process has a level of its own, which more rounds in it do "
                        "not average away (1 in smoke mode and under torchrun, whose ranks are its own)", LAUNCHES)

    @classmethod
    def for_backend(cls, backend: str, largest: int | None = None, **changes) -> "BenchSettings":
        """On NCCL: buckets up to 1 GiB in the sweep, 64 MiB emulated-overlap buckets, whose collective
        outlasts a layer's launch overheads, and a tuning model large enough for 80 MB buckets."""
        top = largest or (NCCL_LARGEST if backend == "nccl" else GLOO_LARGEST)
        if backend == "nccl":
            changes.setdefault("emulated", Model(width=NCCL_EMULATED_WIDTH, batch=4, wait_ratio=1.0))
            changes.setdefault("tuning", NCCL_TUNING_MODEL)
        return cls(busbw=Sweep.geometric(2**10, top, rounds=10), **changes)

    def sampling(self, benchmark: str, gated: bool = True) -> Sampling:
        """How ``benchmark`` samples: calibrated to its gated figures' targets within its budget, unless the
        count is fixed or its figures are informative."""
        if self.rounds is not None or not gated:
            return Sampling(fixed_rounds=self.rounds or INFORMATIVE_ROUNDS, fixed_warmup=self.warmup)
        return Sampling(budget_s=self.budgets[benchmark], fixed_warmup=self.warmup)

    def __post_init__(self) -> None:
        if self.launches < 1:
            raise ValueError(f"launches: got {self.launches}, but should be at least 1")

    def smoked(self) -> "BenchSettings":
        """Each benchmark once on tiny inputs: proves the code paths and checks; the timings mean nothing."""
        tiny = Model(width=64, depth=3, batch=4)
        return replace(self, busbw=Sweep.geometric(2**10, 2**12, rounds=1, warmup=0), rounds=1, warmup=0,
                       emulated=replace(tiny, wait_ratio=1.0), real=tiny,
                       tuning=replace(tiny, depth=4, wait_ratio=1.0), smoke=True, launches=1)
