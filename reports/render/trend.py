"""The trend as markdown (a table per setup: median [interval] per run, and the step) and PNGs (one per metric)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

from ..store.model import Point, Series
from .plots import new_figure, save
from .table import table

PLOT_PREFIX = "trend_"
"""The trend's PNGs are named ``trend_<setup>_<metric>.png`` (the site leaves them out: it draws the history
itself)."""


def _cell(point: Point | None) -> str:
    if point is None:
        return ""
    text = f"{point.value:.4g}"
    return text + (f" [{point.interval[0]:.4g}, {point.interval[1]:.4g}]" if point.interval else "")


def trend_markdown(all_series: Sequence[Series]) -> str:
    runs = sorted({p.run for s in all_series for p in s.points})
    if not all_series:
        return "No gated metric in the runs of this setup."
    setups = list(dict.fromkeys(s.setup for s in all_series))
    text = (f"{len(runs)} run(s), {runs[0]} to {runs[-1]}, of {len(setups)} setup(s), each its own series; each "
            "cell is the median [95% interval]. A step is the first run at which a change point (ruptures' binary "
            "segmentation over the whole series) puts a level change beyond the threshold (none is found where "
            "ruptures is not installed).")
    for setup in setups:
        group = [s for s in all_series if s.setup == setup]
        names = sorted({p.run for s in group for p in s.points})
        rows = []
        for s in group:
            by_run = {p.run: p for p in s.points}
            moved = (f"{s.step.direction} at {s.step.run} ({s.step.change:+.3g}{'' if s.absolute else ' rel.'})"
                     if s.step else "none")
            rows.append({"metric": s.key, "unit": s.unit, "better": s.better, "step": moved,
                         **{run: _cell(by_run.get(run)) for run in names}})
        text += f"\n\n### {setup or 'unknown setup'}\n\n" + table(rows, numparse=False)
    return text


def plot_trend(all_series: Sequence[Series], out_dir) -> list[Path]:
    """One PNG per sampled metric: medians over runs with the interval band and the step, if any."""
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
        if s.step:
            at = [p.run for p in s.points].index(s.step.run)
            ax.axvline(at - 0.5, color="red", linestyle="--", label=f"{s.step.direction} at {s.step.run}")
        ax.set_xticks(xs, [p.run for p in s.points], rotation=45, ha="right", fontsize="small")
        ax.set_ylabel(s.unit or "value")
        ax.set_title(f"{s.key} ({s.better} is better)\n{s.setup}", fontsize="medium")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
        setup = setups.index(s.setup)
        name = f"{PLOT_PREFIX}{setup}_{re.sub(r'[^A-Za-z0-9_.-]+', '_', s.key)}.png"
        written.append(save(fig, Path(out_dir) / name))
    return written
