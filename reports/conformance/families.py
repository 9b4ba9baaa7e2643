"""Which family of checks a test belongs to (rules as data: the first pattern its node id matches), and a
suite run's outcomes tallied per family (kept in ``SuiteResult.families``; ``reports.render.matrix`` draws
them as the conformance matrix)."""

from __future__ import annotations

import fnmatch
from collections import Counter
from dataclasses import dataclass, field

from datamodel import doc

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
    ("compositions", ("suites/multigpu/test_compositions.py::*", "suites/multigpu/test_explore.py::*")),
    ("quantized params", ("suites/multigpu/test_quantized_params.py::*",)),
    ("optimizer", ("suites/multigpu/test_vs_torch_ddp.py::*", "suites/multigpu/test_equivalent_configs.py::*")),
    ("harness", ("suites/multigpu/test_harness.py::*",)),
)


OUTCOMES = ("passed", "failed", "skipped", "xfailed")


def family_of(nodeid: str) -> str:
    for family, patterns in FAMILIES:
        if any(fnmatch.fnmatchcase(nodeid, p) for p in patterns):
            return family
    return "other"


@dataclass(frozen=True)
class FamilyTally:
    """One family's outcomes in a suite run."""

    passed: int = doc("tests passed")
    failed: int = doc("tests failed or errored")
    skipped: int = doc("tests skipped")
    xfailed: int = doc("expected failures")
    reasons: dict[str, int] = doc("each reason of a skip or an xfail, with its count")
    first_failure: str = doc("the first failed test and its message, cut to 160 characters")


@dataclass
class Counting:
    """A family's outcomes as they are counted, test by test or run by run."""

    passed: int = 0
    failed: int = 0
    skipped: int = 0
    xfailed: int = 0
    reasons: Counter = field(default_factory=Counter)
    first_failure: str = ""

    def count(self, nodeid: str, outcome: str, note: str = "") -> None:
        """One test's outcome; the reasons of skips and xfails, and the first failure, kept."""
        setattr(self, outcome, getattr(self, outcome) + 1)
        if outcome in ("skipped", "xfailed") and note:
            self.reasons[note] += 1
        if outcome == "failed" and not self.first_failure:
            self.first_failure = f"{nodeid.split('::')[-1]}: {note}"[:160]

    def add(self, tally: FamilyTally) -> None:
        """Another run's tally of the same family."""
        for outcome in OUTCOMES:
            setattr(self, outcome, getattr(self, outcome) + getattr(tally, outcome))
        self.reasons.update(tally.reasons)
        self.first_failure = self.first_failure or tally.first_failure

    @property
    def total(self) -> int:
        return sum(getattr(self, o) for o in OUTCOMES)

    def frozen(self) -> FamilyTally:
        return FamilyTally(self.passed, self.failed, self.skipped, self.xfailed, dict(self.reasons),
                           self.first_failure)


def tally(families: dict[str, Counting], nodeid: str, outcome: str, note: str = "") -> None:
    """Count one test's outcome in its family."""
    families.setdefault(family_of(nodeid), Counting()).count(nodeid, outcome, note)


def frozen_families(families: dict[str, Counting]) -> dict[str, FamilyTally]:
    """The tallies ``tally`` kept, as records."""
    return {name: counting.frozen() for name, counting in families.items()}
