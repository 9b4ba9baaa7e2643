"""One answer of the tuner for a user's model: which bucket size, on this machine, with its evidence.

Every candidate bucket size (a doubling grid from 1M elements to one bucket,
upstream's default max(40M, 1M x dp), torch DDP's 25 MiB) is planned and one
backward simulated: per-param compute (measured from the model's layer shapes
here, or given), each bucket's collective read off a measured bus-bandwidth
curve at its padded size (an earlier run's, or swept now), converted to the
data-parallel size by nccl-tests' bus factor, and the implementation's launch
cost per bucket and the contention between collectives and compute, measured
here. The recommendation is the smallest exposed time (step - compute), with
every size within 5% of it. It comes with its evidence: the same method, on a
model scaled to what this machine runs, predicted at three bucket sizes and
measured there; a prediction more than 10% off leaves the recommendation
unverified. ``python -m reports.tune`` is its command; docs/tuning.md says
how, and what differs on NCCL.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from datamodel import doc
from ranks import run_on_ranks
from ranks.joining import pick_backend
from reference.layout import LayoutConfig, ParamSpec

from ..busbw import GATED_PLACEMENT, BusbwRecord, Collective, Placement, Sweep
from ..sampling import Sampling
from ..settings import GLOO_LARGEST, NCCL_LARGEST, BenchSettings
from ..stats import Figure
from .compute import ComputeProfile, has_linear_layer, profile_flop_rate, profile_given_total, profile_measured_layers
from .curve import CollectiveCurve
from .inputs import inputs_at, model_specs
from .measure import CurveRequest, curve_policy, tune_on_ranks
from .method import Inputs, candidate_sizes, predict_all, recommend
from .records import IMPL, BucketSizeRecord, CurvePoint, Prediction, Recommendation
from .schedule import DENSE_GROUP, EXPERT_GROUP, collective_for

CURVE_BUDGET_S = 20.0
STARTUP_S = 20.0  # spawning the ranks and warming up, for the progress line's estimate
Progress = Callable[[str], None]


@dataclass(frozen=True)
class CurveSource:
    """Where the collective's times came from, and what turned them into times at the data-parallel size."""

    collective: Collective = doc("reduce_scatter under the distributed optimizer, all_reduce otherwise")
    padding: str = doc("the sweep's padding read: the layout's policy where the sweep pads by it, else "
                       "unpadded")
    placement: Placement = doc("in-place: a bucket is a view of its grad buffer, as DDP uses it")
    source: str = doc("the run it was read from, or 'measured now'")
    world_size: int = doc("ranks it was measured at")
    points: tuple[CurvePoint, ...] = doc("each measured size and its time")
    assumption: str = doc("how it was converted to --dp (nccl-tests' bus factor); empty at the measured "
                          "size")


@dataclass(frozen=True)
class TuneReport:
    """One answer of ``python -m reports.tune``, with everything it rests on."""

    model: str = doc("the model, as read")
    read: str = doc("what reading a built model found (tensors, ties, experts), or empty")
    dp: int = doc("data-parallel size")
    ep: int = doc("expert-parallel size")
    policy: str = doc("padding policy of the layout")
    dtype: str = doc("the dtype every param is planned in")
    grad_reduce_in_fp32: bool = doc("grads reduced in fp32")
    element_bytes: int = doc("bytes per grad element")
    curve: CurveSource = doc("the collective's measured curve")
    compute_method: str = doc("how the per-param backward times were obtained")
    compute_ms: float = doc("the backward's compute, summed")
    launch_ms: float = doc("the implementation's launch cost per bucket, measured here (median)")
    contention_ms_per_mb: float = doc("backward time lost per MB a collective moves beside it, measured here "
                                      "(median)")
    launch_method: str = doc("how the launch cost and the contention were measured")
    predictions: tuple[Prediction, ...] = doc("every candidate bucket size")
    recommendation: Recommendation = doc("the smallest exposed time, and the sizes within 5% of it")
    verification: BucketSizeRecord = doc("the method checked on this machine: a scaled model's inputs, "
                                         "predictions and three sizes measured")
    verified: bool = doc("whether that check held: without it the recommendation is unverified")
    smoke: bool = doc("a smoke run: tiny inputs, one round, nothing verified")


