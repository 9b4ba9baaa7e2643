"""A comparison of two runs as markdown: the summary line, every gated metric, the informative ones that moved."""

from __future__ import annotations

import math
from typing import Sequence

from benchmarks.stats import Summary, describe

from ..comparison.changes import ALPHA, DEFAULT_ABSOLUTE_THRESHOLD, DEFAULT_THRESHOLD, STATUS_ORDER
from ..store.model import Change, Comparison
from ..store.upgrade import written_before
from ..views.run import comparison_view
from .table import table


def _pct(fraction: float) -> str:
    return f"{fraction * 100:g}%"


def _fmt_value(value: float | None, figure: Summary | None) -> str:
    if figure is not None:
        return describe(figure)
    if value is None:
        return ""
    if float(value).is_integer():
        return str(int(value))
    return f"{value:,.1f}" if abs(value) >= 1000 else f"{value:.4g}"


def _fmt_change(change: Change) -> str:
    if change.absolute and change.old is not None and change.new is not None:
        return f"{change.new - change.old:+.3g}"
    if change.relative is not None:
        return f"{change.relative:+.1%}"
    return "from 0" if change.old == 0 else "n/a"


def _fmt_threshold(change: Change) -> str:
    return f"{change.threshold:g}" if change.absolute else _pct(change.threshold)


def _fmt_p(change: Change) -> str:
    if change.p_adjusted is None:
        return change.test
    return f"{change.p_adjusted:.2g}"


def _severity(change: Change) -> tuple[float, str]:
    """Largest moves first; moves from 0 have no relative size and go on top."""
    size = math.inf if change.relative is None else abs(change.relative)
    return (-size, change.key)


def change_rows(changes: Sequence[Change]) -> list[dict]:
    """One row per change, each cell as the report writes it (the site draws the same rows as HTML)."""
    return [{"status": c.status, "metric": c.key, "old": _fmt_value(c.old, c.old_figure),
             "new": _fmt_value(c.new, c.new_figure), "change": _fmt_change(c), "unit": c.unit, "better": c.better,
             "p (BH)": _fmt_p(c), "threshold": _fmt_threshold(c)}
            for c in changes]


def counts(changes: Sequence[Change]) -> str:
    n = {s: sum(c.status == s for c in changes) for s in STATUS_ORDER}
    line = f"{n['regression']} regressions, {n['improvement']} improvements, {n['unchanged']} unchanged"
    if n["added"] or n["removed"]:
        line += f"; {n['added']} added, {n['removed']} removed"
    return line


def summary_line(changes: Sequence[Change], threshold: float = DEFAULT_THRESHOLD, alpha: float = ALPHA) -> str:
    gated = [c for c in changes if c.gated]
    informative = [c for c in changes if not c.gated]
    return (f"Gated: {counts(gated)}. Informative: {counts(informative)}. A change counts when "
            f"Mann-Whitney's U is significant after Benjamini-Hochberg (FDR {_pct(alpha)} per family) and "
            f"the move exceeds {_pct(threshold)} ({DEFAULT_ABSOLUTE_THRESHOLD:g} absolute for efficiencies); "
            "counts are exact.")


def comparison_markdown(changes: Sequence[Change], threshold: float = DEFAULT_THRESHOLD, alpha: float = ALPHA,
                        listed: Sequence[str] = ("regression", "improvement", "added", "removed")) -> str:
    """The summary, every gated metric, then the informative ones whose status is in ``listed``."""
    text = summary_line(changes, threshold, alpha)
    unsampled = [c for c in changes if c.test == "threshold"]
    if unsampled:
        text += (f"\n\nNote: {len(unsampled)} metrics have no samples in one of the runs "
                 f"({written_before('samples')}): they are compared by the threshold alone.")
    gated = sorted((c for c in changes if c.gated), key=lambda c: (STATUS_ORDER.index(c.status), c.key))
    if gated:
        text += "\n\nGated metrics (a regression here fails the job):\n\n" + _table(gated)
    shown = []
    for status in listed:
        group = [c for c in changes if not c.gated and c.status == status]
        shown += sorted(group, key=_severity) if status in ("regression", "improvement") else group
    if shown:
        text += "\n\nInformative metrics that moved (reported, never failing the job):\n\n" + _table(shown)
    return text + "\n"


def _table(changes: Sequence[Change]) -> str:
    return table(change_rows(changes), numparse=False)


def run_comparison_markdown(comparison: Comparison | None) -> str:
    """A run's comparison section: the runs passed over, then what changed against the earlier run."""
    view = comparison_view(comparison)
    notes = "".join(f"Passed over {line}.\n\n" for line in view.passed_over)
    if view.state != "compared":
        return notes + view.sentence
    return (notes + view.sentence + " "
            + comparison_markdown(comparison.changes, comparison.threshold, comparison.alpha))
