"""PNG plots of a report run: bus bandwidth, overlap, timelines, bucket size, and the shared drawing helpers.

Drawn on matplotlib's Agg canvas directly (no pyplot, no display, no global
backend switch), into a directory the caller later renames into place.
Figures are drawn at their median with the 95% interval of the median as an
error bar or band.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as Canvas
from matplotlib.ticker import FuncFormatter, LogLocator

from benchmarks.tuner.records import BucketSizeRecord
from benchmarks.busbw import BusbwRecord
from benchmarks.overlap import OverlapRecord
from benchmarks.stats import Figure

from .table import bytes_label

OVERLAP_BARS = (("compute_ms", "compute only"), ("overlap_ms", "compute + comm, overlapped"),
                ("serial_ms", "compute + comm, serial"))


def new_figure(width: float = 8.0, height: float = 5.0) -> Canvas:
    fig = Canvas(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def save(fig: Canvas, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, format="png", bbox_inches="tight")
    return path


def file_safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(name))


def _median_and_error(figure: Figure | None) -> tuple[float, list[float]]:
    """The median and its (below, above) distance to the interval's ends (0 when there is none)."""
    if figure is None:
        return math.nan, [0.0, 0.0]
    interval = figure.bounds
    return figure.median, [figure.median - interval[0], interval[1] - figure.median]


def _title(subject: str, records: Sequence) -> str:
    worlds = sorted({r.world_size for r in records})
    backends = sorted({getattr(r, "backend", "") for r in records} - {""})
    return ", ".join([subject] + [f"world size {'/'.join(map(str, worlds))}"] * bool(worlds)
                     + ["/".join(backends)] * bool(backends))


def _plot_collective(collective: str, records: list[BusbwRecord], path: Path) -> Path:
    """Effective busbw (the payload's) over the bucket's size before padding; raw busbw dashed and faint.
    At one rank, where busbw is undefined, algbw."""
    fig = new_figure()
    ax = fig.add_subplot()
    bus = records[0].busbw_gbps is not None
    shown = (lambda r: r.effective_busbw_gbps) if bus else (lambda r: r.algbw_gbps)
    lines: dict[tuple[str, str], list[BusbwRecord]] = defaultdict(list)
    for r in records:
        lines[(r.policy, r.placement)].append(r)
    for (policy, placement), rows in sorted(lines.items()):
        rows.sort(key=lambda r: r.requested_count)
        xs = [r.requested_bytes for r in rows]
        medians, errors = zip(*(_median_and_error(shown(r)) for r in rows))
        drawn = ax.errorbar(xs, medians, yerr=list(zip(*errors)), marker="o", capsize=3,
                            label=f"{policy}, {placement}")
        if bus and policy != "unpadded":
            raw = [_median_and_error(r.busbw_gbps)[0] for r in rows]
            ax.plot(xs, raw, linestyle="--", alpha=0.35, color=drawn.lines[0].get_color())
    wrong = [r for r in records if r.wrong]
    if wrong:  # a fast wrong answer is not a result: mark it where it would be read
        ax.scatter([r.requested_bytes for r in wrong], [_median_and_error(shown(r))[0] for r in wrong],
                   marker="x", s=80, color="red", zorder=3, label="wrong results")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=2))
    ax.xaxis.set_major_formatter(FuncFormatter(bytes_label))
    ax.set_xlabel("bucket size before padding (log2)")
    ax.set_ylabel("effective bus bandwidth (GB/s): the bucket's own bytes" if bus else
                  "algorithm bandwidth (GB/s): one rank, no bus traffic")
    ax.set_ylim(bottom=0)
    ax.set_title(_title(f"{collective}: what padding buys the payload (dashed: raw busbw)" if bus else
                        f"{collective}: one rank, algbw", records))
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small")
    return save(fig, path)


def plot_busbw(records: Sequence[BusbwRecord], out) -> list[Path]:
    """One PNG per collective (``busbw_<collective>.png`` in directory ``out``); none for no records."""
    by_collective: dict[str, list[BusbwRecord]] = defaultdict(list)
    for r in records:
        by_collective[r.collective].append(r)
    return [_plot_collective(name, rows, Path(out) / f"busbw_{file_safe(name)}.png")
            for name, rows in sorted(by_collective.items())]


