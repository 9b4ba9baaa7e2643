"""One conformance matrix: every implementation (with its version) against every family of checks.

Each test belongs to one family (``FAMILIES``, rules as data: the first
pattern its node id matches). A suite run tallies its tests per family
(``tally``, kept in ``SuiteResult.families``); the matrix merges an
implementation's runs of both suites and shows one cell per family:

- **pass** (how many passed; any xfails, the known findings, noted);
- **FAIL** (how many failed, and the first failure);
- **xfail** with the reason, when the only outcomes are expected failures (a
  recorded finding about that implementation);
- **skip** with the commonest reason, when every test of the family skipped;
- **n/a** when the run collected none.
"""

from __future__ import annotations

import fnmatch
from collections import Counter

from .render import table

FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("layout", ("suites/layout/test_accounting.py::*", "suites/layout/test_alignment.py::*",
                "suites/layout/test_bucket_closing.py::*", "suites/layout/test_divisibility.py::*",
                "suites/layout/test_dtype_grouping.py::*", "suites/layout/test_golden.py::*",
                "suites/layout/test_order.py::*", "suites/layout/test_placement.py::*",
                "suites/layout/test_peer_agreement.py::*", "suites/multigpu/test_observed_layout.py::*")),
    ("buffer", ("suites/layout/test_views.py::*",)),
    ("shards", ("suites/layout/test_ownership.py::*",)),
    ("validation", ("suites/layout/test_errors.py::*", "suites/multigpu/test_bad_input.py::*")),
    ("expert", ("suites/layout/test_experts.py::*", "suites/multigpu/test_experts.py::*")),
    ("ddp numerics", ("suites/multigpu/test_vs_torch_ddp.py::test_grad_sync_*", "suites/multigpu/test_precision.py::*",
                      "suites/multigpu/test_isolation.py::*")),
    ("communication", ("suites/multigpu/test_communication.py::*",)),
    ("no_sync", ("suites/multigpu/test_no_sync.py::*",)),
    ("overlap", ("suites/multigpu/test_overlap.py::*",)),
    ("finalize", ("suites/multigpu/test_finalize.py::*",)),
    ("optimizer", ("suites/multigpu/test_vs_torch_ddp.py::*", "suites/multigpu/test_vs_single_process.py::*")),
    ("harness", ("suites/multigpu/test_harness.py::*",)),
)
OUTCOMES = ("passed", "failed", "skipped", "xfailed")


def family_of(nodeid: str) -> str:
    for family, patterns in FAMILIES:
        if any(fnmatch.fnmatchcase(nodeid, p) for p in patterns):
            return family
    return "other"


def impl_label(header: str, impl: str) -> str:
    """The implementation and its version as pytest's header names them (levels left out), else the name asked for."""
    return header.split(" (levels")[0] if header else impl


def tally(families: dict, nodeid: str, outcome: str, note: str = "") -> None:
    """Count one test's outcome in its family; keep the reasons of skips and xfails, and the first failure."""
    entry = families.setdefault(family_of(nodeid), {**{o: 0 for o in OUTCOMES}, "reasons": {}, "first_failure": ""})
    entry[outcome] += 1
    if outcome in ("skipped", "xfailed") and note:
        entry["reasons"][note] = entry["reasons"].get(note, 0) + 1
    if outcome == "failed" and not entry["first_failure"]:
        entry["first_failure"] = f"{nodeid.split('::')[-1]}: {note}"[:160]


def merged(results) -> dict[str, dict[str, dict]]:
    """implementation label -> family -> the tallies of every suite run of that implementation."""
    out: dict[str, dict[str, dict]] = {}
    for r in results:
        label = impl_label(r.header, r.impl)
        for family, entry in r.families.items():
            cell = out.setdefault(label, {}).setdefault(
                family, {**{o: 0 for o in OUTCOMES}, "reasons": Counter(), "first_failure": ""})
            for o in OUTCOMES:
                cell[o] += entry[o]
            cell["reasons"].update(entry["reasons"])
            cell["first_failure"] = cell["first_failure"] or entry["first_failure"]
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


def cell(entry: dict | None, notes: Notes) -> str:
    if not entry or not any(entry[o] for o in OUTCOMES):
        return "n/a"
    if entry["failed"]:
        return f"FAIL {entry['failed']} of {sum(entry[o] for o in OUTCOMES)} {notes.cite(entry['first_failure'])}"
    xfails = entry["xfailed"]
    common = entry["reasons"].most_common(1)[0][0] if entry["reasons"] else ""
    if entry["passed"]:
        return f"pass {entry['passed']}" + (f", xfail {xfails}" if xfails else "")
    if xfails:
        return f"xfail {xfails} {notes.cite(common)}"
    return f"skip {notes.cite(common)}"


def matrix_markdown(results) -> str:
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
