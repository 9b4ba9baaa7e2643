"""``python -m reports.tune``: which bucket size, for my model, on this machine, with its evidence.

Every candidate bucket size (a doubling grid from 1M elements to one bucket,
upstream's default max(40M, 1M x dp), torch DDP's 25 MiB) is planned and one
backward simulated: per-param compute (measured from the model's layer shapes
here, or ``--compute-ms``), each bucket's collective read off a measured
bus-bandwidth curve at its padded size (``--from-run``'s, or swept now),
converted to ``--dp`` by nccl-tests' bus factor, and the implementation's
launch cost per bucket and the contention between collectives and compute,
measured here. The recommendation is the smallest exposed time (step -
compute), with every size within 5% of it. It comes with its evidence: the
same method, on a model scaled to what this machine runs, predicted at three
bucket sizes and measured there; a prediction more than 10% off leaves the
recommendation unverified. docs/tuning.md says how, and what differs on NCCL.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, replace
from typing import Sequence

from benchmarks.bucket_size import IMPL, BucketSizeRecord, tune_on_ranks
from benchmarks.busbw import GATED_PLACEMENT, CurveRequest, Sweep, curve_policy
from benchmarks.compute_profile import (ComputeProfile, has_linear_layer, profile_flop_rate, profile_given_total,
                                        profile_measured_layers)
from benchmarks.curve import CollectiveCurve
from benchmarks.sampling import Sampling
from benchmarks.schedule import DENSE_GROUP, EXPERT_GROUP, collective_for
from benchmarks.settings import GLOO_LARGEST, NCCL_LARGEST, BenchSettings
from benchmarks.stats import Figure
from benchmarks.tuning_inputs import CurvePoint, model_specs
from benchmarks.tuning import (GRID_START, Inputs, Prediction, Recommendation, candidate_sizes, predict_all,
                               recommend, size_label)
from cli import Count, Parser, Real
from datamodel import doc, to_json
from ranks import run_on_ranks
from ranks.capacity import WorldSize
from ranks.joining import pick_backend
from reference.layout import LayoutConfig, POLICIES
from reference.layout.cli import DTYPES, add_model_source, check_model_source, describe, read_specs

from .store.arguments import RunOrLatest
from .render.sections.bucket_size import predictions_markdown, recommendation_line, verification_markdown
from .store.model import Results

DEFAULT_TOKENS = 4096
CURVE_BUDGET_S = 20.0
VERIFY_BUDGET_S = 30.0
STARTUP_S = 20.0  # spawning the ranks and warming up, for the progress line's estimate


@dataclass(frozen=True)
class CurveSource:
    """Where the collective's times came from, and what turned them into times at ``--dp``."""

    collective: str = doc("reduce_scatter under the distributed optimizer, all_reduce otherwise")
    padding: str = doc("the sweep's padding read: the layout's policy where the sweep pads by it, else "
                       "unpadded")
    placement: str = doc("in-place: a bucket is a view of its grad buffer, as DDP uses it")
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


def parser() -> Parser:
    p = Parser(prog="python -m reports.tune", description=__doc__)
    add_model_source(p)
    p.add_argument("--dp", type=Count(2, why="at one rank nothing is communicated, so every bucket size is the "
                                             "same"), required=True, help="data-parallel size to tune for")
    p.add_argument("--policy", choices=list(POLICIES), default="padded",
                   help="padding policy (default padded: the distributed optimizer, reduce-scatter)")
    p.add_argument("--dtype", choices=list(DTYPES), default="bf16", help="the dtype every param is planned in "
                   "(default bf16)")
    p.add_argument("--grad-reduce-in-fp32", action="store_true")
    p.add_argument("--from-run", type=RunOrLatest(), metavar="RUN",
                   help="a run directory of `python -m reports` (or a runs root: its latest) whose bus-bandwidth "
                        "records give the curve (default: a calibrated sweep now)")
    p.add_argument("--compute-ms", type=Real(above=0, unit="milliseconds"),
                   help="the backward's compute per step, in ms, spread over the params by FLOPs (default: the "
                        "model's layer shapes timed here)")
    p.add_argument("--tokens", type=Count(1), default=DEFAULT_TOKENS,
                   help=f"tokens per rank per step, for timing the layer shapes (default {DEFAULT_TOKENS})")
    p.add_argument("--grid-start", type=Count(1, unit="of elements"), default=GRID_START, metavar="ELEMENTS",
                   help=f"the grid's smallest bucket, in elements (default {GRID_START:,})")
    p.add_argument("--world-size", type=WorldSize(2, why="the verification measures communication"), default=2,
                   help="ranks the measurements here run on (default 2; no more than this machine holds)")
    p.add_argument("--budget", type=Real(above=0, unit="seconds"), default=VERIFY_BUDGET_S,
                   help=f"seconds of verification rounds (default {VERIFY_BUDGET_S:g})")
    p.add_argument("--smoke", action="store_true", help="tiny inputs and one round: proves the path, verifies "
                   "nothing")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    return p


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser_ = parser()
    args = parser_.parse_args(argv)
    check_model_source(parser_, args)
    return args


