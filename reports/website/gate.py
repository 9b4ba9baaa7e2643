"""The gate's decisions against the previous run of the setup, as the index shows them: the regressions first,
then the improvements, then what could not be compared and why (refused figures, findings, figures whose
sampling missed its target), then the informative moves."""

from __future__ import annotations

from typing import Callable, Sequence

from ..render.comparison import change_rows, summary_line
from ..render.summary import missed_targets, not_given
from ..store.model import Change, Results
from ..views.run import comparison_view
from .html import Markup, join, table, tag
from .refusals import refused_keys

STATUS_SYMBOLS = {"regression": "▼ regression", "improvement": "▲ improvement", "unchanged": "= unchanged",
                  "added": "+ added", "removed": "− removed"}


def changes_table(changes: Sequence[Change]) -> Markup:
    rows = change_rows(changes)
    for row in rows:
        row["status"] = STATUS_SYMBOLS.get(row["status"], row["status"])
    return table(rows, row_classes=[f"row-{c.status}" for c in changes])


def _items(lines: Sequence[str], class_: str | None = None) -> Markup:
    return tag("ul", join([tag("li", line) for line in lines]), class_=class_)


def gate_html(results: Results, run_link: Callable[[str], Markup]) -> Markup:
    """``run_link(name)``: a link to that run's page (or its name where the site does not keep it)."""
    view = comparison_view(results.comparison)
    parts: list = []
    if view.passed_over:
        parts.append(tag("p", "Passed over (not comparable): " + "; ".join(view.passed_over) + "."))
    if view.state == "error":
        parts.append(tag("p", f"⚠ {view.sentence}", class_="error"))
    elif view.state != "compared":
        parts.append(tag("p", view.sentence))
    else:
        parts += _decisions(results, run_link)
    refused = not_given(results, findings=False)
    findings = not_given(results, findings=True)
    missed = missed_targets(results.metrics)
    if refused or findings or missed:
        parts.append(tag("h3", "Not gated tonight, and why"))
    if refused:
        parts += [tag("p", "Refused figures (null in the results, never gated):"), _items(refused)]
    if findings:
        parts += [tag("p", "Findings (a figure not given because the machine showed something real):"),
                  _items(findings)]
    if missed and not results.run.setup.smoke:
        parts += [tag("p", "Figures whose calibrated sampling missed its target (informative this run):"),
                  _items(missed, class_="columns")]
    return join(parts)


def _decisions(results: Results, run_link: Callable[[str], Markup]) -> list:
    comparison = results.comparison
    gated = [c for c in comparison.changes if c.gated]
    parts = [tag("p", join(["Against ", run_link(comparison.against), ". ",
                            summary_line(comparison.changes, comparison.threshold, comparison.alpha)]))]
    for status, title in (("regression", "Regressions of gated metrics"),
                          ("improvement", "Improvements of gated metrics")):
        moved = [c for c in gated if c.status == status]
        parts += [tag("h3", f"{title}: {len(moved)}"), changes_table(moved) if moved else tag("p", "None.")]
    gone = [c for c in gated if c.status == "removed"]
    if gone:
        why = refused_keys(results)
        parts += [tag("h3", f"Gated last time, not compared tonight: {len(gone)}"),
                  _items([f"{c.key}: " + (f"refused: {why[c.key]}" if c.key in why else "not measured")
                          for c in gone])]
    informative = [c for c in comparison.changes if not c.gated and c.status in ("regression", "improvement")]
    if informative:
        summary = f"Informative figures that moved: {len(informative)} (reported, never failing the job)"
        parts.append(tag("details", join([tag("summary", summary), changes_table(informative)])))
    return parts
