"""PNG plots of a report run: bus bandwidth per collective and backward/communication overlap.

Drawn on matplotlib's Agg canvas directly (no pyplot, no display, no global
backend switch), into a directory the caller later renames into place.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Iterable

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator

OVERLAP_BARS = (("compute_ms", "compute"), ("overlap_ms", "compute + comm, overlapped"),
                ("serial_ms", "compute + comm, serial"))
BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def new_figure(width: float = 8.0, height: float = 5.0) -> Figure:
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, format="png", bbox_inches="tight")
    return path


def size_label(size_bytes: float, _pos=None) -> str:
    """Powers of two read better as 1 MiB than as 1048576."""
    value, unit = float(size_bytes), 0
    while value >= 1024 and unit < len(BINARY_UNITS) - 1:
        value, unit = value / 1024, unit + 1
    return f"{value:g} {BINARY_UNITS[unit]}"


def _distinct(records: Iterable[dict], field: str) -> list:
    return sorted({r[field] for r in records if r.get(field) is not None}, key=str)


def _title(subject: str, records: list[dict]) -> str:
    parts = [subject]
    world = _distinct(records, "world_size")
    if world:
        parts.append("world size " + "/".join(map(str, world)))
    backend = _distinct(records, "backend")
    if backend:
        parts.append("/".join(backend))
    return ", ".join(parts)


def _series(records: list[dict]) -> dict[str, list[dict]]:
    """One line per (policy, placement); world size joins the label only when runs mixed several."""
    several_worlds = len(_distinct(records, "world_size")) > 1
    lines: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        label = f"{r.get('policy', '?')}, {r.get('placement', '?')}"
        if several_worlds:
            label += f", world {r.get('world_size')}"
        lines[label].append(r)
    return {label: sorted(rows, key=bucket_bytes) for label, rows in sorted(lines.items())}


def bucket_bytes(record: dict) -> int:
    """The bucket's size before padding, so every policy is plotted at the same x."""
    if "requested_count" in record:
        return record["requested_count"] * record["size_bytes"] // record["count"]
    return record["size_bytes"]


def _plot_collective(collective: str, records: list[dict], path: Path) -> Path:
    fig = new_figure()
    ax = fig.add_subplot()
    for label, rows in _series(records).items():
        ax.plot([bucket_bytes(r) for r in rows], [r["busbw_gbps"] for r in rows], marker="o", label=label)
    wrong = [r for r in records if r.get("wrong")]
    if wrong:  # a fast wrong answer is not a result: mark it where it would be read
        ax.scatter([bucket_bytes(r) for r in wrong], [r["busbw_gbps"] for r in wrong],
                   marker="x", s=80, color="red", zorder=3, label="wrong results")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=2))
    ax.xaxis.set_major_formatter(FuncFormatter(size_label))
    ax.set_xlabel("bucket size before padding (bytes, log2)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_ylim(bottom=0)
    ax.set_title(_title(f"{collective}: bus bandwidth", records))
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small")
    return save(fig, path)


def plot_busbw(busbw_records: list[dict], path) -> list[Path]:
    """One PNG per collective (``busbw_<collective>.png`` in directory ``path``); none for no records."""
    by_collective: dict[str, list[dict]] = defaultdict(list)
    for r in busbw_records:
        by_collective[r.get("collective", "unknown")].append(r)
    out = Path(path)
    return [_plot_collective(name, rows, out / f"busbw_{_file_safe(name)}.png")
            for name, rows in sorted(by_collective.items())]


def _file_safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(name))


def _number(value) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def _efficiency_text(value) -> str:
    number = _number(value)
    return "efficiency n/a" if math.isnan(number) else f"efficiency {number:.2f}"


def plot_overlap(overlap_records: list[dict], path) -> Path | None:
    """Grouped bars per implementation (``overlap.png`` in directory ``path``); None for no records."""
    if not overlap_records:
        return None
    fig = new_figure(max(5.0, 2.2 * len(overlap_records) + 2), 5.0)
    ax = fig.add_subplot()
    width = 0.8 / len(OVERLAP_BARS)
    for i, (field, label) in enumerate(OVERLAP_BARS):
        xs = [g + (i - 1) * width for g in range(len(overlap_records))]
        ax.bar(xs, [_number(r.get(field)) for r in overlap_records], width, label=label)
    for g, r in enumerate(overlap_records):
        heights = [h for h in (_number(r.get(f)) for f, _ in OVERLAP_BARS) if not math.isnan(h)]
        ax.annotate(_efficiency_text(r.get("efficiency")), (g, max(heights, default=0.0)),
                    xytext=(0, 4), textcoords="offset points", ha="center", va="bottom")
    ax.set_xticks(range(len(overlap_records)), [str(r.get("impl", "?")) for r in overlap_records])
    ax.set_ylabel("time (ms)")
    ax.set_title(_title("backward with gradient sync: overlap", overlap_records))
    ax.margins(y=0.1)
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=len(OVERLAP_BARS))
    return save(fig, Path(path) / "overlap.png")


def _with_run_context(records: list[dict], run: dict) -> list[dict]:
    """Records may lack the run's backend and world size; the titles should name them."""
    context = {k: run[k] for k in ("backend", "world_size") if run.get(k) is not None}
    return [{**context, **r} for r in records]


def render_plots(results: dict, out_dir) -> list[str]:
    """Draw whatever ``results`` holds; file names relative to ``out_dir``, none for empty records."""
    out = Path(out_dir)
    written: list[Path] = []
    run = results.get("run") or {}
    busbw = results.get("busbw") or []
    if busbw:
        written += plot_busbw(_with_run_context(busbw, run), out)
    overlap = plot_overlap(_with_run_context(results.get("overlap") or [], run), out)
    if overlap is not None:
        written.append(overlap)
    return [p.relative_to(out).as_posix() for p in written]