def plot_overlap(records: Sequence[OverlapRecord], out) -> Path | None:
    """Grouped bars per (mode, implementation) with intervals and the efficiency (``overlap.png``)."""
    if not records:
        return None
    fig = new_figure(max(6.0, 1.6 * len(records) + 2), 5.0)
    ax = fig.add_subplot()
    width = 0.8 / len(OVERLAP_BARS)
    for i, (field, label) in enumerate(OVERLAP_BARS):
        medians, errors = zip(*(_median_and_error(getattr(r, field)) for r in records))
        ax.bar([g + (i - 1) * width for g in range(len(records))], medians, width,
               yerr=list(zip(*errors)), capsize=3, label=label)
    for g, r in enumerate(records):
        efficiency, _ = _median_and_error(r.efficiency)
        top = max(_median_and_error(getattr(r, f))[0] for f, _ in OVERLAP_BARS)
        text = "efficiency n/a" if math.isnan(efficiency) else f"eff. {efficiency:.2f}\n(ideal {r.ideal:.2f})"
        ax.annotate(text, (g, top), xytext=(0, 4), textcoords="offset points", ha="center", va="bottom",
                    fontsize="small")
    ax.set_xticks(range(len(records)), [f"{r.impl}\n{r.mode}" for r in records])
    ax.set_ylabel("step time (ms)")
    ax.set_title(_title("backward with gradient sync: overlap", records))
    ax.margins(y=0.2)
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=len(OVERLAP_BARS))
    return save(fig, Path(out) / "overlap.png")


def plot_timeline(record: OverlapRecord, out) -> Path:
    """One overlapped step, Holistic Trace Analysis style: backward spans per layer above, collectives below."""
    timeline = record.timeline
    fig = new_figure(10.0, 3.2)
    ax = fig.add_subplot()
    for span in timeline.layers:
        end = span.end_ms if span.end_ms is not None else timeline.backward_end_ms
        ax.broken_barh([(span.start_ms, end - span.start_ms)], (1.1, 0.8), color="tab:blue", alpha=0.8)
        ax.text((span.start_ms + end) / 2, 1.5, f"L{span.layer}", ha="center", va="center",
                fontsize="x-small", color="white")
    for span in timeline.collectives:
        known = span.end_ms is not None
        end = span.end_ms if known else span.start_ms + 0.2
        ax.broken_barh([(span.start_ms, end - span.start_ms)], (0.1, 0.8),
                       color="tab:orange" if known else "tab:gray", alpha=0.8)
    ax.axvline(timeline.backward_end_ms, color="black", linestyle=":", label="backward returns")
    ax.axvline(timeline.step_end_ms, color="red", linestyle="--", label="gradient sync done")
    ax.set_yticks([0.5, 1.5], ["collectives\n(launch to done)", "backward\nper layer"])
    ax.set_xlabel("ms since the step began")
    ax.set_title(f"{record.impl}: one overlapped step, {record.mode} compute\n"
                 "communication under a backward span is hidden; past the dotted line it is exposed",
                 fontsize="medium")
    ax.legend(fontsize="small", loc="upper right")
    ax.grid(True, axis="x", alpha=0.3)
    return save(fig, Path(out) / f"timeline_{file_safe(record.impl)}.png")


def plot_bucket_size(record: BucketSizeRecord, out) -> Path:
    """Predicted exposed time (step - compute) over bucket size, the measured sizes with their intervals, the
    recommendation and its 5% range marked (``bucket_size.png``)."""
    at = record.bucket_bytes
    predicted: dict[int, float] = {}
    for p in record.predictions:
        predicted.setdefault(at(p.bucket_size), p.exposed_ms)
    fig = new_figure()
    ax = fig.add_subplot()
    xs = sorted(predicted)
    ax.plot(xs, [predicted[x] for x in xs], marker=".", label="predicted exposed (step - compute)")
    compute = record.inputs.compute_ms.median
    for check in record.verification.checks:
        shown = Figure.of([m - compute for m in check.measured_ms.samples], "ms", "lower")
        median, error = _median_and_error(shown)
        ax.errorbar([at(check.bucket_size)], [median], yerr=[[error[0]], [error[1]]], marker="o", capsize=4,
                    linestyle="none", color="tab:red", label=None)
        ax.annotate(check.role, (at(check.bucket_size), median), xytext=(4, 6), textcoords="offset points",
                    fontsize="small")
    ax.plot([], [], marker="o", linestyle="none", color="tab:red",
            label="measured step - compute [95% interval]")
    rec = record.recommendation
    ax.axvspan(at(rec.low), at(rec.high), alpha=0.15, color="tab:green",
               label=f"within {rec.tolerance:.0%} of the smallest")
    ax.axvline(at(rec.bucket_size), color="tab:green", linestyle="--", label="recommended")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=2))
    ax.xaxis.set_major_formatter(FuncFormatter(bytes_label))
    ax.set_xlabel("bucket size (log2; one bucket at the model's size)")
    ax.set_ylabel("exposed time (ms): what the gradient sync adds to the backward")
    ax.set_ylim(bottom=0)
    verdict = "verified" if record.verification.verified else "UNVERIFIED"
    ax.set_title(_title(f"bucket size: predicted against measured ({verdict})", [record]))
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small")
    return save(fig, Path(out) / "bucket_size.png")
