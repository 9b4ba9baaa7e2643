"""The records of the compositions: how much of the space a set covered, and what a search found.

Plain values, read and written by ``datamodel``'s codec, importable without
torch: the main job stores them in its results and its report and site read
them (``reports``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from datamodel import doc

STEPS = 3
"""Steps a composition trains in the covering arrays; a finding may need fewer."""
COMPOSED = "suites/multigpu/test_compositions.py::test_composition_trains_like_one_process"
"""The test every composition runs as (its id the composition's spelling, in brackets)."""


def composed_test(composition: str) -> str:
    """The node id of the test a composition (as ``--case`` spells it) runs as."""
    return f"{COMPOSED}[{composition}]"


@dataclass(frozen=True)
class Removal:
    rules: tuple[str, ...] = doc("the rules that remove these combinations (together, where several)")
    count: int = doc("how many combinations of axis values they remove")
    example: str = doc("one of them, as axis=value pairs")


@dataclass(frozen=True)
class Coverage:
    """How much of the configuration space the compositions an implementation ran cover: each combination of
    ``strength`` axis values it can express in at least one of them, and what the rules took away."""

    name: Literal["pairwise", "triples"] = doc("the covering array: pairwise (every pair of values) or triples (every three)")
    strength: int = doc("how many axes a combination spans")
    cases: int = doc("compositions that ran (those the implementation skipped left out)")
    covered: int = doc("combinations the implementation can express that a composition that ran contains")
    expressible: int = doc("combinations the rules allow that the implementation can express (every allowed one, "
                           "for an implementation that lacks none of the axes' values)")
    allowed: int = doc("combinations some composition the rules allow contains")
    total: int = doc("combinations of values over every choice of axes, allowed or not")
    removals: tuple[Removal, ...] = doc("combinations the rules remove, grouped by the rules that remove them")
    twice: int | None = doc("pairs it can express that two compositions or more that ran contain (each pair should "
                            "meet twice, in compositions that differ elsewhere); null for triples and older runs",
                            None)
    unmasked: int | None = doc("pairs met in a composition holding no masking value besides their own (one rank, a "
                               "scaling factor of 1, no step taken: suites/multigpu/space.py MASKING); null for "
                               "triples and older runs", None)
    unmaskable: int | None = doc("pairs it can express that some composition it runs holds without a masking value "
                                 "besides their own: what ``unmasked`` counts against", None)


@dataclass(frozen=True)
class Finding:
    """A failure, shrunk: the fewest axes away from the base, and the fewest steps, that still fail."""

    composition: str = doc("the smallest failing composition, as --case spells it (axis=value, comma-separated): "
                           "taking away any one of its axes makes it pass")
    values: dict[str, list[str]] = doc("for each of its axes, every value that fails with the others held")
    steps: int = doc("the fewest steps that still fail")
    message: str = doc("the first line of the failure")
    found_by: Literal["triples", "search"] = doc("the covering array of every three values (triples), or hypothesis' search (search)")
    runs: int = doc("compositions run to confirm it, shrink it further and try the other values of its axes")
    shrunk: bool = doc("whether its shrinking finished; false when the search's seconds ran out first (its axes may "
                       "then hold some that need not combine)", True)

    def test(self) -> str:
        """The node id of the test this composition runs as."""
        return composed_test(self.composition)

    def reproduce(self, impl: str) -> str:
        steps = f",steps={self.steps}" if self.steps != STEPS else ""
        return f"pytest suites/multigpu --impl {impl} --case '{self.composition}{steps}'"

    def axes(self) -> str:
        """The axes that must combine, each with the values that fail."""
        return ", ".join(f"{axis}={'|'.join(values)}" for axis, values in self.values.items())

    def contains(self, labels: Mapping[str, str]) -> bool:
        """Whether a composition holds this finding: each of its axes at one of the failing values."""
        return all(labels.get(axis) in values for axis, values in self.values.items())


@dataclass(frozen=True)
class Exploration:
    """What one exploration ran and found."""

    impl: str = doc("the implementation explored (--impl)")
    triples: int = doc("compositions of the triples covering array run")
    searched: int = doc("compositions hypothesis drew and ran")
    unsupported: int = doc("compositions skipped because the implementation cannot run them (each with its reason)")
    explained: int = doc("compositions not run because they contain a finding already made")
    runs: int = doc("compositions run in all, shrinking included")
    seconds: float = doc("how long it took")
    findings: tuple[Finding, ...] = doc("the failures found, each shrunk")
    stopped_by: str = doc("what ended it: the number of compositions asked for, the time, or nothing left to try")
    expected: dict[str, str] = doc("the findings (by composition) the implementation's expectation list records, "
                                   "with its reason: known findings, which do not fail the run",
                                   default_factory=dict)
    seed: int | None = doc("hypothesis' seed, which also picks the triple the search starts at: the same seed, "
                           "example database and budget run the same compositions (--explore-seed); null when "
                           "hypothesis picked one", None)
    known_skipped: int = doc("compositions not run because the implementation's expectation list records them as "
                             "known failures", 0)
    asked: int | None = doc("compositions it was asked to draw (--explore); null for runs that did not record it",
                            None)
    budget: float | None = doc("the seconds it was given (--explore-seconds); null: no time bound, or not recorded",
                               None)

    def rerun(self) -> str:
        """The command that runs this search again: the same seed, budget and example database (the runs root's
        ``.explore/`` for the main job's) draw the same compositions."""
        parts = [f"pytest suites/multigpu --impl {self.impl} --explore {self.asked or 100}"]
        if self.budget is not None:
            parts.append(f"--explore-seconds {self.budget:g}")
        if self.seed is not None:
            parts.append(f"--explore-seed {self.seed}")
        return " ".join(parts)
