"""The compositions of a run on the site: coverage per implementation, and every finding of the search with the
line that reproduces it (``reports.views.compositions`` says what; this only formats it)."""

from __future__ import annotations

from ..views.compositions import CompositionsView
from .html import Markup, join, table, tag


def findings_html(view: CompositionsView) -> Markup:
    if not view.searches:
        return tag("p", "No search past the covering arrays in this run (--explore-seconds 0, or an older run).")
    if not view.findings:
        searched = ", ".join(f"{s.implementation} ({s.triples + s.drawn} compositions)" for s in view.searches)
        return tag("p", f"✔ No finding: {searched}.")
    items = [tag("li", join([tag("span", _mark(f), aria_hidden="true"),
                             tag("strong", f.implementation), f" ({'known' if f.known else 'new'}):",
                             tag("pre", tag("code", f.reproduce)),
                             f"The axes that must combine: {f.axes}; {f.message}",
                             "" if f.shrunk else " (Shrinking was cut short by the budget.)",
                             f" Known: {f.known}" if f.known else f" New: {f.advice}."]),
                 class_="fails" if f.known is None and f.covered else None) for f in view.findings]
    reruns = [tag("li", join([f"{s.implementation}: ", tag("code", s.rerun)])) for s in view.searches]
    return join([tag("ul", join(items), class_="findings"),
                 tag("p", "Each search runs again, drawing the same compositions, with:"), tag("ul", join(reruns))])


def _mark(finding) -> str:
    """✘ a new finding that fails the run, ▼ one reported only, – a known one."""
    return "– " if finding.known else "✘ " if finding.covered else "▼ "


def coverage_html(view: CompositionsView) -> Markup:
    if not view.coverage:
        return tag("p", "No composition ran in this run.")
    rows = [{"implementation": c.implementation, "set": c.name, "compositions run": c.run,
             "pairs covered": f"{'✔ ' if c.complete else '✘ '}{c.covered} of {c.expressible} it can express",
             "the rules allow": c.allowed, "in all": c.total} for c in view.coverage]
    return table(rows)


def compositions_html(view: CompositionsView) -> Markup:
    return join([tag("h3", "Findings of the search past the covering arrays"), findings_html(view),
                 tag("h3", "Coverage of the configuration space"), coverage_html(view)])
