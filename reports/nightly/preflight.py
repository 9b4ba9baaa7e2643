"""Everything the main job can check before it starts, each problem one line naming the value and what is valid.

A bad value found after 5 to 16 minutes of benchmarks costs the run: so the
implementations are resolved, the suites and benchmarks looked up, the
thresholds, rounds and world size bounded, and the runs root tried for
writing before any rank starts.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks import BENCHMARKS
from benchmarks.suite import launches_problem
from ranks.capacity import world_size_problem

from ..comparison.changes import check_thresholds
from ..store.runs import Runs, StoreError

DEFAULT_SUITES = ("suites/layout", "suites/multigpu")
ROOT = Path(__file__).resolve().parents[2]


def preflight(args) -> str | None:
    """The first problem with the main job's arguments, or None."""
    for check in (_numbers, _benchmarks, _suites, _impls, _out):
        problem = check(args)
        if problem:
            return problem
    return None


def _numbers(args) -> str | None:
    try:
        check_thresholds(args.threshold)
    except ValueError as exc:
        return f"--{exc}"
    problem = launches_problem(args.launches)
    if problem:
        return f"--{problem}"
    return world_size_problem(args.world_size, args.allow_world_size, "--allow-world-size")


def _benchmarks(args) -> str | None:
    known = [b.name for b in BENCHMARKS]
    unknown = [b for b in args.benchmark or () if b not in known]
    return f"--benchmark: got {', '.join(unknown)}, but should be among {', '.join(known)}" if unknown else None


def _suites(args) -> str | None:
    for suite in args.suite or ():
        path = Path(suite.split("::")[0])
        if not (path if path.is_absolute() else ROOT / path).exists():
            return (f"--suite: got {suite!r}, which does not exist, but should be a suite path such as "
                    f"{' or '.join(DEFAULT_SUITES)} (or a file or folder under them)")
    return None


def _impls(args) -> str | None:
    from suites.impls import load_implementation

    both = sorted(set(args.impl or ()) & set(args.peer or ()))
    if both:
        return (f"--peer: got {', '.join(both)}, which --impl names too, but should name only implementations the "
                "verdict does not cover (--impl: those whose failures fail it)")
    for spec in [*(args.impl or ()), *(args.peer or ())]:
        try:
            load_implementation(spec)
        except ValueError as exc:
            return str(exc)
    return None


def _out(args) -> str | None:
    try:
        Runs(args.out).check()
    except StoreError as exc:
        return str(exc)
    return None
