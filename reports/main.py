"""The main job: conformance suites per implementation plus the padding-overhead report.

``python -m reports`` (what ``tox -e report`` runs) writes
``reports/runs/<UTC time>/report.md`` and ``results.json`` and points
``reports/runs/latest`` at them.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Sequence

from tabulate import tabulate

from benchmarks.step_time import measure as measure_step_time

from . import overhead
from .bench import run_benchmarks
from .conformance import SuiteResult, run_suite
from .writer import DEFAULT_ROOT, dump_json, write_run

DEFAULT_IMPLS = ("reference", "megatron")
DEFAULT_SUITES = ("suites/layout", "suites/multigpu")


def progress(message: str) -> None:
    print(f"[report {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def conformance_markdown(results: list[SuiteResult]) -> str:
    rows = [
        {
            "suite": r.suite, "implementation": r.header or r.impl, "passed": r.passed,
            "failed": r.failed + r.errors, "skipped": r.skipped, "xfailed": r.xfailed,
            "verdict": "PASS" if r.ok else "FAIL",
        }
        for r in results
    ]
    text = tabulate(rows, headers="keys", tablefmt="github")
    for r in results:
        if r.failures:
            text += f"\n\nFailures of {r.impl} in {r.suite}:\n" + "\n".join(f"- {f}" for f in r.failures[:20])
        if r.skip_reasons:
            reasons = sorted(r.skip_reasons.items(), key=lambda kv: -kv[1])
            text += f"\n\nSkips of {r.impl} in {r.suite} (count: reason):\n" + "\n".join(
                f"- {n}: {reason}" for reason, n in reasons
            )
    return text


def step_time_markdown(row: dict) -> str:
    shown = {k: (f"{v:.3f}" if isinstance(v, float) else v) for k, v in row.items()}
    return tabulate([shown], headers="keys", tablefmt="github") + (
        "\n\nratio = reference / torch DDP per round (median, quartiles); goal <= 1.05."
    )


def build_report(results: list[SuiteResult], overhead_rows: list[dict], planning: list[dict],
                 step_time: dict) -> str:
    seed_rows = [r for r in overhead_rows if (r["model"], r["dp"]) in overhead.SEED_CLAIMS]
    return "\n\n".join([
        "# Bucketed gradient synchronization: conformance and layout report",
        f"Generated {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())} on "
        f"{platform.node() or 'unknown host'} ({platform.machine()}, Python {platform.python_version()}).",
        "## Conformance",
        conformance_markdown(results),
        "## Step time: reference vs torch DDP (alternating rounds, one run)",
        step_time_markdown(step_time),
        "## Planner speed (no tensor storage allocated)",
        tabulate(planning, headers="keys", tablefmt="github", floatfmt=".3f"),
        "## Padding overhead: the seed's table recomputed",
        "Bucket size 40,000,000 elements; padding counts every element that is not a parameter "
        "(64-element start gaps and bucket-end padding). The seed's figures are claims without a "
        "derivation (docs/errata.md).",
        overhead.render_markdown(seed_rows),
        "## Padding overhead: all models, dp and policies",
        overhead.render_markdown(overhead_rows),
    ]) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports", description=__doc__)
    parser.add_argument("--impl", action="append", help=f"repeatable (default: {', '.join(DEFAULT_IMPLS)})")
    parser.add_argument("--suite", action="append", help=f"repeatable (default: {', '.join(DEFAULT_SUITES)})")
    parser.add_argument("--out", type=Path, default=DEFAULT_ROOT, help="directory holding the runs")
    parser.add_argument("--pytest-arg", action="append", default=[], help="passed on to each suite run")
    parser.add_argument("--rounds", type=int, default=40, help="step-time rounds (default 40)")
    args = parser.parse_args(argv)
    results = []
    for suite in args.suite or DEFAULT_SUITES:
        for impl in args.impl or DEFAULT_IMPLS:
            progress(f"running {suite} against {impl}")
            result = run_suite(suite, impl, args.pytest_arg)
            progress(f"  {impl}: {result.passed} passed, {result.failed + result.errors} failed, "
                     f"{result.skipped} skipped in {result.seconds:.1f}s")
            results.append(result)
    progress("planning padding overhead for the model catalog")
    rows = overhead.overhead_table()
    progress("benchmarking the planner on real models")
    planning = run_benchmarks("benchmarks/test_planning.py")
    progress("timing reference vs torch DDP steps (2 gloo ranks)")
    step_time = measure_step_time(rounds=args.rounds)
    report = build_report(results, rows, planning, step_time)
    run = write_run({
        "report.md": report,
        "results.json": dump_json({
            "conformance": [asdict(r) for r in results], "overhead": rows, "planning": planning,
            "step_time": step_time,
        }),
    }, root=args.out)
    print(report)
    progress(f"wrote {run}/report.md")
    return 0 if all(r.ok for r in results) else 1
