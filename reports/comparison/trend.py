"""Trends over nights: every gated metric across every readable run, and the first run at which it moved.

One series per gated metric and setup, over every readable run; rendered by
``reports.render.trend`` (a table per setup, a PNG per metric: the medians as
a line, the 95% interval of the median as a band).

Step detection is asv's (``asv.step_detect.detect_steps``; without asv
installed the tables and plots come without it, and say so): it fits the
series of per-run medians with a piecewise-constant function, choosing the
number of steps itself. A step *moved* the figure when the levels on either
side differ by more than the comparison's practical threshold (10%, or 0.05
absolute for efficiencies); the first such step names its run.

Gated metrics are those a run of schema 2 or later marks ``gated``; runs
written before schema 2 mark none, and contribute their values to the
metrics the newer runs gate.

Runs of different setups (``reports.comparable``: backend, world size,
launch mode, nodes, devices) are never one series: each setup gets its own
series, table and plots, so a change of hardware is not read as a step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from benchmarks.stats import Figure

from .changes import DEFAULT_ABSOLUTE_THRESHOLD, DEFAULT_THRESHOLD
from .comparable import setup_label, setup_of


@dataclass(frozen=True)
class Point:
    run: str
    value: float
    interval: tuple[float, float] | None


@dataclass(frozen=True)
class Series:
    key: str
    unit: str
    better: str
    absolute: bool
    points: tuple[Point, ...]
    setup: str = ""
    """The setup every run of the series shares (``reports.comparable.setup_label``)."""

    def step(self, threshold: float = DEFAULT_THRESHOLD,
             absolute_threshold: float = DEFAULT_ABSOLUTE_THRESHOLD) -> tuple[str, str, float] | None:
        """(run, "regression" or "improvement", change) of the first step beyond the threshold, or None."""
        values = [p.value for p in self.points]
        detect_steps = step_detection()
        if detect_steps is None or len(values) < 2 or not all(math.isfinite(v) for v in values):
            return None
        levels = detect_steps(values, self._weights())
        for (_, _, before, *_), (left, _, after, *_) in zip(levels, levels[1:]):
            change = after - before if self.absolute else ((after - before) / abs(before) if before else math.inf)
            limit = absolute_threshold if self.absolute else threshold
            if abs(change) > limit:
                gain = change if self.better == "higher" else -change
                return self.points[left].run, "improvement" if gain > 0 else "regression", change
        return None

    def _weights(self) -> list[float] | None:
        """Tighter intervals weigh more; a run without one gets asv's median weight."""
        if not any(p.interval for p in self.points):
            return None
        return [1 / max(p.interval[1] - p.interval[0], 1e-12) ** 2 if p.interval else math.nan
                for p in self.points]


def step_detection():
    """asv's ``detect_steps``, or None where asv is not installed (a GPU image may lack it)."""
    try:
        from asv.step_detect import detect_steps
    except ImportError:
        return None
    return detect_steps


def gated_keys(runs: Sequence[tuple[str, dict]]) -> list[str]:
    keys = {k for _, data in runs if (data.get("schema") or 1) >= 2
            for k, m in data["metrics"].items() if m.get("gated")}
    return sorted(keys)


def series(runs: Sequence[tuple[str, dict]], key: str, setup: str = "") -> Series:
    """The metric across the runs that have it, oldest first."""
    points, unit, better, absolute = [], "", "higher", False
    for name, data in runs:
        metric = data["metrics"].get(key)
        if not isinstance(metric, dict) or not isinstance(metric.get("value"), (int, float)):
            continue
        unit, better = metric.get("unit", unit), metric.get("better", better)
        interval = None
        if isinstance(metric.get("figure"), dict):
            figure = Figure.from_json(metric["figure"])
            interval, absolute = figure.interval, figure.spread_kind == "absolute"
        points.append(Point(name, float(metric["value"]), interval))
    return Series(key, unit, better, absolute, tuple(points), setup)


def by_setup(runs: Sequence[tuple[str, dict]]) -> dict[str, list[tuple[str, dict]]]:
    """The runs grouped by setup, each group oldest first, groups in order of their first run."""
    groups: dict[str, list[tuple[str, dict]]] = {}
    for name, data in runs:
        groups.setdefault(setup_label(setup_of(data)), []).append((name, data))
    return groups


def trend(runs: Sequence[tuple[str, dict]]) -> list[Series]:
    """Every gated metric of every setup, one series per (setup, metric)."""
    return [series(group, key, setup) for setup, group in by_setup(runs).items() for key in gated_keys(group)]
