"""The overlap section: compute, overlapped and serial steps per implementation and mode, the efficiency
against its ideal, and the timelines."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from benchmarks.overlap import MODES, OverlapRecord

from ..plots import plot_overlap, plot_timeline
from ..table import cell, sampling_note, table


def _efficiency_cells(r: OverlapRecord) -> dict:
    if r.efficiency is None:
        return {"efficiency": cell(r.efficiency, r.refused), "ideal": "", "share of ideal": ""}
    return {"efficiency": cell(r.efficiency), "ideal": f"{r.ideal:.3f}", "share of ideal": cell(r.share)}


def markdown(records: Sequence[OverlapRecord]) -> str:
    parts = []
    for mode in MODES:
        rows = [{"impl": r.impl, "compute (ms)": cell(r.compute_ms), "overlap (ms)": cell(r.overlap_ms),
                 "serial (ms)": cell(r.serial_ms), **_efficiency_cells(r), "dropped rounds": r.dropped_rounds}
                for r in records if r.mode == mode]
        if rows:
            first = next(r for r in records if r.mode == mode)
            model = first.model
            parts.append(f"### {mode.capitalize()} compute: {model.depth} x Linear({model.width}, "
                         f"{model.width}), batch {model.batch}; one bucket's all-reduce {first.collective_ms:.3g} ms"
                         + (f", {first.wait_ms:.3g} ms emulated backward per layer" if first.wait_ms else "")
                         + "\n\n" + table(rows, numparse=False)
                         + f"\n\nSampled: {sampling_note(first.sampling)}" + _overshoot(first))
    return "\n\n".join(parts) + (
        "\n\nMedian [95% interval] over rounds. efficiency = (serial - overlap) / (serial - compute) per "
        "round; the ideal hides every bucket's collective but the last's. A dropped round's serial step was not "
        "slower than its compute step.")


def plots(records: Sequence[OverlapRecord], out: Path) -> list[Path]:
    written = [p for p in (plot_overlap(records, out),) if p is not None]
    written += [plot_timeline(r, out) for r in records if r.timeline]
    return written


def _overshoot(record: OverlapRecord) -> str:
    sleeps = record.sleep_overshoot
    if not sleeps:
        return ""
    return (f" The emulated compute's {sleeps.n:,} sleeps took {sleeps.median:.3g}x the time asked at the "
            f"median, {sleeps.p90:.3g}x at the 90th percentile, {sleeps.max:.3g}x at most.")
