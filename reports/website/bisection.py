"""A night's bisection on its page: which commit moved the regressed figure, the figure before and after, every
commit measured, the ones skipped and why, what it cost, and how to run it again."""

from __future__ import annotations

import shlex

from ..bisect.search import OUTCOMES, SEVERAL_STEPS, cost, span
from ..store.bisection import Bisection
from .html import Markup, join, table, tag

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
    parts = [tag("p", join([span(b), ": ", head, "."])), table(rows), tag("p", f"{cost(b)}.")]
    if b.several_steps:
        parts.append(tag("p", f"{SEVERAL_STEPS}."))
    if b.command:
        parts.append(tag("pre", tag("code", shlex.join(b.command))))
    return join(parts)
