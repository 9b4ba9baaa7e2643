"""The history the site draws: every gated metric of every setup over the kept runs of that setup, one slot
per run, a point where the run measured it and a gap, with why, where it did not.

The series and their steps are the trend's (``reports.comparison.series``: one
series per setup and metric, its change points and its first step); smoke runs are never
drawn, their timings meaning nothing. Each slot carries what its hover says:
the gate's threshold and decision that night, and the commit and environment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from ..comparison.changes import DEFAULT_ABSOLUTE_THRESHOLD, DEFAULT_THRESHOLD
from ..comparison.series import by_setup, setup_trend, shifts
from ..store.model import LevelShift, Point, Results, Series, Setup
from .environment import one_line
from .refusals import refused_keys


@dataclass(frozen=True)
class Slot:
    run: str
    point: Point | None
    """None: a gap, and ``missing`` says why."""
    missing: str
    status: str
    """The gate's decision on the metric that night against the run before (regression, improvement,
    unchanged, added), or '' when it made none."""
    threshold: float | None
    """The gate's threshold for the metric that night: relative, or absolute (``Series.absolute``); 0 for
    counts, where any move in the bad direction counts."""
    environment: str


@dataclass(frozen=True)
class History:
    series: Series
    slots: tuple[Slot, ...]
    exact: bool
    """A count: any move in the bad direction counts, so it has no interval and no band."""
    change_points: tuple[LevelShift, ...] | None = ()
    """Every change of level over the whole history, small ones too (the series' step is the first beyond the
    threshold); None where no detector is installed."""


@dataclass(frozen=True)
class SetupHistory:
    setup: Setup
    runs: tuple[str, ...]
    figures: tuple[History, ...]
    counts: tuple[History, ...]


def threshold(results: Results, key: str, absolute: bool) -> float | None:
    metric = results.metrics.get(key)
    if metric is None:
        return None
    if metric.exact:
        return 0.0
    if metric.threshold is not None:
        return metric.threshold
    if absolute:
        return DEFAULT_ABSOLUTE_THRESHOLD
    return results.comparison.threshold if results.comparison else DEFAULT_THRESHOLD


def status(results: Results, key: str) -> str:
    comparison = results.comparison
    if comparison is None or comparison.error is not None or comparison.against is None:
        return ""
    return next((c.status for c in comparison.changes if c.key == key), "")


class _Refusals:
    """Each run's refused keys, found once and only for runs with a gap."""

    def __init__(self) -> None:
        self.found: dict[str, dict] = {}

    def why(self, results: Results, key: str) -> str:
        name = results.run.name
        if name not in self.found:
            self.found[name] = refused_keys(results)
        refusal = self.found[name].get(key)
        return f"refused: {refusal}" if refusal else "not measured in this run"


def history(series: Series, group: Sequence[Results], refusals: _Refusals) -> History:
    by_run = {p.run: p for p in series.points}
    slots = []
    for results in group:
        name = results.run.name
        point = by_run.get(name)
        missing = ""
        if point is not None and not math.isfinite(point.value):
            point, missing = None, f"no finite value ({point.value}): a lost measurement"
        elif point is None:
            missing = refusals.why(results, series.key)
        slots.append(Slot(name, point, missing, status(results, series.key),
                          threshold(results, series.key, series.absolute), one_line(results)))
    exact = any(r.metrics[series.key].exact for r in group if series.key in r.metrics)
    return History(series, tuple(slots), exact, shifts(series.points, series.better, series.absolute))


def histories(runs: Sequence[Results]) -> list[SetupHistory]:
    """One history per setup of the runs that are not smoke runs, in order of each setup's first run."""
    refusals = _Refusals()
    made = []
    for setup, group in by_setup([r for r in runs if not r.run.setup.smoke]).items():
        found = [history(series, group, refusals) for series in setup_trend(group)]
        made.append(SetupHistory(setup, tuple(r.run.name for r in group),
                                 tuple(h for h in found if not h.exact), tuple(h for h in found if h.exact)))
    return made
