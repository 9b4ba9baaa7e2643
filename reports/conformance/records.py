"""What a suite run and a strength measurement leave in a run: their records, apart from the running (which needs
pytest and the ranks), so that a run is read without them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from datamodel import doc
from suites.multigpu.records import Coverage

from .families import FamilyTally


@dataclass(frozen=True)
class Failure:
    """One test that failed or errored, or a suite session that did not run."""

    test: str = doc("the test's pytest node id; empty: the session itself failed to run")
    message: str = doc("what it said, cut at 300 characters (500 of the output for a session)")

    def __str__(self) -> str:
        return f"{self.test}: {self.message}" if self.test else self.message


@dataclass(frozen=True)
class SuiteRun:
    """One suite run against one implementation: its outcomes, counted and per family of checks."""

    suite: str = doc("the suite's path")
    impl: str = doc("the implementation asked for (--impl)")
    implementation: str = doc("the implementation's name and version as the suite named them; empty: the suite "
                              "did not start")
    levels: tuple[str, ...] = doc("the capability levels it provides, as the suite read them")
    passed: int = doc("tests passed")
    failed: int = doc("tests failed")
    skipped: int = doc("tests skipped, each with its reason")
    xfailed: int = doc("expected failures: recorded findings about the implementation")
    errors: int = doc("tests that errored (a fixture or the harness), and a suite that did not run")
    seconds: float = doc("the tests' time")
    failures: tuple[Failure, ...] = doc("each failure: the test and its message")
    failed_ids: tuple[str, ...] = doc("pytest node ids of failed or erroring tests")
    crashed_ids: tuple[str, ...] = doc("the failed ones that did not fail a check: an exception other than an "
                                       "assertion ended them")
    skip_reasons: dict[str, int] = doc("each reason of a skip, with how many tests it skipped")
    families: dict[str, FamilyTally] = doc("outcomes per family of checks (reports/conformance/families.py), for "
                                           "the conformance matrix")
    exit_code: int = doc("pytest's exit code")
    compositions: Coverage | None = doc("how much of the configuration space the multi-rank suite's compositions "
                                        "that ran cover, for this implementation; null for another suite", None)
    crash_reruns: tuple[str, ...] = doc("each rerun of a check whose rank died of a signal (--crash-reruns), as "
                                        "it was said: the ranks, the signal and the frame; the test counts by its "
                                        "last run", ())

    @property
    def status(self) -> str:
        """The one rule for a suite run, which the verdict reads: fail where a test failed or errored, or pytest
        collected nothing (exit 5: a filter that matches nothing checks nothing); not applicable where every
        test skipped (nothing was checked); else pass."""
        if self.failed or self.errors or self.exit_code != 0:
            return "fail"
        return "not applicable" if self.skipped and not (self.passed or self.xfailed) else "pass"

    @property
    def ok(self) -> bool:
        return self.status != "fail"

    def why(self) -> str:
        """What the counts do not say: nothing collected, the commonest reason of the skips where every check
        skipped, and the checks that ran again after a rank crashed."""
        said = []
        if self.exit_code == 5:
            said.append("pytest collected nothing (exit 5): a filter that matches nothing checks nothing")
        elif self.status == "not applicable" and self.skip_reasons:
            reason, count = max(self.skip_reasons.items(), key=lambda kv: kv[1])
            said.append(f"every check skipped; the commonest reason ({count} of {self.skipped}): {reason}")
        if self.crash_reruns:
            said.append(f"{len(self.crash_reruns)} reruns after a rank died of a signal, the first: "
                        f"{self.crash_reruns[0]}")
        return "; ".join(said)

    @property
    def label(self) -> str:
        """The implementation and its version as the suite named them, else the name asked for."""
        return self.implementation or self.impl


CaughtIn = Literal["suite", "triples", "nowhere"]


@dataclass(frozen=True)
class StrengthRecord:
    """One deliberately broken implementation against the suite it targets."""

    broken: str = doc("the broken implementation (fixtures/broken/)")
    bug: str = doc("the bug it carries")
    suite: str = doc("the suite it is run against")
    caught: bool = doc("whether a check caught it (a crash is not a catch)")
    expected_tests_failed: bool = doc("whether every test its entry names failed, by a check")
    failing_tests: int = doc("failed checks")
    crashed_tests: int = doc("tests failed by an exception other than an assertion")
    caught_by: str = doc("the test modules whose checks failed")
    caught_in: CaughtIn = doc("where a check caught it: its suite as CI runs it (suite: every pair of axis values "
                              "meets), only in the compositions of the triples that meet its axes (triples: the "
                              "nightly search's first phase), or nowhere", "suite")
    measured_in: str | None = doc("the earlier run that measured it, for a row carried over (a run measures a share "
                                  "of the catalogue within its budget); null: measured in this run", None)


@dataclass(frozen=True)
class StrengthPhase:
    """What the suite-strength phase of a run measured, and what it carried over."""

    catalogue: int = doc("broken implementations in the catalogue")
    measured: int = doc("measured in this run")
    carried: int = doc("carried over from the earlier runs that measured them (each row names its run); the rest "
                       "of the catalogue is not measured yet")
    seconds: float = doc("what measuring took")
    budget: float | None = doc("seconds the phase may spend measuring; null: every entry")
    proven_by: str = doc("the test that proves, on every commit, each entry caught by the tests it names")


MEASURED = "strength.json"
"""The file the strength phase's child writes its ``StrengthMeasured`` into, in the folder it is given."""


@dataclass(frozen=True)
class StrengthMeasured:
    """What the strength phase's child process (``python -m selfcheck.strength``) hands the main job."""

    rows: tuple[StrengthRecord, ...] = doc("the catalogue's rows, measured or carried over")
    phase: StrengthPhase = doc("what it measured and carried")
