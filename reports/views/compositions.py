"""The compositions of a run, as its pages say them: coverage per implementation, what the rules removed, the
search past the covering arrays, and each finding with the line that reproduces it."""

from __future__ import annotations

from dataclasses import dataclass

from suites.multigpu.records import Removal

from ..store.model import Results


@dataclass(frozen=True)
class CoverageRow:
    implementation: str
    name: str
    run: int
    covered: int
    expressible: int
    allowed: int
    total: int

    @property
    def complete(self) -> bool:
        return self.covered == self.expressible


@dataclass(frozen=True)
class SearchRow:
    implementation: str
    triples: int
    drawn: int
    runs: int
    seconds: float
    budget: float | None
    findings: int
    known: int
    known_skipped: int
    stopped_by: str
    seed: int | None
    rerun: str
    covered: bool
    """Whether the run's verdict covers the implementation (its new findings fail the run)."""


@dataclass(frozen=True)
class FindingLine:
    implementation: str
    reproduce: str
    axes: str
    message: str
    known: str | None
    """Why the implementation's expectation list records it (a known finding), or None: a new one."""
    covered: bool
    """Whether the run's verdict covers the implementation: a new finding then fails the run; else it is reported."""
    shrunk: bool

    @property
    def advice(self) -> str:
        """What to do with a new finding."""
        if self.covered:
            return "fails the run: fix it, or record it in the implementation's expectation list with its reason"
        return ("reported, not failed (the verdict does not cover this implementation): record it in "
                f"fixtures/expectations/{self.implementation}.toml as an xfail with its upstream lines, or report it "
                "upstream")


@dataclass(frozen=True)
class CompositionsView:
    coverage: tuple[CoverageRow, ...]
    removals: tuple[Removal, ...]
    """What the rules removed (the same for every implementation)."""
    searches: tuple[SearchRow, ...]
    findings: tuple[FindingLine, ...]

    @property
    def empty(self) -> bool:
        return not self.coverage and not self.searches

    @property
    def new_findings(self) -> tuple[FindingLine, ...]:
        return tuple(f for f in self.findings if f.known is None)


def compositions_view(results: Results) -> CompositionsView:
    covered = [(r.label, r.compositions) for r in results.conformance if r.compositions is not None]
    coverage = tuple(CoverageRow(label, c.name, c.cases, c.covered, c.expressible, c.allowed, c.total)
                     for label, c in covered)
    gated = covers(results)
    searches = tuple(SearchRow(e.impl, e.triples, e.searched, e.runs, e.seconds, e.budget, len(e.findings),
                               len(e.expected), e.known_skipped, e.stopped_by, e.seed, e.rerun(), gated(e.impl))
                     for e in results.explorations)
    findings = tuple(FindingLine(e.impl, f.reproduce(e.impl), f.axes(), f.message, e.expected.get(f.composition),
                                 gated(e.impl), f.shrunk)
                     for e in results.explorations for f in e.findings)
    return CompositionsView(coverage, covered[0][1].removals if covered else (), searches, findings)


def covers(results: Results):
    """Whether the run's verdict covers an implementation: those it names; every one, for a run written before
    verdicts named them (every failure failed it then)."""
    named = results.verdict.covers if results.verdict is not None else ()
    return lambda impl: not named or impl in named
