"""The tuner measured on the ranks: its inputs, every candidate predicted, the recommendation, and three sizes
predicted and measured side by side (the bucket-size benchmark, ``benchmarks.bucket_size``, and
``python -m reports.tune``); with the bus-bandwidth curve swept for it where no run gives one."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from functools import partial
from typing import Callable, Sequence

from reference.layout import ParamSpec, plan_layout

from ..busbw import bucket_count
from ..measurable import lone_rank
from ..measuring.busbw import ELEMENT, PADDINGS, calls_per_round, make_buffers, padded_count
from ..measuring.emulation import sleep_overshoot, watch_sleeps
from ..measuring.overlap import bucket_collective_s
from ..measuring.timing import timed
from ..sampling import RoundProgress, Sampled, Sampling, Target, rotating_round, sample
from ..settings import Model
from ..stats import Figure
from .inputs import Probe, inputs_at, layout_config, measured_inputs, model_specs
from .method import candidate_sizes, predict_all, recommend, verification_sizes, verify
from .records import (IMPL, ROLES, BucketSizeRecord, Candidate, Check, MeasuredInputs, Prediction, Recommendation,
                      Verification, size_label)
from .schedule import SimulatedBucket, buckets_of

CALIBRATION = Sampling(fixed_rounds=5, fixed_warmup=2)
VERIFY_WARMUP = 2
ERROR_TARGET = Target(0.025, "absolute")
"""How narrow each size's error (predicted / measured - 1) must be known: ±2.5 points, well inside the 10%
target, so that a verdict is not decided by noise."""


Progress = Callable[[str], None]


@dataclass(frozen=True)
class Plan:
    """What one tuning measurement is about: the model's params, the candidates, and the sizes to time."""

    model: Model
    world_size: int

    @property
    def specs(self) -> list[ParamSpec]:
        return model_specs(self.model)

    @property
    def candidates(self) -> tuple[Candidate, ...]:
        """One layer per bucket, doubling, and the others every model gets (``candidate_sizes``)."""
        layer = self.model.bucket_elements
        return candidate_sizes(self.model.depth * layer, self.world_size, ELEMENT.itemsize, smallest=layer)

    @property
    def beside_bytes(self) -> int:
        """The all-reduce beside the backward that measures contention: half the model."""
        return max(1, self.model.depth // 2) * self.model.bucket_elements * ELEMENT.itemsize

    @property
    def curve_bytes(self) -> list[int]:
        """Every padded bucket size a candidate has, and the contention's all-reduce."""
        sizes = {b.size_bytes for c in self.candidates for b in self.buckets(c.bucket_size)}
        return sorted(sizes | {self.beside_bytes})

    def buckets(self, bucket_size: int | None) -> tuple[SimulatedBucket, ...]:
        return buckets_of(plan_layout(self.specs, layout_config(self.world_size, bucket_size)))

    def same_layout(self, a: int | None, b: int | None) -> bool:
        """Whether two sizes make the same buckets: then they are one choice."""
        return [x.params for x in self.buckets(a)] == [x.params for x in self.buckets(b)]

    def inputs(self, times: dict[str, list[float]]) -> MeasuredInputs:
        return measured_inputs(times, self.model.depth, self.beside_bytes, self.curve_bytes, self.world_size)

    def predictions(self, inputs: MeasuredInputs) -> tuple[Prediction, ...]:
        specs = self.specs
        config = layout_config(self.world_size, None)
        return predict_all(specs, config, self.candidates, inputs_at(inputs, None, specs))

    def verified_sizes(self, recommended: int | None) -> dict[str, int | None]:
        """The recommendation and the far sizes (``verification_sizes``), less any with its very buckets."""
        sizes = verification_sizes((c.bucket_size for c in self.candidates), recommended)
        return {role: size for role, size in sizes.items()
                if role == ROLES[0] or not self.same_layout(size, recommended)}

    def checks(self, times: dict[str, list[float]], sizes: dict[str, int | None]) -> list[Check]:
        """Each size's step, predicted from every round's inputs, against that round's measured step."""
        inputs, specs = self.inputs(times), self.specs
        rounds = range(len(times["compute"]))
        checks = []
        for role, size in sizes.items():
            config = layout_config(self.world_size, size)
            predicted = [inputs_at(inputs, r, specs).simulate(specs, config)[0].step_s for r in rounds]
            measured = times[f"step/{role}"]
            errors = [p / m - 1 for p, m in zip(predicted, measured)]
            checks.append(Check(role, size, len(self.buckets(size)),
                                Figure.of([p * 1e3 for p in predicted], "ms", "lower"),
                                Figure.of([m * 1e3 for m in measured], "ms", "lower"),
                                Figure.of(errors, "", "lower", "absolute")))
        return checks


def measure_tuning(ctx, impl, model: Model, sampling: Sampling, progress: Progress = lambda _: None,
                   smoke: bool = False) -> BucketSizeRecord:
    """Calibrate, predict every candidate, and verify three sizes against their measured steps (module doc);
    one rank (where nothing is communicated) or a smoke run's one round on tiny inputs verifies nothing,
    whatever the numbers say."""
    plan = Plan(model, ctx.world_size)
    with watch_sleeps() as sleeps:
        wait_s = model.wait_ratio * bucket_collective_s(ctx, model)
        probe = Probe(ctx, impl, model, wait_s, plan.curve_bytes, plan.beside_bytes)
        calibration = CALIBRATION if sampling.fixed_rounds is None else sampling
        times = _rounds(ctx, probe, calibration, None, progress, "calibration")[0]
        first = recommend(plan.predictions(plan.inputs(times))).bucket_size
        sizes = plan.verified_sizes(first)
        progress(f"calibration: recommends {size_label(first)}; verifying "
                 + ", ".join(f"{role} {size_label(size)}" for role, size in sizes.items()))
        probe.add_steps(sizes)
        checks_of = partial(plan.checks, sizes=sizes)
        times, sampled = _rounds(ctx, probe, _warmed(sampling), checks_of, progress, "verification")
    inputs = plan.inputs(times)
    predictions = plan.predictions(inputs)
    recommendation = recommend(predictions)
    verification = _moved(plan, first, recommendation, verify(checks_of(times)))
    lone = lone_rank(ctx.world_size, "for a bucket size to change")
    if lone or smoke:
        verification = verification.against(lone.why if lone else
                                            "a smoke run (one round on tiny inputs) verifies nothing")
    overshoot = sleep_overshoot(sleeps) if ctx.device.type == "cpu" else None
    return BucketSizeRecord(impl=impl.name, model=model, wait_ms=wait_s * 1e3, inputs=inputs,
                            predictions=predictions, recommendation=recommendation, verification=verification,
                            sampling=sampled, sleep_overshoot=overshoot, world_size=ctx.world_size,
                            backend=ctx.backend)


def _moved(plan: Plan, first: int | None, recommendation: Recommendation,
           verification: Verification) -> Verification:
    """The verdict, knowing that the size measured as recommended was the calibration's best: unverified
    when it fell out of the verification rounds' 5% range, said when it stayed in it but is not the best."""
    measured, best = size_label(first), size_label(recommendation.bucket_size)
    within = f"within {recommendation.tolerance:.0%} of the verification rounds' best, {best}"
    if not any(plan.same_layout(first, size) for size in recommendation.within):
        return verification.against(f"the size measured as recommended, {measured} (the calibration's best), is "
                                    f"not {within}")
    if not plan.same_layout(first, recommendation.bucket_size):
        return replace(verification, held=(
            f"{verification.held}; the size measured as recommended, {measured} (the calibration's best), is "
            f"{within}"))
    return verification


def _rounds(ctx, probe: Probe, sampling: Sampling, checks_of=None, progress: Progress = lambda _: None,
            phase: str = "") -> tuple[dict[str, list[float]], Sampled]:
    """Rounds of every operation of ``probe``, sampled to the errors' targets when ``checks_of`` gives them,
    with a progress line after each kept round."""
    ops = probe.ops()
    times: dict[str, list[float]] = {name: [] for name in ops}
    one_round = rotating_round(ops, times)
    sizes = f"{len(probe.steps)} sizes measured side by side" if probe.steps else "the inputs"
    shown = RoundProgress(progress, f"{phase} ({sizes})", sampling)

    def reported(index: int, keep: bool) -> float:
        seconds = one_round(index, keep)
        if keep:
            shown(len(times["compute"]), seconds)
        return seconds

    def targets() -> dict:
        if checks_of is None or not times["compute"]:
            return {}
        return {c.role: (c.error, ERROR_TARGET) for c in checks_of(times)}

    return times, sample(ctx, sampling, reported, targets)


def _warmed(sampling: Sampling) -> Sampling:
    """The verification's sampling: the calibration warmed everything but the steps' models, which a couple
    of rounds warm (a calibrated warm-up on a shared machine can take twenty)."""
    return sampling if sampling.fixed_warmup is not None else replace(sampling, fixed_warmup=VERIFY_WARMUP)


def tune_on_ranks(ctx, impl: str, model: Model, sampling: Sampling, curve: CurveRequest | None = None,
                  smoke: bool = False) -> tuple[list[tuple[int, Figure]] | None, BucketSizeRecord]:
    """What ``python -m reports.tune`` measures on every rank: the requested curve (a calibrated sweep of one
    collective in place, when no earlier run gives one), then the method's check on ``model``."""
    from suites.impls import load_implementation

    report = _progress(ctx)
    points = None
    if curve is not None:
        points = sweep_curve(ctx, curve.collective, curve.policy, curve.sizes, curve.sampling, report)
    return points, measure_tuning(ctx, load_implementation(impl), model, sampling, report, smoke)


def _progress(ctx) -> Progress:
    """Progress lines on stderr, from the first rank only."""
    if ctx.rank != 0:
        return lambda _: None
    return lambda text: print(f"[bucket size] {text}", file=sys.stderr, flush=True)


def measure(ctx, settings) -> list[BucketSizeRecord]:
    """The nightly's check of the method on the benchmark's tuning model, at the run's world size (at one rank
    the path runs, and its record says that nothing was there to verify)."""
    from suites.impls import load_implementation

    return [measure_tuning(ctx, load_implementation(IMPL), settings.tuning, settings.sampling("bucket_size"),
                           _progress(ctx), settings.smoke)]


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
