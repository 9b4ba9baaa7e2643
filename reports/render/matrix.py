"""One conformance matrix: every implementation (with its version) against every family of checks.

Each test belongs to one family (``reports.conformance.families``), and a
suite run tallies its tests per family; the matrix merges an
implementation's runs of both suites and gives one cell per family:

- **pass** (how many passed; any xfails, the known findings, noted);
- **FAIL** (how many failed, and the first failure);
- **xfail** with the reason, when the only outcomes are expected failures (a
  recorded finding about that implementation);
- **skip** with the commonest reason, when every test of the family skipped;
- **n/a** when the run collected none.

The cells are data (``matrix``), drawn here as markdown for report.md and by
``reports.website`` as HTML, so both say the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..conformance.families import FAMILIES, OUTCOMES, Counting
from ..conformance.records import SuiteRun
from .table import table

LEGEND = ("pass n: n tests passed and none failed (xfail: recorded findings, docs/peers.md); FAIL: a check "
          "failed; skip / xfail / n/a: nothing of the family ran, with the commonest reason")


@dataclass(frozen=True)
class MatrixCell:
    """What one cell says: its outcome (pass, FAIL, xfail, skip or n/a), the counts, and the note it cites
    (the first failure, or the commonest reason of a skip or an xfail; empty for a pass)."""

    outcome: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    xfailed: int = 0
    note: str = ""

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.skipped + self.xfailed


@dataclass(frozen=True)
class MatrixRow:
    label: str
    """The implementation and its version, as the suite's header named them."""
    cells: dict[str, MatrixCell]
    """family -> cell, for every family of the matrix."""


@dataclass(frozen=True)
class Matrix:
    families: tuple[str, ...]
    rows: tuple[MatrixRow, ...]


def merged(results: Sequence[SuiteRun]) -> dict[str, dict[str, Counting]]:
    """implementation label -> family -> the tallies of every suite run of that implementation."""
    out: dict[str, dict[str, Counting]] = {}
    for r in results:
        for family, tally in r.families.items():
            out.setdefault(r.label, {}).setdefault(family, Counting()).add(tally)
    return out


def matrix_cell(entry: Counting | None) -> MatrixCell:
    if not entry or not entry.total:
        return MatrixCell("n/a")
    counts = {o: getattr(entry, o) for o in OUTCOMES}
    common = entry.reasons.most_common(1)[0][0] if entry.reasons else ""
    if entry.failed:
        return MatrixCell("FAIL", **counts, note=entry.first_failure)
    if entry.passed:
        return MatrixCell("pass", **counts)
    if entry.xfailed:
        return MatrixCell("xfail", **counts, note=common)
    return MatrixCell("skip", **counts, note=common)


def matrix(results: Sequence[SuiteRun]) -> Matrix:
    """Rows: implementations, in the order they ran; columns: the families any of them collected, in
    ``FAMILIES`` order."""
    by_impl = merged(results)
    families = tuple(f for f, _ in FAMILIES if any(f in cells for cells in by_impl.values()))
    return Matrix(families, tuple(MatrixRow(label, {f: matrix_cell(cells.get(f)) for f in families})
                                  for label, cells in by_impl.items()))


class Notes:
    """The reasons and findings the cells cite, numbered once each."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def number(self, text: str) -> int:
        if text not in self.texts:
            self.texts.append(text)
        return self.texts.index(text) + 1

    def cite(self, text: str) -> str:
        return f"[{self.number(text)}]"

    def markdown(self) -> str:
        return "\n".join(f"{i}. {t}" for i, t in enumerate(self.texts, 1))


def cell_text(entry: MatrixCell) -> str:
    """A cell in words, without its citation: 'pass 3, xfail 1', 'FAIL 2 of 5', 'xfail 1', 'skip', 'n/a'."""
    if entry.outcome == "FAIL":
        return f"FAIL {entry.failed} of {entry.total}"
    if entry.outcome == "pass":
        return f"pass {entry.passed}" + (f", xfail {entry.xfailed}" if entry.xfailed else "")
    if entry.outcome == "xfail":
        return f"xfail {entry.xfailed}"
    return entry.outcome


def matrix_markdown(results: Sequence[SuiteRun]) -> str:
    """Rows: implementations; columns: the families of checks; then the reasons the cells cite."""
    grid = matrix(results)
    if not grid.rows:
        return "No suite ran."
    notes = Notes()
    rows = [{"implementation": row.label,
             **{f: cell_text(c) + (f" {notes.cite(c.note)}" if c.outcome not in ("pass", "n/a") else "")
                for f, c in row.cells.items()}}
            for row in grid.rows]
    return table(rows, numparse=False) + f"\n\n{LEGEND}:\n\n" + notes.markdown()
