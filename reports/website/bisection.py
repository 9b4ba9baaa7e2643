"""A night's bisection on its page: which commit moved the regressed figure, the figure before and after, every
commit measured, the ones skipped and why, what it cost, and how to run it again."""

from __future__ import annotations

import json
import shlex
import warnings
from pathlib import Path

from datamodel import from_json

from ..bisect.search import FILE, OUTCOMES, Bisection
from ..store.runs import SkippedRunWarning
from .html import Markup, join, table, tag

def read_bisection(run_folder: Path) -> Bisection | None:
    """The run's bisection, or None; one that cannot be read is a warning naming it, never a broken site."""
    path = run_folder / FILE
    if not path.is_file():
        return None
    try:
        return from_json(Bisection, json.loads(path.read_text()))
    except ValueError as exc:
        warnings.warn(f"skipped the bisection of run {run_folder.name}: {exc}", SkippedRunWarning, stacklevel=2)
        return None


def bisection_html(b: Bisection) -> Markup:
    head = OUTCOMES[b.outcome]
    if b.outcome == "found":
        head = join([head, " ", tag("code", b.first_moved[:12]), f" {b.subject}"])
    elif b.outcome == "ambiguous":
        head = join([head, " ", join([tag("code", c[:12]) for c in b.candidates], ", ")])
    rows = [{"commit": t.commit[:12], "subject": t.subject,
             "answer": t.decision.outcome if t.decision else "skipped",
             "ratio to good [95%]": (f"{t.decision.ratio:.4g} [{t.decision.interval[0]:.4g}, "
                                     f"{t.decision.interval[1]:.4g}]") if t.decision else t.failed,
             "median good -> commit": (f"{t.decision.good_median:.4g} -> {t.decision.candidate_median:.4g}"
                                       if t.decision else ""),
             "runs": t.runs} for t in b.trials]
    parts = [tag("p", join([tag("strong", b.metric), f" between {b.good[:12]} (good) and {b.bad[:12]} (bad), "
                            f"threshold {b.threshold:.1%}: ", head, "."])),
             table(rows),
             tag("p", f"{b.runs} benchmark runs of the commits measured, each beside a run of the good commit; "
                      f"{len(b.skipped)} skipped.")]
    if b.several_steps:
        parts.append(tag("p", "The figure moved again after the first moved commit: the bad end differs from it."))
    if b.command:
        parts.append(tag("pre", tag("code", shlex.join(b.command))))
    return join(parts)
