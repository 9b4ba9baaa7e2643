"""Trends over nights: every gated metric across runs, and the first run at which it moved.

One series per gated metric and setup; rendered by ``reports.render.trend``
(a table per setup, a PNG per metric: the medians as a line, the 95%
interval of the median as a band) and drawn by the site.

Change points are found over the whole series by ruptures' binary
segmentation (``ruptures.Binseg``, least-squares cost, the BIC penalty
2 sigma^2 ln n, sigma the noise of a night: the larger of the spread of the
nights' differences, robustly, and the median night's own interval of the
median),
chosen over asv's step detection and three others by measurement
(docs/measurements/gate.md, "the trend's change-point detectors": planted steps of 1 to 10% on the real
noise of this project's runs). Without ruptures installed the series come
without change points, and say so. A change point *moved* the figure when
the levels on either side differ by more than the comparison's practical
threshold (10%, or 0.05 absolute for efficiencies); the first such one is
the series' step and names its run.

The gated metrics are those any run of a setup gates (figures and counts),
so a metric that a later run gates is traced back through the runs that
measured it before.
Runs of different setups are never one series: each setup gets its own, so a
change of hardware is not read as a step.
"""

from __future__ import annotations

import math
import statistics
from typing import Sequence

from ..store.model import LevelShift, Point, Results, Series, Setup
from .changes import DEFAULT_ABSOLUTE_THRESHOLD, DEFAULT_THRESHOLD

MIN_SEGMENT = 2
"""The fewest nights a level holds before or after a change point."""


def change_points(points: Sequence[Point]) -> tuple[int, ...] | None:
    """The indices at which a new level begins, over the whole series; None where ruptures is not installed or
    a value is not finite."""
    try:
        import numpy as np
        import ruptures
    except ImportError:
        return None
    values = [p.value for p in points]
    if not all(math.isfinite(v) for v in values):
        return None
    if len(values) < 2 * MIN_SEGMENT:
        return ()
    signal = np.asarray(values, dtype=float)
    sigma = max(_noise(signal), statistics.median(_interval_sigma(p) for p in points))
    if sigma == 0:
        sigma = 1e-12 * max(1.0, float(np.abs(signal).max()))
    found = ruptures.Binseg(model="l2", min_size=MIN_SEGMENT, jump=1).fit(signal).predict(
        pen=2 * sigma * sigma * math.log(len(values)))
    return tuple(found[:-1])


def _noise(signal) -> float:
    """A night's noise from the differences of neighbouring nights (robust to the steps themselves: MAD)."""
    import numpy as np

    diffs = np.diff(signal)
    return float(1.4826 * np.median(np.abs(diffs - np.median(diffs))) / math.sqrt(2)) if len(diffs) else 0.0


def _interval_sigma(point: Point) -> float:
    """The standard error a run's 95% interval of the median stands for (0 without one)."""
    return (point.interval[1] - point.interval[0]) / (2 * 1.96) if point.interval else 0.0


def shifts(points: Sequence[Point], better: str, absolute: bool) -> tuple[LevelShift, ...] | None:
    """Every change point, with the level change across it (median after over median before, each over the
    nights up to the neighbouring change point); None without a detector."""
    found = change_points(points)
    if found is None:
        return None
    values = [p.value for p in points]
    bounds = (0, *found, len(values))
    made = []
    for start, at, end in zip(bounds, bounds[1:], bounds[2:]):
        before, after = statistics.median(values[start:at]), statistics.median(values[at:end])
        change = after - before if absolute else ((after - before) / abs(before) if before else math.inf)
        gain = change if better == "higher" else -change
        made.append(LevelShift(points[at].run, "improvement" if gain > 0 else "regression", float(change)))
    return tuple(made)


def first_step(points: Sequence[Point], better: str, absolute: bool, threshold: float = DEFAULT_THRESHOLD,
               absolute_threshold: float = DEFAULT_ABSOLUTE_THRESHOLD) -> LevelShift | None:
    """The first change point beyond the threshold, or None."""
    limit = absolute_threshold if absolute else threshold
    return next((s for s in shifts(points, better, absolute) or () if abs(s.change) > limit), None)


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
