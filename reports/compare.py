"""Compare a report run with an earlier one: ``python -m reports.compare``.

``python -m reports.compare`` compares ``latest`` with the newest earlier run
of the same setup (``reports.comparison.comparable``: backend, world size, launch mode,
nodes, devices); ``python -m reports.compare OLD NEW`` compares two runs
(names under ``--root`` or directories), and gates nothing when their setups
differ. With ``--fail-on-regression`` the exit code is 1
when a gated metric regressed; informative regressions are reported only.

What counts as a change: ``reports.comparison.changes``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from cli import KeyNumber, Parser, Real

from .store.arguments import RunsRoot
from .comparison.changes import ALPHA, DEFAULT_THRESHOLD, check_thresholds, compare
from .comparison.comparable import previous_comparable, why_not_comparable
from .render.comparison import comparison_markdown
from .store.model import Results
from .store.runs import RunError, Runs, load_results


def _resolve(arg: str, runs: Runs) -> Path:
    """A run is named either by its directory or by its name under the root."""
    path = Path(arg)
    return path if path.is_dir() else runs.root / arg


def pick_runs(old: str | None, new: str | None, runs: Runs) -> tuple[Results, Results, list[str]]:
    """No argument: latest and the newest earlier run of its setup; one: that run against latest; two: those
    runs. Also a line for each run passed over because its setup differs."""
    new_dir = _resolve(new, runs) if new else runs.latest()
    newer = load_results(new_dir)
    if old:
        return load_results(_resolve(old, runs)), newer, []
    before, passed = previous_comparable(Runs(new_dir.parent), newer)
    if before is None:
        raise RunError(f"got no earlier run of the same setup as {new_dir.name} in {new_dir.parent}, but should "
                       f"be at least two runs to compare" + "".join(f"\n  passed over {p}" for p in passed))
    return before, newer, passed


def parser() -> Parser:
    p = Parser(prog="python -m reports.compare", description=__doc__)
    p.add_argument("old", nargs="?", help="earlier run: name under --root or a directory")
    p.add_argument("new", nargs="?", help="later run (default: latest)")
    p.add_argument("--root", type=RunsRoot(), default=Runs(), help="directory holding the runs")
    p.add_argument("--threshold", type=Real(above=0, maximum=1, unit="a fraction"), default=DEFAULT_THRESHOLD,
                   help="relative change that counts (default 0.1 = 10%%)")
    p.add_argument("--alpha", type=Real(above=0, maximum=1, unit="a probability"), default=ALPHA,
                   help="false discovery rate of the significance test (default 0.05)")
    p.add_argument("--prefix-threshold", type=KeyNumber("PREFIX=FRACTION, e.g. busbw=0.15", split_at_last=True,
                                                        maximum=1), action="append", default=[],
                   metavar="PREFIX=FRACTION", help="repeatable; longest matching prefix wins")
    p.add_argument("--gate", action="append", default=[], metavar="PREFIX",
                   help="repeatable: gate the informative metrics whose key starts with PREFIX too, e.g. "
                        "busbw_largest/ on a dedicated GPU node")
    p.add_argument("--fail-on-regression", action="store_true", help="exit 1 when a gated metric regressed")
    return p


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser_ = parser()
    args = parser_.parse_args(argv)
    try:
        check_thresholds(args.threshold, dict(args.prefix_threshold), args.alpha)
    except ValueError as exc:
        parser_.error(str(exc))
    try:
        args.runs = pick_runs(args.old, args.new, args.root)
    except ValueError as exc:
        parser_.error(f"runs: {exc}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 when fine (or the runs are not comparable: nothing is gated), 1 on a gated regression with
    --fail-on-regression, 2 when a run cannot be read (naming the run and the field)."""
    args = parse_args(argv)
    try:
        old, new, passed = args.runs
        old_name, new_name = old.run.name, new.run.name
        why = why_not_comparable(old, new)
        comparison = None if why else compare(old_name, old.metrics, new.metrics, passed, args.threshold,
                                              dict(args.prefix_threshold), args.alpha, args.gate)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for line in passed:
        print(f"Passed over {line}")
    if why:
        print(f"{new_name} is not comparable with {old_name}: {why}. Nothing is gated.")
        return 0
    print(f"Comparing {new_name} with {old_name}\n")
    print(comparison_markdown(comparison.changes, args.threshold, args.alpha), end="")
    return 1 if args.fail_on_regression and comparison.regressions else 0


if __name__ == "__main__":
    raise SystemExit(main())
