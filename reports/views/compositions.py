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
    findings: int
    known: int
    stopped_by: str


@dataclass(frozen=True)
class FindingLine:
    implementation: str
    reproduce: str
    axes: str
    message: str
    known: str | None
    """Why the implementation's expectation list records it (a known finding), or None: a new one."""


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
    searches = tuple(SearchRow(e.impl, e.triples, e.searched, e.runs, e.seconds, len(e.findings), len(e.expected),
                               e.stopped_by) for e in results.explorations)
    findings = tuple(FindingLine(e.impl, f.reproduce(e.impl), f.axes(), f.message, e.expected.get(f.composition))
                     for e in results.explorations for f in e.findings)
    return CompositionsView(coverage, covered[0][1].removals if covered else (), searches, findings)
