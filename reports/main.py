"""The main job: benchmarks, conformance suites and hardware, written as one report run.

``python -m reports`` (what ``tox -e report`` runs) writes
``reports/runs/<UTC time>/`` with ``report.md``, ``results.json`` (schema 2,
reports/schema.md) and PNG plots, points ``reports/runs/latest`` at it, and
compares it with the run before (the nightly gate, ``reports.compare``).
Under ``torchrun`` every rank of every node joins the benchmarks (NCCL on
GPUs) and rank 0 alone runs the suites and writes.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Sequence

from benchmarks import BENCHMARKS
from benchmarks.settings import DEFAULT_IMPLS, BenchSettings
from benchmarks.suite import run_benchmarks
from ranks import launched_by_torchrun

from . import compare, hardware, overhead, strength
from .claims import claims_markdown
from .conformance import SuiteResult, run_suite
from .hardware_markdown import hardware_markdown, nodes_markdown
from .metrics import collect_metrics
from .mutation.score import score_markdown
from .nvlink_traffic import nvlink_throughput_delta, nvlink_throughput_sample
from .render import conformance_markdown
from .runs import RunError, load_results, readable_runs
from .trend import plot_trend, trend, trend_markdown
from .writer import DEFAULT_ROOT, dump_json, latest_run, run_name, write_run

SCHEMA = 2
DEFAULT_SUITES = ("suites/layout", "suites/multigpu")


def progress(message: str) -> None:
    print(f"[report {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m reports", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--impl", action="append",
                        help=f"repeatable: the implementations checked by the suites and, where they have the "
                             f"ddp level, benchmarked side by side (default: {', '.join(DEFAULT_IMPLS)})")
    parser.add_argument("--suite", action="append", help=f"repeatable (default: {', '.join(DEFAULT_SUITES)})")
    parser.add_argument("--benchmark", action="append",
                        help=f"repeatable (default: all: {', '.join(b.name for b in BENCHMARKS)})")
    parser.add_argument("--out", type=Path, default=DEFAULT_ROOT, help="directory holding the runs")
    parser.add_argument("--pytest-arg", action="append", default=[], help="passed on to each suite run")
    parser.add_argument("--world-size", type=int, default=2, help="benchmark ranks when not under torchrun")
    parser.add_argument("--rounds", type=int, default=15, help="samples per overlap/step-time/harness figure")
    parser.add_argument("--busbw-max-bytes", type=int,
                        help="largest bucket of the bus-bandwidth sweep (default 16 MiB on gloo, 1 GiB on NCCL)")
    parser.add_argument("--smoke", action="store_true", help="each benchmark once on tiny inputs; no timing")
    parser.add_argument("--threshold", type=float, default=compare.DEFAULT_THRESHOLD,
                        help="relative change that counts, with significance (default 10%%)")
    parser.add_argument("--fail-on-regression", action="store_true",
                        help="exit 1 when a gated metric regressed against the previous run")
    parser.add_argument("--gate", action="append", default=[], metavar="PREFIX",
                        help="repeatable: gate informative metrics whose key starts with PREFIX too "
                             "(e.g. busbw_largest/ on a dedicated GPU node)")
    parser.add_argument("--no-suites", action="store_true", help="benchmarks only: no conformance runs")
    parser.add_argument("--no-strength", action="store_true",
                        help="skip the suite-strength runs of the broken implementations (skipped in smoke mode)")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.world_size < 1:
        parser.error(f"--rounds and --world-size: got {args.rounds} and {args.world_size}, but should be >= 1")
    return args


def bench_settings(args, backend: str) -> BenchSettings:
    impls = tuple(args.impl) if args.impl else DEFAULT_IMPLS
    settings = BenchSettings.for_backend(backend, args.busbw_max_bytes, rounds=args.rounds, impls=impls)
    return settings.smoked() if args.smoke else settings


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


def build_report(results: dict, comparison: str, trend_text: str) -> str:
    run = results["run"]
    seed_rows = [r for r in results["overhead"] if (r["model"], r["dp"]) in overhead.SEED_CLAIMS]
    parts = [
        "# Bucketed gradient synchronization: conformance and benchmark report",
        f"Run {run['name']} on {run['host']}: {run['mode']} mode, {run['world_size']} ranks over "
        f"{len(results['nodes']) or 1} node(s), backend {run['backend']}"
        f"{' (SMOKE: timings mean nothing)' if run['smoke'] else ''}. Timed figures are medians "
        "[95% interval of the median] over repeated rounds; UNSTABLE marks a spread past its limit.",
        "## Hardware", nodes_markdown(results["nodes"]),
        hardware_markdown(results["hardware"], results.get("nvlink_delta")),
        "## Conformance", conformance_markdown([SuiteResult(**r) for r in results["conformance"]])
        if results["conformance"] else "Not run (--no-suites).",
        "## Suite strength: deliberately broken implementations",
        strength.strength_markdown(results["strength"]) if results["strength"] else
        "Not run (smoke mode, --no-suites or --no-strength); tests/test_suite_strength.py checks the catalogue "
        "in CI.",
        score_markdown(),
        "## Comparison with the previous run", comparison,
        "## Trend over the runs", trend_text,
        "## The design notes' claims, checked", claims_markdown(results),
    ]
    for benchmark in BENCHMARKS:
        records = benchmark.records_of(results)
        if records:
            parts += [f"## {benchmark.title}", benchmark.markdown(records)]
    parts += [
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


def compare_with_previous(root: Path, metrics: dict, threshold: float, smoke: bool,
                          gate: Sequence[str] = ()) -> tuple[str, list]:
    """Markdown of the comparison with the newest earlier run, and its gated regressions."""
    previous = latest_run(root)
    if previous is None or not (previous / "results.json").exists():
        return "No previous run to compare with.", []
    try:
        old = load_results(previous)
    except RunError as exc:
        return f"The previous run {previous.name} cannot be compared: {exc}", []
    if old.get("run", {}).get("smoke") != smoke:
        return f"Previous run {previous.name} is {'not ' if smoke else ''}a smoke run: not compared.", []
    changes = compare.compare_metrics(old["metrics"], metrics, threshold, gate=gate)
    return f"Against {previous.name}. {compare.comparison_markdown(changes, threshold)}", \
        compare.gated_regressions(changes)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    torchrun = launched_by_torchrun()
    rank = int(os.environ["RANK"]) if torchrun else 0
    world_size = int(os.environ["WORLD_SIZE"]) if torchrun else args.world_size
    from ranks.groups import pick_backend

    backend = pick_backend(int(os.environ.get("LOCAL_WORLD_SIZE", world_size)))
    settings = bench_settings(args, backend)
    nvlink_before = nvlink_throughput_sample() if rank == 0 else None
    bench = run_benchmarks(settings, world_size, args.benchmark, progress if rank == 0 else lambda _: None)
    if rank != 0:
        return 0
    nvlink_after = nvlink_throughput_sample()
    conformance = [] if args.no_suites else run_conformance(args)
    strength_rows = []
    if not (args.smoke or args.no_strength or args.no_suites):
        progress("suite strength: every broken implementation against its suite")
        strength_rows = strength.strength_records(strength.measure_strength(progress))
    name = run_name()
    results = {
        "schema": SCHEMA,
        "run": {"name": name, "host": platform.node() or "unknown", "mode": "torchrun" if torchrun else "plain",
                "world_size": world_size, "backend": backend, "smoke": args.smoke},
        "settings": asdict(settings),
        "hardware": hardware.collect_hardware(),
        "nvlink_delta": nvlink_throughput_delta(nvlink_before, nvlink_after)
        if nvlink_before and nvlink_after else None,
        "conformance": [asdict(r) for r in conformance],
        "strength": strength_rows,
        **bench,
        "overhead": overhead.overhead_table(),
    }
    results["metrics"] = collect_metrics(results)
    comparison, regressions = compare_with_previous(args.out, results["metrics"], args.threshold, args.smoke,
                                                    args.gate)
    history = [*readable_runs(args.out), (name, results)]
    series = trend(history)
    files: dict[str, str | bytes] = {}
    with tempfile.TemporaryDirectory() as tmp:
        written = [p for b in BENCHMARKS if b.records_of(results) for p in b.plots(b.records_of(results), tmp)]
        written += plot_trend(series, tmp)
        results["plots"] = [p.relative_to(tmp).as_posix() for p in written]
        for rel in results["plots"]:
            files[rel] = (Path(tmp) / rel).read_bytes()
    report = build_report(results, comparison, trend_markdown(series, [n for n, _ in history]))
    files.update({"report.md": report, "results.json": dump_json(results)})
    run = write_run(files, root=args.out, name=name)
    print(report)
    progress(f"wrote {run}/report.md")
    ok = all(r.ok for r in conformance) and all(r["wrong"] == 0 for r in results.get("busbw", []))
    if not ok:
        return 1
    return 1 if args.fail_on_regression and regressions else 0
