"""One conformance matrix: every implementation (with its version) against every family of checks.

Each test belongs to one family (``reports.conformance.families``), and a
suite run tallies its tests per family; the matrix merges an
implementation's runs of both suites and shows one cell per family:

- **pass** (how many passed; any xfails, the known findings, noted);
- **FAIL** (how many failed, and the first failure);
- **xfail** with the reason, when the only outcomes are expected failures (a
  recorded finding about that implementation);
- **skip** with the commonest reason, when every test of the family skipped;
- **n/a** when the run collected none.
"""

from __future__ import annotations

from typing import Sequence

from ..conformance.families import FAMILIES, Counting
from ..conformance.suites import SuiteRun
from .table import table


def merged(results: Sequence[SuiteRun]) -> dict[str, dict[str, Counting]]:
    """implementation label -> family -> the tallies of every suite run of that implementation."""
    out: dict[str, dict[str, Counting]] = {}
    for r in results:
        for family, tally in r.families.items():
            out.setdefault(r.label, {}).setdefault(family, Counting()).add(tally)
    return out


class Notes:
    """The reasons and findings the cells cite, numbered once each."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def cite(self, text: str) -> str:
        if text not in self.texts:
            self.texts.append(text)
        return f"[{self.texts.index(text) + 1}]"

    def markdown(self) -> str:
        return "\n".join(f"{i}. {t}" for i, t in enumerate(self.texts, 1))


def cell(entry: Counting | None, notes: Notes) -> str:
    if not entry or not entry.total:
        return "n/a"
    if entry.failed:
        return f"FAIL {entry.failed} of {entry.total} {notes.cite(entry.first_failure)}"
    xfails = entry.xfailed
    common = entry.reasons.most_common(1)[0][0] if entry.reasons else ""
    if entry.passed:
        return f"pass {entry.passed}" + (f", xfail {xfails}" if xfails else "")
    if xfails:
        return f"xfail {xfails} {notes.cite(common)}"
    return f"skip {notes.cite(common)}"


def matrix_markdown(results: Sequence[SuiteRun]) -> str:
    """Rows: implementations; columns: the families of checks; then the reasons the cells cite."""
    by_impl = merged(results)
    if not by_impl:
        return "No suite ran."
    families = [f for f, _ in FAMILIES if any(f in cells for cells in by_impl.values())]
    notes = Notes()
    rows = [{"implementation": label, **{f: cell(cells.get(f), notes) for f in families}}
            for label, cells in by_impl.items()]
    return (table(rows, numparse=False) + "\n\npass n: n tests passed and none failed (xfail: recorded "
            "findings, docs/peers.md); FAIL: a check failed; skip / xfail / n/a: nothing of the family ran, with the "
            "commonest reason:\n\n" + notes.markdown())
