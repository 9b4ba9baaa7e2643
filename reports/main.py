"""The main job: conformance suites, benchmarks and hardware, written as one report run.

``python -m reports`` (what ``tox -e report`` runs) writes
``reports/runs/<UTC time>/`` with ``report.md``, ``results.json`` and PNG
plots, points ``reports/runs/latest`` at it, and compares it with the run
before. Under ``torchrun --nproc-per-node=N -m reports`` every rank joins the
benchmarks (NCCL on GPUs) and rank 0 alone runs the suites and writes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Sequence

from benchmarks.launch import under_torchrun
from benchmarks.suite import BenchConfig, run_all

from . import compare, hardware, overhead, plots, render, strength
from .hardware_markdown import hardware_markdown
from .nvlink_traffic import nvlink_throughput_delta, nvlink_throughput_sample
from .bench import run_benchmarks
from .conformance import SuiteResult, run_suite
from .metrics import collect_metrics
from .writer import DEFAULT_ROOT, dump_json, latest_run, run_name, write_run

DEFAULT_IMPLS = ("reference", "megatron", "torch", "fsdp2")
DEFAULT_SUITES = ("suites/layout", "suites/multigpu")
COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather")


def progress(message: str) -> None:
    print(f"[report {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m reports", description=__doc__)
    parser.add_argument("--impl", action="append", help=f"repeatable (default: {', '.join(DEFAULT_IMPLS)})")
    parser.add_argument("--suite", action="append", help=f"repeatable (default: {', '.join(DEFAULT_SUITES)})")
    parser.add_argument("--out", type=Path, default=DEFAULT_ROOT, help="directory holding the runs")
    parser.add_argument("--pytest-arg", action="append", default=[], help="passed on to each suite run")
    parser.add_argument("--world-size", type=int, default=2, help="benchmark ranks when not under torchrun")
    parser.add_argument("--rounds", type=int, default=40, help="step-time rounds (default 40)")
    parser.add_argument("--smoke", action="store_true", help="each benchmark once on tiny inputs; no timing")
    parser.add_argument("--threshold", type=float, default=0.10, help="relative change that counts (default 10%%)")
    parser.add_argument("--fail-on-regression", action="store_true", help="exit 1 on a regression vs the last run")
    parser.add_argument("--no-strength", action="store_true",
                        help="skip the suite-strength runs of the broken implementations (skipped in smoke mode)")
    return parser.parse_args(argv)


def run_conformance(args) -> list[SuiteResult]:
    results = []
    for suite in args.suite or DEFAULT_SUITES:
        for impl in args.impl or DEFAULT_IMPLS:
            progress(f"running {suite} against {impl}")
            result = run_suite(suite, impl, args.pytest_arg)
            progress(f"  {impl}: {result.passed} passed, {result.failed + result.errors} failed, "
                     f"{result.skipped} skipped in {result.seconds:.1f}s")
            results.append(result)
    return results


def single_process_benchmarks(smoke: bool) -> dict[str, list[dict]]:
    extra = ["--benchmark-disable"] if smoke else []
    return {name: run_benchmarks(f"benchmarks/test_{name}.py", extra) for name in ("shard_cache", "planning")}


def build_report(results: dict, comparison: str) -> str:
    run = results["run"]
    seed_rows = [r for r in results["overhead"] if (r["model"], r["dp"]) in overhead.SEED_CLAIMS]
    parts = [
        "# Bucketed gradient synchronization: conformance and benchmark report",
        f"Run {run['name']} on {run['host']}: {run['mode']} mode, {run['world_size']} ranks, "
        f"backend {run['backend']}{' (SMOKE: timings mean nothing)' if run['smoke'] else ''}.",
        "## Hardware", hardware_markdown(results["hardware"], results.get("nvlink_delta")),
        "## Conformance", render.conformance_markdown([SuiteResult(**r) for r in results["conformance"]]),
        "## Suite strength: deliberately broken implementations",
        strength.strength_markdown(results["strength"]) if results["strength"] else
        "Not run (smoke mode or --no-strength); tests/test_suite_strength.py checks the catalogue in CI.",
        "## Comparison with the previous run", comparison,
        "## Bus bandwidth: averages per collective and padding policy",
        render.busbw_summary_markdown(results["busbw_average"], results["busbw"]),
        f"Timing harness vs a bare loop of the same all-reduce: "
        f"{results['harness_overhead']['harness_over_bare_median']:.3f}x (goal: < 1.02x).",
    ]
    for collective in COLLECTIVES:
        parts += [f"## Bus bandwidth: {collective}", render.busbw_markdown(results["busbw"], collective)]
    parts += [
        "## Overlap efficiency", render.overlap_markdown(results["overlap"]),
        "## Step time: reference vs torch DDP (alternating rounds, one run)",
        render.step_time_markdown(results["step_time"]),
        "## Shard caching (cached views vs re-slicing every bucket)", render.table(results["shard_cache"]),
        "## Planner speed (no tensor storage allocated)", render.table(results["planning"]),
        "## Padding overhead: the seed's table recomputed",
        "Bucket size 40,000,000 elements; padding counts every element that is not a parameter "
        "(64-element start gaps and bucket-end padding). The seed's figures are claims without a "
        "derivation (docs/errata.md).",
        overhead.render_markdown(seed_rows),
        "## Padding overhead: all models, dp and policies", overhead.render_markdown(results["overhead"]),
    ]
    if results.get("plots"):
        parts += ["## Plots", "\n".join(f"![{p}]({p})" for p in results["plots"])]
    return "\n\n".join(parts) + "\n"


def compare_with_previous(root: Path, metrics: dict, threshold: float, smoke: bool) -> tuple[str, int]:
    """Markdown of the comparison with the newest earlier run, and its number of regressions."""
    previous = latest_run(root)
    old_file = previous / "results.json" if previous else None
    if old_file is None or not old_file.exists():
        return "No previous run to compare with.", 0
    old = json.loads(old_file.read_text())
    if old.get("run", {}).get("smoke") != smoke:
        return f"Previous run {previous.name} is {'not ' if smoke else ''}a smoke run: not compared.", 0
    changes = compare.compare_metrics(old.get("metrics", {}), metrics, threshold)
    regressions = sum(c.status == "regression" for c in changes)
    # Added and removed metrics are counted in the summary line, not listed row by row.
    table = compare.comparison_markdown(changes, threshold, listed=("regression", "improvement"))
    return f"Against {previous.name}: {table}", regressions


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    torchrun = under_torchrun()
    rank = int(os.environ["RANK"]) if torchrun else 0
    world_size = int(os.environ["WORLD_SIZE"]) if torchrun else args.world_size
    config = BenchConfig.smoke_test(world_size) if args.smoke else BenchConfig(world_size=world_size,
                                                                              rounds=args.rounds)
    nvlink_before = nvlink_throughput_sample() if rank == 0 else None
    if rank == 0:
        progress(f"benchmarks on {world_size} ranks: bus bandwidth sweep, overlap, step time")
    bench = run_all(config)
    if rank != 0:
        return 0
    nvlink_after = nvlink_throughput_sample()
    results_list = run_conformance(args)
    strength_rows = []
    if not (args.smoke or args.no_strength):
        progress("suite strength: every broken implementation against its suite")
        strength_rows = strength.strength_records(strength.measure_strength(progress))
    progress("shard caching and planner benchmarks; padding overhead of the model catalog")
    single = single_process_benchmarks(args.smoke)
    name = run_name()
    results = {
        "schema": 1,
        "run": {"name": name, "host": platform.node() or "unknown", "mode": "torchrun" if torchrun else "plain",
                "world_size": world_size, "backend": bench["busbw"][0]["backend"], "smoke": args.smoke},
        "hardware": hardware.collect_hardware(),
        "nvlink_delta": nvlink_throughput_delta(nvlink_before, nvlink_after)
        if nvlink_before and nvlink_after else None,
        "conformance": [asdict(r) for r in results_list],
        "strength": strength_rows,
        **bench, **single,
        "overhead": overhead.overhead_table(),
    }
    results["metrics"] = collect_metrics(results)
    comparison, regressions = compare_with_previous(args.out, results["metrics"], args.threshold, args.smoke)
    files: dict[str, str | bytes] = {}
    with tempfile.TemporaryDirectory() as tmp:
        results["plots"] = plots.render_plots(results, tmp)
        for rel in results["plots"]:
            files[rel] = (Path(tmp) / rel).read_bytes()
    report = build_report(results, comparison)
    files.update({"report.md": report, "results.json": dump_json(results)})
    run = write_run(files, root=args.out, name=name)
    print(report)
    progress(f"wrote {run}/report.md")
    ok = all(r.ok for r in results_list) and all(r["wrong"] == 0 for r in bench["busbw"])
    if not ok:
        return 1
    return 1 if args.fail_on_regression and regressions else 0
