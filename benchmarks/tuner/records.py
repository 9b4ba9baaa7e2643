"""What the tuner leaves behind, apart from how it computes and measures (which needs torch): the candidates'
predictions, the recommendation, its verification and the inputs measured for it. A run's bucket-size records
and ``python -m reports.tune --json`` hold these; they read with the standard library, numpy and scipy alone."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from datamodel import doc
from hardware.node import Backend
from hardware.noise import SleepOvershoot

from ..busbw import ELEMENT_BYTES, Collective
from ..sampling import Sampled
from ..settings import Model
from ..stats import Figure

ROLES = ("recommended", "far smaller", "far larger")
"""The sizes a verification measures: the recommendation, the smallest candidate, one bucket."""


@dataclass(frozen=True)
class Candidate:
    bucket_size: int | None = doc("elements per bucket; null: one bucket per buffer")
    origins: tuple[str, ...] = doc("why it is a candidate: the grid, upstream's default, torch DDP's 25 MiB, "
                                   "one bucket per buffer")


@dataclass(frozen=True)
class Prediction:
    """One candidate's planned layout and simulated backward."""

    bucket_size: int | None = doc("elements per bucket; null: one bucket per buffer")
    origins: tuple[str, ...] = doc("why it is a candidate")
    buckets: int = doc("buckets the planner made")
    padding: int = doc("padding elements (start gaps and bucket ends) over every buffer")
    padding_pct: float = doc("padding over the params' elements, %")
    compute_ms: float = doc("the backward's compute")
    launch_ms: float = doc("the implementation's launch cost, every bucket's")
    slowed_ms: float = doc("what collectives running beside the backward added to it (contention)")
    unhidden_ms: float = doc("communication run after the backward ended")
    exposed_ms: float = doc("step - compute: launches, contention and unhidden communication; what "
                            "the candidates are judged by")
    step_ms: float = doc("from the backward's start until the last collective ended")
    share: float = doc("exposed over step")


@dataclass(frozen=True)
class Recommendation:
    """The bucket size with the smallest exposed time, and every size within the tolerance of it."""

    bucket_size: int | None = doc("elements per bucket; null: one bucket per buffer")
    exposed_ms: float = doc("its predicted exposed time (step - compute)")
    tolerance: float = doc("how far above the smallest exposed time a size may be and still be in the range")
    within: tuple[int | None, ...] = doc("every candidate size within the tolerance, ascending (null: one "
                                         "bucket)")

    @property
    def low(self) -> int | None:
        return self.within[0]

    @property
    def high(self) -> int | None:
        return self.within[-1]


@dataclass(frozen=True)
class Check:
    """One size, predicted and measured round by round, side by side."""

    role: Literal["recommended", "far smaller", "far larger"] = doc("recommended, far smaller or far larger")
    bucket_size: int | None = doc("elements per bucket; null: one bucket")
    buckets: int = doc("buckets")
    predicted_ms: Figure = doc("the predicted step, per round, from the inputs measured in that round")
    measured_ms: Figure = doc("the measured step (backward and gradient sync, the slowest rank's), per round")
    error: Figure = doc("predicted / measured - 1, per round")

    def missed(self, target: float) -> bool:
        return abs(self.error.median) > target


@dataclass(frozen=True)
class Verification:
    """Whether the predictions held where they could be measured."""

    checks: tuple[Check, ...] = doc("each size, predicted and measured")
    target: float = doc("the largest error (|predicted / measured - 1|, median over rounds) a prediction "
                        "may have")
    verified: bool = doc("every prediction within the target, no size measured faster than the recommendation "
                         "beyond noise, and nothing else against it (problems is empty)")
    problems: tuple[str, ...] = doc("what stands against the recommendation, each in words; empty when verified")
    held: str = doc("what was checked and held, in words (the evidence beside the verdict); empty when nothing "
                    "could be checked")

    def evidence(self) -> str:
        """What the verdict rests on, to follow it: what held, or what stands against it and what held all the
        same."""
        if self.verified:
            return self.held
        return "; ".join(self.problems) + (f" (what held: {self.held})" if self.held else "")

    def against(self, problem: str) -> "Verification":
        """The same checks with one more problem: unverified."""
        return dataclasses.replace(self, verified=False, problems=(*self.problems, problem))


def size_label(bucket_size: int | None) -> str:
    """'4,194,304 elements', or 'one bucket'."""
    return "one bucket" if bucket_size is None else f"{bucket_size:,} elements"


@dataclass(frozen=True)
class CurvePoint:
    size_bytes: int = doc("bytes one in-place collective moved")
    time_ms: Figure = doc("ms per call, the slowest rank's, per round")


@dataclass(frozen=True)
class MeasuredInputs:
    """What the predictions rest on, measured on the ranks at hand, per round (samples in round order)."""

    collective: Collective = doc("the collective a bucket runs")
    world_size: int = doc("ranks the curve was measured at")
    curve: tuple[CurvePoint, ...] = doc("the collective's time at every bucket size a candidate has")
    launch_ms: Figure = doc("the implementation's launch cost per bucket")
    compute_ms: Figure = doc("the model's backward with one bucket (launched at its end: no collective "
                             "beside it), less one launch")
    contention_ms_per_mb: Figure = doc("backward time lost per MB (1e6 bytes) a collective moves beside it")
    method: str = doc("how each input was measured, in words")


IMPL = "reference"


@dataclass(frozen=True)
class BucketSizeRecord:
    """The method checked on one model: its inputs, every candidate predicted, the recommendation, and three
    sizes predicted and measured side by side."""

    impl: str = doc("the implementation whose buckets are tuned")
    model: Model = doc("width, depth, batch and wait_ratio of the emulated model")
    wait_ms: float = doc("emulated compute per layer's backward (wait_ratio x one layer's all-reduce)")
    inputs: MeasuredInputs = doc("the verification rounds' inputs")
    predictions: tuple[Prediction, ...] = doc("every candidate, from the inputs' medians")
    recommendation: Recommendation = doc("the smallest predicted exposed time, and the sizes within 5% of it")
    verification: Verification = doc("three sizes predicted and measured, round by round")
    sampling: Sampled = doc("the verification rounds: how many, why they stopped, each error's target")
    sleep_overshoot: SleepOvershoot | None = doc("the emulated compute's sleeps on CPU, time slept over time "
                                                 "asked; null on CUDA")
    world_size: int = doc("ranks")
    backend: Backend = doc("gloo or nccl")

    element_bytes = ELEMENT_BYTES
    """Bytes per grad element: the benchmark model's grads are fp32."""

    def bucket_bytes(self, bucket_size: int | None) -> int:
        """A candidate's largest bucket in bytes: its size, or the whole model when that holds less (or for one
        bucket)."""
        total = self.model.depth * self.model.bucket_elements
        return min(total if bucket_size is None else bucket_size, total) * self.element_bytes
