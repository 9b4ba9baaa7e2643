"""The nightly job's ``--bisect``: when its gate finds a gated regression, which commit between the previous
run's and its own moved the figure. The job adds the answer to the run it has written (``Results.bisection``),
which its report and its page on the site show."""

from __future__ import annotations

from typing import Callable, Sequence

from benchmarks import BENCHMARKS

from ..store.bisection import Bisection
from ..store.model import Results
from ..store.runs import RunError, Runs
from .measure import Measurement, default_command
from .search import TOOL_ROOT, BisectError, bisect


def benchmark_of(results: Results, key: str) -> str | None:
    """The benchmark whose records made the metric ``key`` in this run."""
    for benchmark in BENCHMARKS:
        records = getattr(results.benchmarks, benchmark.name)
        if records and key in benchmark.metrics(records):
            return benchmark.name
    return None


def why_not(results: Results, runs: Runs) -> str | None:
    """Why the run's regression cannot be bisected, or None when it can."""
    comparison = results.comparison
    if comparison is None or not comparison.regressions:
        return "the gate found no gated regression"
    if results.run.revision is None or results.run.dirty:
        return "this run's commit is unknown or its tree had uncommitted changes: no commit reproduces it"
    try:
        previous = runs.load(comparison.against)
    except RunError as exc:
        return f"the previous run cannot be read: {exc}"
    if previous.run.revision is None or previous.run.dirty:
        return f"the previous run {previous.run.name} has no clean commit"
    if previous.run.revision == results.run.revision:
        return "the previous run is of the same commit: the machine moved, not the code"
    if benchmark_of(results, comparison.regressions[0].key) is None:
        return f"no benchmark of this run made {comparison.regressions[0].key}"
    return None


def bisect_regression(results: Results, runs: Runs, impls: Sequence[str],
                      say: Callable[[str], None]) -> Bisection | None:
    """Bisect the first gated regression between the previous run's commit and this one's, at this run's world
    size and with its implementations, at the gate's threshold for the figure. None (and why, said) when it
    cannot be bisected."""
    reason = why_not(results, runs)
    if reason is not None:
        say(f"not bisected: {reason}")
        return None
    regression = results.comparison.regressions[0]
    previous = runs.load(results.comparison.against)
    command = default_command(benchmark_of(results, regression.key), None, results.run.setup.world_size, impls)
    say(f"bisecting {regression.key} between {previous.run.revision[:12]} and {results.run.revision[:12]}")
    try:
        found = bisect(TOOL_ROOT, previous.run.revision, results.run.revision, Measurement(command, regression.key),
                       regression.threshold, budget=4, say=say)
    except BisectError as exc:
        say(f"not bisected: {exc}")
        return None
    return found