@dataclass(frozen=True)
class RunCurve:
    """An earlier run's bus-bandwidth sweep, named for the report."""

    name: str
    setup: str
    smoke: bool
    records: tuple[BusbwRecord, ...]


@dataclass(frozen=True)
class Question:
    """What the tuner is asked: a model's params (one rank's) and how it is trained, and how to measure here."""

    model: str
    """The model, as read."""
    specs: tuple[ParamSpec, ...]
    read: str
    """What reading a built model found, or empty."""
    dp: int
    ep: int
    policy: str
    dtype: str
    """The dtype's name every param is planned in (``specs`` carry it)."""
    element_bytes: int
    grad_reduce_in_fp32: bool
    grid_start: int
    tokens: int
    """Tokens per rank per step, for timing the layer shapes."""
    compute_ms: float | None
    """The backward's compute, given; None: timed here."""
    world_size: int
    budget_s: float
    """Seconds of verification rounds."""
    smoke: bool
    curve: RunCurve | None = None
    """An earlier run's bus-bandwidth records; None: a sweep now."""


def curve_from_run(run: RunCurve, collective: str, policy: str) -> tuple[CollectiveCurve, CurveSource]:
    """The curve of ``collective`` in place under ``policy``'s padding from a run's bus-bandwidth records."""
    padding = curve_policy(policy)
    records = [r for r in run.records
               if r.collective == collective and r.placement == GATED_PLACEMENT and r.policy == padding]
    if not records:
        raise ValueError(f"--from-run: {run.name} has no {GATED_PLACEMENT} {collective} records padded {padding}, "
                         "but should: run `python -m reports --benchmark busbw` (the bus-bandwidth sweep) "
                         "first")
    world = records[0].world_size
    if world < 2:
        raise ValueError(f"--from-run: {run.name} was measured at world size {world}, but should be at 2 or more: "
                         "at one rank nothing crosses a bus")
    seconds = [(r.size_bytes, [t / 1e6 for t in r.time_us.samples])
               for r in sorted(records, key=lambda r: r.size_bytes)]
    smoke = " (a smoke run: its timings mean nothing)" if run.smoke else ""
    return _curve(seconds, collective, padding, f"run {run.name} ({run.setup}){smoke}", world)


def _curve(seconds: list[tuple[int, Sequence[float]]], collective: str, padding: str, source: str,
           world: int) -> tuple[CollectiveCurve, CurveSource]:
    """A curve from each size's samples (seconds), and what it is, for the report."""
    points = tuple(CurvePoint(size, Figure.of([t * 1e3 for t in samples], "ms", "lower"))
                   for size, samples in seconds)
    curve = CollectiveCurve.from_points(collective, world, [(size, t) for size, samples in seconds
                                                            for t in samples])
    return curve, CurveSource(collective, padding, GATED_PLACEMENT, source, world, points, "")


def at_dp(curve: CollectiveCurve, dp: int):
    """The curve at ``dp`` ranks: as measured, converted by the bus factor, or no time at all at one rank."""
    if dp == curve.world_size:
        return curve
    if dp == 1:
        return lambda size_bytes: 0.0
    return curve.at_world_size(dp)


def profile_compute(question: Question, progress: Progress) -> ComputeProfile:
    """Each param's backward time: given, timed from the model's linear layer shapes, or its FLOPs at a
    timed rate (``benchmarks.tuner.compute``)."""
    specs = list(question.specs)
    if question.compute_ms is not None:
        return profile_given_total(specs, question.compute_ms / 1e3)
    if not has_linear_layer(specs):
        progress(f"the model has no linear layer to time: its FLOPs at {question.tokens} tokens at the rate of a "
                 "linear backward timed here (--compute-ms skips this)")
        return profile_flop_rate(specs, question.tokens)
    progress(f"timing the model's linear layer shapes at {question.tokens} tokens (--compute-ms skips this)")
    return profile_measured_layers(specs, question.tokens)