def progress(message: str) -> None:
    print(f"[tune {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def curve_from_run(results: Results, collective: str, policy: str) -> tuple[CollectiveCurve, CurveSource]:
    """The curve of ``collective`` in place under ``policy``'s padding from a run's bus-bandwidth records."""
    run = results.run.name
    padding = curve_policy(policy)
    records = [r for r in results.benchmarks.busbw
               if r.collective == collective and r.placement == GATED_PLACEMENT and r.policy == padding]
    if not records:
        raise ValueError(f"--from-run: {run} has no {GATED_PLACEMENT} {collective} records padded {padding}, "
                         "but should: run `python -m reports --benchmark busbw` (the bus-bandwidth sweep) "
                         "first")
    world = records[0].world_size
    if world < 2:
        raise ValueError(f"--from-run: {run} was measured at world size {world}, but should be at 2 or more: "
                         "at one rank nothing crosses a bus")
    seconds = [(r.size_bytes, [t / 1e6 for t in r.time_us.samples])
               for r in sorted(records, key=lambda r: r.size_bytes)]
    smoke = " (a smoke run: its timings mean nothing)" if results.run.setup.smoke else ""
    return _curve(seconds, collective, padding, f"run {run} ({results.run.setup.label()}){smoke}", world)


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


def compute_profile(args, specs) -> ComputeProfile:
    if args.compute_ms is not None:
        return profile_given_total(specs, args.compute_ms / 1e3)
    if not has_linear_layer(specs):
        progress(f"the model has no linear layer to time: its FLOPs at {args.tokens} tokens at the rate of a linear "
                 "backward timed here (--compute-ms skips this)")
        return profile_flop_rate(specs, args.tokens)
    progress(f"timing the model's linear layer shapes at {args.tokens} tokens (--compute-ms skips this)")
    return profile_measured_layers(specs, args.tokens)


def measure_here(args, request: CurveRequest | None) -> tuple[list | None, BucketSizeRecord]:
    """On ``--world-size`` ranks: the curve when asked, and the method's check on the scaled model."""
    settings = BenchSettings().smoked() if args.smoke else BenchSettings()
    sampling = settings.sampling("bucket_size")
    if not args.smoke:
        sampling = replace(sampling, budget_s=args.budget)
    seconds = (request.sampling.budget_s if request else 0) + sampling.budget_s + STARTUP_S
    took = "" if args.smoke else f" (about {seconds:.0f} s)"
    progress(f"measuring on {args.world_size} ranks: {'a curve sweep, then ' if request else ''}"
             f"the method's check on {settings.tuning.depth} x Linear({settings.tuning.width}){took}")
    model = settings.tuning
    return run_on_ranks(tune_on_ranks, args.world_size, IMPL, model, sampling, request, args.smoke)[0]


def curve_request(args, collective: str) -> CurveRequest:
    backend = pick_backend(args.world_size, "auto")
    if args.smoke:
        sizes, sampling = (2**10, 2**12), Sampling(fixed_rounds=1, fixed_warmup=0)
    else:
        top = NCCL_LARGEST if backend == "nccl" else GLOO_LARGEST
        sizes = Sweep.geometric(2**10, top, rounds=1).sizes
        sampling = Sampling(budget_s=CURVE_BUDGET_S, min_rounds=6)
    return CurveRequest(collective, curve_policy(args.policy), tuple(sizes), sampling)


class Throttled:
    """``predict_all``'s progress, a line a second at most, and the last."""

    def __init__(self, every_s: float = 1.0) -> None:
        self.every_s, self.start, self.last = every_s, time.monotonic(), time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done == total or now - self.last >= self.every_s:
            self.last = now
            left = (now - self.start) / done * (total - done)
            progress(f"predicted {done} of {total} sizes, about {left:.0f} s left")


def tune(args) -> TuneReport:
    """Every step of the answer (module doc); ValueError for input that cannot be tuned."""
    dtype = DTYPES[args.dtype]
    config = LayoutConfig(args.dp, args.policy, None, args.grad_reduce_in_fp32, expert_dp=args.dp // args.ep)
    collective = collective_for(config)
    results = args.from_run
    label, specs, found = read_specs(args, dtype)
    ran = curve_from_run(results, collective, args.policy) if results else None
    profile = compute_profile(args, specs)
    points, record = measure_here(args, None if ran else curve_request(args, collective))
    curve, source = ran or _curve([(size, f.samples) for size, f in points], collective,
                                  curve_policy(args.policy), "measured now", args.world_size)
    dense, expert = at_dp(curve, args.dp), at_dp(curve, config.expert_dp_size)
    assumptions = {c.assumption for c in (dense, expert) if isinstance(c, CollectiveCurve) and c.assumption}
    source = replace(source, assumption="; ".join(sorted(assumptions)))
    measured = record.inputs.at(None, model_specs(record.model))
    inputs = Inputs(profile.backward(), {DENSE_GROUP: dense, EXPERT_GROUP: expert},
                    measured.launch_cost_s, measured.contention_s_per_byte)
    element_bytes = 4 if args.grad_reduce_in_fp32 else dtype.itemsize
    candidates = candidate_sizes(sum(s.numel for s in specs), args.dp, element_bytes, args.grid_start)
    predictions = predict_all(specs, config, candidates, inputs, progress=Throttled())
    return TuneReport(
        model=label, read=describe(found, args.ep) if found else "", dp=args.dp, ep=args.ep,
        policy=args.policy, dtype=args.dtype, grad_reduce_in_fp32=args.grad_reduce_in_fp32,
        element_bytes=element_bytes, curve=source,
        compute_method=profile.method + (f" ({'; '.join(profile.notes)})" if profile.notes else ""),
        compute_ms=profile.total_s * 1e3, launch_ms=inputs.launch_cost_s * 1e3,
        contention_ms_per_mb=inputs.contention_s_per_byte * 1e9, launch_method=record.inputs.method,
        predictions=predictions, recommendation=recommend(predictions), verification=record,
        verified=record.verification.verified, smoke=args.smoke)


def text(report: TuneReport) -> str:
    """The answer for a reader: what it rests on, every candidate, the recommendation and its evidence."""
    curve, record = report.curve, report.verification
    sizes = ", ".join(f"{p.size_bytes:,} B" for p in curve.points)
    model = record.model
    verification = record.verification
    verdict = ("verified on this machine" if verification.verified else "UNVERIFIED") + f": {verification.evidence()}"
    lines = [
        f"Model: {report.model}; dp {report.dp}, ep {report.ep}, policy {report.policy}, {report.dtype} "
        f"params, {report.element_bytes}-byte grads." + (f"\n{report.read}" if report.read else ""),
        f"Curve: {curve.collective}, {curve.placement}, buckets padded as {curve.padding}, from "
        f"{curve.source} at {curve.world_size} ranks ({sizes}); read at each bucket's padded size, "
        "extrapolated beyond the largest at its bus bandwidth."
        + (f" Assumed: {curve.assumption}." if curve.assumption else ""),
        f"Compute: {report.compute_method}: {report.compute_ms:.4g} ms.",
        f"Launch cost {report.launch_ms:.4g} ms per bucket and contention {report.contention_ms_per_mb:.3g} "
        f"ms per MB moved beside the backward, measured here with {record.impl}: {report.launch_method}.",
        "",
        predictions_markdown(report.predictions, report.recommendation, report.element_bytes),
        "",
        recommendation_line(report.recommendation, report.element_bytes) + f" ({verdict})",
        "",
        f"Evidence: the method on {model.depth} x Linear({model.width}, {model.width}) with "
        f"{record.wait_ms:.3g} ms emulated backward per layer, {record.world_size} ranks, {record.backend}; "
        f"its own recommendation {size_label(record.recommendation.bucket_size)}, and a size far smaller and "
        f"far larger, predicted and measured side by side ({record.sampling.rounds} rounds):",
        "",
        verification_markdown(record.verification, record.element_bytes),
    ]
    if report.smoke:
        lines.insert(0, "SMOKE: tiny inputs, one round: the timings mean nothing.")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        report = tune(args)
    except ValueError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(json.dumps(to_json(report), indent=2) if args.json else text(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
