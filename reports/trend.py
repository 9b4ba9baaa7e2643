"""Trends over nights: every gated metric across every readable run, and the first run at which it moved.

``python -m reports.trend`` reads the runs directory (a run that cannot be
read is skipped with a warning naming it), prints a table per gated metric
(median and interval per run) and, with ``--plots DIR``, draws one PNG per
metric: the medians as a line, the 95% interval of the median as a band.

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

import argparse
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from benchmarks.stats import Figure

from .comparable import setup_label, setup_of
from .compare import DEFAULT_ABSOLUTE_THRESHOLD, DEFAULT_THRESHOLD
from .runs import readable_runs
from .writer import DEFAULT_ROOT


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


def _cell(point: Point | None) -> str:
    if point is None:
        return ""
    text = f"{point.value:.4g}"
    return text + (f" [{point.interval[0]:.4g}, {point.interval[1]:.4g}]" if point.interval else "")


def trend_markdown(all_series: Sequence[Series], runs: Sequence[str]) -> str:
    if not runs:
        return "No readable runs."
    if not all_series:
        return (f"{len(runs)} readable run(s), none of them marking gated metrics "
                "(runs written before schema 2 mark none).")
    from .render import table

    setups = list(dict.fromkeys(s.setup for s in all_series))
    text = (f"{len(runs)} run(s), {runs[0]} to {runs[-1]}, of {len(setups)} setup(s), each its own series; each "
            "cell is the median [95% interval]. A step is the first run at which asv's step detection puts a "
            "level change beyond the threshold."
            + ("" if step_detection() else " asv is not installed here: no step detection (pip install asv)."))
    for setup in setups:
        group = [s for s in all_series if s.setup == setup]
        names = sorted({p.run for s in group for p in s.points})
        rows = []
        for s in group:
            by_run = {p.run: p for p in s.points}
            step = s.step()
            moved = f"{step[1]} at {step[0]} ({step[2]:+.3g}{'' if s.absolute else ' rel.'})" if step else "none"
            rows.append({"metric": s.key, "unit": s.unit, "better": s.better, "step": moved,
                         **{run: _cell(by_run.get(run)) for run in names}})
        text += f"\n\n### {setup or 'unknown setup'}\n\n" + table(rows, numparse=False)
    return text


def plot_trend(all_series: Sequence[Series], out_dir) -> list[Path]:
    """One PNG per sampled metric: medians over runs with the interval band and the step, if any."""
    from .plots import new_figure, save

    written = []
    setups = list(dict.fromkeys(s.setup for s in all_series))
    for s in all_series:
        if not any(p.interval for p in s.points):
            continue  # counts and one-sample figures: the table says all there is
        fig = new_figure(max(6.0, 0.6 * len(s.points) + 3), 4.0)
        ax = fig.add_subplot()
        xs = list(range(len(s.points)))
        ax.plot(xs, [p.value for p in s.points], marker="o", label="median")
        banded = [(x, p.interval) for x, p in zip(xs, s.points) if p.interval]
        if banded:
            ax.fill_between([x for x, _ in banded], [i[0] for _, i in banded], [i[1] for _, i in banded],
                            alpha=0.25, label="95% interval of the median")
        step = s.step()
        if step:
            at = [p.run for p in s.points].index(step[0])
            ax.axvline(at - 0.5, color="red", linestyle="--", label=f"{step[1]} at {step[0]}")
        ax.set_xticks(xs, [p.run for p in s.points], rotation=45, ha="right", fontsize="small")
        ax.set_ylabel(s.unit or "value")
        ax.set_title(f"{s.key} ({s.better} is better)\n{s.setup}", fontsize="medium")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
        setup = setups.index(s.setup)
        written.append(save(fig, Path(out_dir) / f"trend_{setup}_{re.sub(r'[^A-Za-z0-9_.-]+', '_', s.key)}.png"))
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports.trend", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="directory holding the runs")
    parser.add_argument("--plots", type=Path, help="write one PNG per gated metric into this directory")
    args = parser.parse_args(argv)
    runs = readable_runs(args.root)
    all_series = trend(runs)
    print(trend_markdown(all_series, [name for name, _ in runs]))
    if args.plots:
        for path in plot_trend(all_series, args.plots):
            print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
