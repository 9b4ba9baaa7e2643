"""Trends over nights: every gated metric across runs, and the first run at which it moved.

One series per gated metric and setup; rendered by ``reports.render.trend``
(a table per setup, a PNG per metric: the medians as a line, the 95%
interval of the median as a band) and drawn by the site.

Step detection is asv's (``asv.step_detect.detect_steps``; without asv
installed the series come without steps, and say so): it fits the series of
per-run medians with a piecewise-constant function, choosing the number of
steps itself. A step *moved* the figure when the levels on either side
differ by more than the comparison's practical threshold (10%, or 0.05
absolute for efficiencies); the first such step names its run.

The gated metrics are those any run of a setup gates (figures and counts),
so a metric that a later run gates is traced back through the runs that
measured it before.
Runs of different setups are never one series: each setup gets its own, so a
change of hardware is not read as a step.
"""

from __future__ import annotations

import math
from typing import Sequence

from ..store.model import LevelShift, Point, Results, Series, Setup
from .changes import DEFAULT_ABSOLUTE_THRESHOLD, DEFAULT_THRESHOLD


def step_detection():
    """asv's ``detect_steps``, or None where asv is not installed (a GPU image may lack it)."""
    try:
        from asv.step_detect import detect_steps
    except ImportError:
        return None
    return detect_steps


def first_step(points: Sequence[Point], better: str, absolute: bool, threshold: float = DEFAULT_THRESHOLD,
               absolute_threshold: float = DEFAULT_ABSOLUTE_THRESHOLD) -> LevelShift | None:
    """The first step of the medians beyond the threshold, or None."""
    values = [p.value for p in points]
    detect_steps = step_detection()
    if detect_steps is None or len(values) < 2 or not all(math.isfinite(v) for v in values):
        return None
    levels = detect_steps(values, _weights(points))
    for (_, _, before, *_), (left, _, after, *_) in zip(levels, levels[1:]):
        change = after - before if absolute else ((after - before) / abs(before) if before else math.inf)
        if abs(change) > (absolute_threshold if absolute else threshold):
            gain = change if better == "higher" else -change
            return LevelShift(points[left].run, "improvement" if gain > 0 else "regression", float(change))
    return None


def _weights(points: Sequence[Point]) -> list[float] | None:
    """Tighter intervals weigh more; a run without one gets asv's median weight."""
    if not any(p.interval for p in points):
        return None
    return [1 / max(p.interval[1] - p.interval[0], 1e-12) ** 2 if p.interval else math.nan for p in points]


def gated_keys(runs: Sequence[Results]) -> list[str]:
    """The metrics any of the runs gates, or holds under a gate rule (gated but for a missed sampling target), that
    are a figure or a count: a bare value (what runs wrote before figures kept their samples) draws no series of
    its own, but joins the series a later run's figure starts."""
    return sorted({k for r in runs for k, m in r.metrics.items()
                   if (m.gated or m.sampling) and (m.figure is not None or m.exact)})


def series(runs: Sequence[Results], key: str, setup: str) -> Series:
    """The metric across the runs that have it, oldest first."""
    points, unit, better, absolute = [], "", "higher", False
    for results in runs:
        metric = results.metrics.get(key)
        if metric is None:
            continue
        unit, better = metric.unit, metric.better
        interval = None
        if metric.figure is not None:
            interval, absolute = metric.figure.interval, metric.figure.spread_kind == "absolute"
        points.append(Point(results.run.name, metric.value, interval))
    return Series(key, unit, better, absolute, setup, tuple(points), first_step(points, better, absolute))


def by_setup(runs: Sequence[Results]) -> dict[Setup, list[Results]]:
    """The runs grouped by setup, each group oldest first, groups in order of their first run."""
    groups: dict[Setup, list[Results]] = {}
    for results in runs:
        groups.setdefault(results.run.setup, []).append(results)
    return groups


def setup_trend(group: Sequence[Results]) -> list[Series]:
    """Every gated metric of the runs of one setup, one series each."""
    label = group[0].run.setup.label() if group else ""
    return [series(group, key, label) for key in gated_keys(group)]


def trend(runs: Sequence[Results], last: int | None = None) -> list[Series]:
    """Every gated metric of every setup, one series per (setup, metric), over each setup's ``last`` runs."""
    return [s for group in by_setup(runs).values() for s in setup_trend(group[-last:] if last else group)]