def measure_here(question: Question, request: CurveRequest | None, progress: Progress
                 ) -> tuple[list | None, BucketSizeRecord]:
    """On ``world_size`` ranks: the curve when asked, and the method's check on the scaled model."""
    settings = BenchSettings().smoked() if question.smoke else BenchSettings()
    sampling = settings.sampling("bucket_size")
    if not question.smoke:
        sampling = replace(sampling, budget_s=question.budget_s)
    seconds = (request.sampling.budget_s if request else 0) + sampling.budget_s + STARTUP_S
    took = "" if question.smoke else f" (about {seconds:.0f} s)"
    progress(f"measuring on {question.world_size} ranks: {'a curve sweep, then ' if request else ''}"
             f"the method's check on {settings.tuning.depth} x Linear({settings.tuning.width}){took}")
    return run_on_ranks(tune_on_ranks, question.world_size, IMPL, settings.tuning, sampling, request,
                        question.smoke)[0]


def curve_request(question: Question, collective: str) -> CurveRequest:
    backend = pick_backend(question.world_size, "auto")
    if question.smoke:
        sizes, sampling = (2**10, 2**12), Sampling(fixed_rounds=1, fixed_warmup=0)
    else:
        top = NCCL_LARGEST if backend == "nccl" else GLOO_LARGEST
        sizes = Sweep.geometric(2**10, top, rounds=1).sizes
        sampling = Sampling(budget_s=CURVE_BUDGET_S, min_rounds=6)
    return CurveRequest(collective, curve_policy(question.policy), tuple(sizes), sampling)


class Throttled:
    """``predict_all``'s progress, a line a second at most, and the last."""

    def __init__(self, progress: Progress, every_s: float = 1.0) -> None:
        self.progress, self.every_s, self.start, self.last = progress, every_s, time.monotonic(), time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done == total or now - self.last >= self.every_s:
            self.last = now
            left = (now - self.start) / done * (total - done)
            self.progress(f"predicted {done} of {total} sizes, about {left:.0f} s left")


def tune(question: Question, progress: Progress = lambda _: None) -> TuneReport:
    """Every step of the answer (module doc); ValueError for input that cannot be tuned."""
    config = LayoutConfig(question.dp, question.policy, None, question.grad_reduce_in_fp32,
                          expert_dp=question.dp // question.ep)
    collective = collective_for(config)
    specs = list(question.specs)
    ran = curve_from_run(question.curve, collective, question.policy) if question.curve else None
    profile = profile_compute(question, progress)
    points, record = measure_here(question, None if ran else curve_request(question, collective), progress)
    curve, source = ran or _curve([(size, f.samples) for size, f in points], collective,
                                  curve_policy(question.policy), "measured now", question.world_size)
    dense, expert = at_dp(curve, question.dp), at_dp(curve, config.expert_dp_size)
    assumptions = {c.assumption for c in (dense, expert) if isinstance(c, CollectiveCurve) and c.assumption}
    source = replace(source, assumption="; ".join(sorted(assumptions)))
    measured = inputs_at(record.inputs, None, model_specs(record.model))
    inputs = Inputs(profile.backward(), {DENSE_GROUP: dense, EXPERT_GROUP: expert},
                    measured.launch_cost_s, measured.contention_s_per_byte)
    candidates = candidate_sizes(sum(s.numel for s in specs), question.dp, question.element_bytes,
                                 question.grid_start)
    predictions = predict_all(specs, config, candidates, inputs, progress=Throttled(progress))
    return TuneReport(
        model=question.model, read=question.read, dp=question.dp, ep=question.ep, policy=question.policy,
        dtype=question.dtype, grad_reduce_in_fp32=question.grad_reduce_in_fp32,
        element_bytes=question.element_bytes, curve=source,
        compute_method=profile.method + (f" ({'; '.join(profile.notes)})" if profile.notes else ""),
        compute_ms=profile.total_s * 1e3, launch_ms=inputs.launch_cost_s * 1e3,
        contention_ms_per_mb=inputs.contention_s_per_byte * 1e9, launch_method=record.inputs.method,
        predictions=predictions, recommendation=recommend(predictions), verification=record,
        verified=record.verification.verified, smoke=question.smoke)
