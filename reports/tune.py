"""``python -m reports.tune``: which bucket size, for my model, on this machine, with its evidence.

The command of the tuner (``benchmarks.tuner``, which says how it answers; docs/tuning.md): the model and how it
is trained from the command line, the answer as tables or ``--json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Sequence

from benchmarks.tuner.method import GRID_START
from benchmarks.tuner.records import size_label
from benchmarks.tuner.tune import Question, RunCurve, TuneReport, tune
from cli import Count, Parser, Real
from datamodel import to_json
from ranks.capacity import WorldSize
from reference.layout.cli import DTYPES, add_model_source, add_planning, check_model_source, describe, read_specs

from .render.sections.bucket_size import predictions_markdown, recommendation_line, verification_markdown
from .store.arguments import RunOrLatest

DEFAULT_TOKENS = 4096
VERIFY_BUDGET_S = 30.0


def parser() -> Parser:
    p = Parser(prog="python -m reports.tune", description=__doc__)
    add_model_source(p)
    p.add_argument("--dp", type=Count(2, why="at one rank nothing is communicated, so every bucket size is the "
                                             "same"), required=True, help="data-parallel size to tune for")
    add_planning(p)
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


def question(args: argparse.Namespace) -> Question:
    """The command line as the tuner's question; ValueError for a model that cannot be read."""
    dtype = DTYPES[args.dtype]
    label, specs, found = read_specs(args, dtype)
    run = args.from_run
    curve = run and RunCurve(run.run.name, run.run.setup.label(), run.run.setup.smoke, run.benchmarks.busbw)
    return Question(model=label, specs=tuple(specs), read=describe(found, args.ep) if found else "", dp=args.dp,
                    ep=args.ep, policy=args.policy, dtype=args.dtype,
                    element_bytes=4 if args.grad_reduce_in_fp32 else dtype.itemsize,
                    grad_reduce_in_fp32=args.grad_reduce_in_fp32, grid_start=args.grid_start, tokens=args.tokens,
                    compute_ms=args.compute_ms, world_size=args.world_size, budget_s=args.budget, smoke=args.smoke,
                    curve=curve)


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
        report = tune(question(args), progress)
    except ValueError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(json.dumps(to_json(report), indent=2) if args.json else text(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
