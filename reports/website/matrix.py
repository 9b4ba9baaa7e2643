"""The conformance matrix as HTML, from the same cells as report.md's (``reports.render.matrix``): a symbol
and words in each cell besides its colour, a failing count linking to the failing checks on the run's page,
and the reasons and findings the cells cite, numbered."""

from __future__ import annotations

from typing import Sequence

from ..conformance.records import SuiteRun
from ..render.matrix import LEGEND, Notes, cell_text, matrix
from .html import Markup, join, link, slug, tag

SYMBOLS = {"pass": "✔", "FAIL": "✘", "xfail": "◐", "skip": "–", "n/a": "·"}
OPEN_NOTES = 5
"""Up to this many reasons are listed open under the matrix; more are one click away."""


def failure_anchor(label: str, family: str) -> str:
    """The id of an implementation's failing checks of one family on its run's page."""
    return f"fail-{slug(label)}-{slug(family)}"


def matrix_html(results: Sequence[SuiteRun], run_page: str) -> Markup:
    """``run_page``: the run's page, relative to the page the matrix is on ('' for that page itself)."""
    grid = matrix(results)
    if not grid.rows:
        return tag("p", "No suite ran.")
    notes = Notes()
    rows = []
    for row in grid.rows:
        cells = [tag("th", row.label, scope="row")]
        for family in grid.families:
            entry = row.cells[family]
            text = cell_text(entry)
            if entry.outcome == "FAIL":
                text = link(f"{run_page}#{failure_anchor(row.label, family)}", text)
            cite = ""
            if entry.outcome not in ("pass", "n/a"):
                n = notes.number(entry.note)
                cite = join([" ", link(f"#matrix-note-{n}", f"[{n}]", class_="cite")])
            symbol = tag("span", SYMBOLS[entry.outcome], aria_hidden="true")
            cells.append(tag("td", join([symbol, " ", text, cite]), class_=f"cell cell-{slug(entry.outcome)}",
                             title=entry.note or None))
        rows.append(tag("tr", join(cells)))
    head = tag("tr", join([tag("th", "implementation", scope="col"),
                           *(tag("th", f, scope="col") for f in grid.families)]))
    inner = join([tag("thead", head), tag("tbody", join(rows))])
    grid_html = tag("div", tag("table", inner, class_="matrix"), class_="scroll")
    cited = tag("ol", join([tag("li", text or "(no reason given)", id=f"matrix-note-{i}")
                            for i, text in enumerate(notes.texts, 1)]), class_="notes")
    reasons = tag("details", join([tag("summary", f"The reasons and findings the cells cite: {len(notes.texts)}"),
                                   cited]), open="open" if len(notes.texts) <= OPEN_NOTES else None)
    return join([grid_html, tag("p", LEGEND + ". A cell's reason shows on hover.", class_="small"),
                 reasons if notes.texts else ""])
