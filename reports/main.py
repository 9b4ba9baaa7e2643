"""The main job: benchmarks, conformance suites and hardware, written as one report run.

``python -m reports`` (what ``tox -e report`` runs) writes
``reports/runs/<UTC time>/`` with ``report.md``, ``results.json`` (schema 4,
reports/schema.md) and PNG plots, points ``reports/runs/latest`` at it, and
compares it with the newest earlier run of the same setup (the nightly gate,
``reports.comparison``).

Data flows one way: the benchmarks and the suites measure; ``store`` records
the run (results.json, its metrics); ``comparison`` compares it with earlier
runs; ``render`` writes report.md and the plots.

Under ``torchrun`` every rank of every node joins the multi-rank benchmarks
(NCCL on GPUs), each node's first rank describes its node, then every rank
leaves the group; rank 0 alone goes on to the single-process benchmarks, the
suites and the strength runs (each a child process with a clean environment
and ``--world-size`` ranks of its own) and writes the run.
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
from benchmarks.padding import overhead_table
from benchmarks.settings import BUDGETS, DEFAULT_IMPLS, INFORMATIVE_ROUNDS, BenchSettings
from benchmarks.suite import run_rank_benchmarks, run_single_process_benchmarks
from ranks import launched_by_torchrun
from ranks.groups import pick_backend, tensors_on
from ranks.launch import leave_torchrun
from ranks.settings import DEVICE_ENV, DEVICES

from .cli import key_number
from .comparison.changes import DEFAULT_THRESHOLD, compare_metrics, gated_regressions
from .comparison.comparable import previous_comparable, run_setup
from .comparison.trend import trend
from .conformance.strength import measure_strength, strength_records
from .conformance.suites import SuiteResult, run_suite
from .render.comparison import comparison_markdown
from .render.report import build_report, section_plots
from .render.trend import plot_trend, trend_markdown
from .store.metrics import collect_metrics
from .store.runs import load_results, readable_runs
from .store.schema import SCHEMA
from .store.writer import DEFAULT_ROOT, dump_json, run_name, write_run

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
    parser.add_argument("--world-size", type=int, default=2,
                        help="ranks the suites spawn, and the benchmarks' ranks when not under torchrun (default 2; "
                             "1 on a node with one GPU)")
    parser.add_argument("--device", choices=DEVICES, default=os.environ.get(DEVICE_ENV, "auto"),
                        help="where the ranks' tensors live: auto (NCCL on CUDA where every rank has a GPU of its "
                             "own, else gloo on the CPU), cpu (gloo), or cuda (NCCL where every rank has a GPU, "
                             "else gloo over CUDA tensors, ranks sharing the GPUs: a setup of its own); the suites "
                             f"get the same (default: ${DEVICE_ENV} or auto)")
    parser.add_argument("--rounds", type=int,
                        help="a fixed number of rounds for every figure (default: the gated figures' rounds are "
                             "calibrated to their targets within each benchmark's budget, the others get "
                             f"{INFORMATIVE_ROUNDS})")
    parser.add_argument("--budget", type=_budget, action="append", default=[], metavar="BENCHMARK=SECONDS",
                        help="repeatable: seconds of calibrated rounds for a benchmark with gated figures (defaults: "
                             + ", ".join(f"{k}={v:g}" for k, v in BUDGETS.items()) + ")")
    parser.add_argument("--busbw-max-bytes", type=int,
                        help="largest bucket of the bus-bandwidth sweep (default 16 MiB on gloo, 1 GiB on NCCL)")
    parser.add_argument("--smoke", action="store_true", help="each benchmark once on tiny inputs; no timing")
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
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
    if (args.rounds is not None and args.rounds < 1) or args.world_size < 1:
        parser.error(f"--rounds and --world-size: got {args.rounds} and {args.world_size}, but should be >= 1")
    return args


def _budget(text: str) -> tuple[str, float]:
    form = f"BENCHMARK=SECONDS with BENCHMARK one of {', '.join(BUDGETS)} and SECONDS above 0"
    name, seconds = key_number(text, form)
    if name not in BUDGETS or seconds <= 0:
        raise argparse.ArgumentTypeError(f"got {text!r}, but should be {form}")
    return name, seconds


def bench_settings(args, backend: str) -> BenchSettings:
    impls = tuple(args.impl) if args.impl else DEFAULT_IMPLS
    settings = BenchSettings.for_backend(backend, args.busbw_max_bytes, rounds=args.rounds, impls=impls,
                                         budgets={**BUDGETS, **dict(args.budget)})
    return settings.smoked() if args.smoke else settings


def run_conformance(args) -> list[SuiteResult]:
    results = []
    for suite in args.suite or DEFAULT_SUITES:
        for impl in args.impl or DEFAULT_IMPLS:
            progress(f"running {suite} against {impl} ({args.world_size} ranks)")
            result = run_suite(suite, impl, [f"--device={args.device}", *args.pytest_arg], world_size=args.world_size)
            progress(f"  {impl}: {result.passed} passed, {result.failed + result.errors} failed, "
                     f"{result.skipped} skipped in {result.seconds:.1f}s")
            results.append(result)
    return results


def compare_with_previous(root: Path, name: str, results: dict, threshold: float,
                          gate: Sequence[str] = ()) -> tuple[str, list, str | None]:
    """Markdown of the comparison with the newest earlier run of the same setup, its gated regressions, and
    that run's name (None when there is none)."""
    previous, passed = previous_comparable(root, name, results)
    notes = "".join(f"Passed over {line}.\n\n" for line in passed)
    if previous is None:
        return notes + "No earlier run of this setup to compare with: nothing is gated.", [], None
    changes = compare_metrics(load_results(previous)["metrics"], results["metrics"], threshold, gate=gate)
    return (notes + f"Against {previous.name}. {comparison_markdown(changes, threshold)}",
            gated_regressions(changes), previous.name)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    torchrun = launched_by_torchrun()
    rank = int(os.environ["RANK"]) if torchrun else 0
    world_size = int(os.environ["WORLD_SIZE"]) if torchrun else args.world_size
    backend = pick_backend(int(os.environ.get("LOCAL_WORLD_SIZE", world_size)), args.device)
    settings = bench_settings(args, backend)
    report = progress if rank == 0 else lambda _: None
    bench = run_rank_benchmarks(settings, world_size, args.benchmark, report, device=args.device)
    bench["nodes"] = [node.to_json() for node in bench["nodes"]]
    if torchrun:
        leave_torchrun()
    if rank != 0:
        return 0
    bench.update(run_single_process_benchmarks(settings, args.benchmark, progress))
    conformance = [] if args.no_suites else run_conformance(args)
    strength_rows = []
    if not (args.smoke or args.no_strength or args.no_suites):
        progress("suite strength: every broken implementation against its suite")
        strength_rows = strength_records(measure_strength(progress))
    name = run_name()
    run = {"name": name, "host": platform.node() or "unknown", "mode": "torchrun" if torchrun else "plain",
           "world_size": world_size, "backend": backend, "tensors": tensors_on(backend, args.device),
           "smoke": args.smoke}
    run["setup"] = run_setup(run, bench["nodes"])
    results = {
        "schema": SCHEMA,
        "run": run,
        "settings": asdict(settings),
        "conformance": [asdict(r) for r in conformance],
        "suite_world_size": None if args.no_suites else args.world_size,
        "strength": strength_rows,
        **bench,
        "overhead": overhead_table(),
    }
    results["metrics"] = collect_metrics(results)
    comparison, regressions, previous = compare_with_previous(args.out, name, results, args.threshold, args.gate)
    results["compared_with"] = {"run": previous, "gated_regressions": [c.key for c in regressions]}
    history = [*readable_runs(args.out), (name, results)]
    series = trend(history)
    files: dict[str, str | bytes] = {}
    with tempfile.TemporaryDirectory() as tmp:
        written = section_plots(results, Path(tmp)) + plot_trend(series, tmp)
        results["plots"] = [p.relative_to(tmp).as_posix() for p in written]
        for rel in results["plots"]:
            files[rel] = (Path(tmp) / rel).read_bytes()
    text = build_report(results, comparison, trend_markdown(series, [n for n, _ in history]))
    files.update({"report.md": text, "results.json": dump_json(results)})
    written_run = write_run(files, root=args.out, name=name)
    print(text)
    progress(f"wrote {written_run}/report.md")
    ok = all(r.ok for r in conformance) and all(r["wrong"] == 0 for r in results.get("busbw", []))
    if not ok:
        return 1
    return 1 if args.fail_on_regression and regressions else 0


