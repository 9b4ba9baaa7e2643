"""What a bisection found, as a run keeps it (``Results.bisection``) and ``python -m reports.bisect`` writes it:
records only, so the store reads them without the search."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Literal, Sequence

from datamodel import doc

Outcome = Literal["moved", "same", "unknown"]


@dataclass(frozen=True)
class Decision:
    """One commit's figure against the good commit's."""

    outcome: Outcome = doc("moved, same, or unknown (the runs allow neither)")
    ratio: float = doc("the candidate's level over the good commit's (each the geometric mean of its runs' medians)")
    interval: tuple[float, float] = doc("95% Student interval of the ratio, over runs (their pooled spread)")
    p_value: float = doc("two-sided, that the two levels are one (Student's t on the runs' log medians)")
    good: tuple[tuple[float, ...], ...] = doc("the good commit's rounds, run by run")
    candidate: tuple[tuple[float, ...], ...] = doc("the candidate's rounds, run by run")

    def describe(self) -> str:
        low, high = self.interval
        return (f"{self.outcome}: ratio {self.ratio:.4g} [{low:.4g}, {high:.4g}], p = {self.p_value:.2g}, "
                f"{len(self.good)} and {len(self.candidate)} runs")

    @property
    def good_median(self) -> float:
        return statistics.median(pooled(self.good))

    @property
    def candidate_median(self) -> float:
        return statistics.median(pooled(self.candidate))


def pooled(runs: Sequence[Sequence[float]]) -> list[float]:
    return [x for run in runs for x in run]


@dataclass(frozen=True)
class Trial:
    """One commit measured against the good one."""

    commit: str = doc("the commit measured")
    subject: str = doc("its subject line")
    decision: Decision | None = doc("moved, same or unknown against the good commit; null when it could not run")
    runs: int = doc("its benchmark runs that measured (as many of the good commit's were interleaved with "
                    "them); a run that failed is not counted")
    seconds: float = doc("wall time of its runs and the good commit's beside them")
    failed: str | None = doc("why it could not be measured (it is skipped), or null", None)


@dataclass(frozen=True)
class Bisection:
    """What the search found, and what it cost."""

    good: str = doc("the good commit")
    bad: str = doc("the bad commit")
    metric: str = doc("the figure")
    threshold: float = doc("the smallest relative move that counts")
    outcome: Literal["found", "no move", "unknown", "ambiguous"] = doc(
        "found: the first commit that moved the figure; no move: bad is the same as good; unknown: the ends "
        "could not be told apart within the budget; ambiguous: the first moved commit is one of several that "
        "could not be measured")
    first_moved: str | None = doc("the first commit that moved the figure; null unless found")
    subject: str | None = doc("its subject line")
    candidates: tuple[str, ...] = doc("with ambiguous: the commits it may be", ())
    several_steps: bool = doc("whether the figure moved again after the first moved commit (bad differs from it)",
                              False)
    trials: tuple[Trial, ...] = doc("every commit measured, in order: the bad end first", ())
    command: tuple[str, ...] = doc("the command that reproduces the search", ())

    @property
    def runs(self) -> int:
        """Benchmark runs of the commits measured (as many again of the good commit were interleaved)."""
        return sum(t.runs for t in self.trials)

    @property
    def skipped(self) -> tuple[Trial, ...]:
        return tuple(t for t in self.trials if t.failed is not None)
