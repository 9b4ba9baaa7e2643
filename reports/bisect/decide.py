"""Did a commit move a figure? Three answers, as Chromium's Pinpoint gives them: *moved*, *same*, or *unknown*
(measure more).

The candidate's runs are compared with the good commit's, measured side by side (interleaved runs on the same
machine, so its drift falls on both). Each run is a process with a level of its own (pyperf's reason for many
processes): two runs of the same code in one pair here differed by 8.5%, far beyond the spread of either's
rounds. So the run, not the round, is the unit of the interval: the effect is the ratio of the pooled medians,
candidate over good, with a 95% interval from a two-level bootstrap (runs resampled, then each run's rounds), and
no answer comes from fewer than ``MIN_RUNS`` runs a side:

- **moved**: Mann-Whitney's U on the pooled rounds is significant at ``alpha``, the ratio lies beyond the practical
  threshold and its interval beyond half of it, on the same side;
- **same**: the interval lies wholly within the threshold (the data rule out a move of that size);
- **unknown**: neither, or too few runs; more runs narrow the interval.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np
from scipy import stats

from datamodel import doc

ALPHA = 0.05
MIN_RUNS = 2
RESAMPLES = 2000
Outcome = Literal["moved", "same", "unknown"]


@dataclass(frozen=True)
class Decision:
    """One commit's figure against the good commit's."""

    outcome: Outcome = doc("moved, same, or unknown (the runs allow neither)")
    ratio: float = doc("the candidate's median over the good commit's, every round of every run pooled")
    interval: tuple[float, float] = doc("95% two-level bootstrap interval of the ratio (runs, then rounds)")
    p_value: float = doc("Mann-Whitney's U on the pooled rounds, two-sided")
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


def decide(good: Sequence[Sequence[float]], candidate: Sequence[Sequence[float]], threshold: float,
           alpha: float = ALPHA, seed: int = 0) -> Decision:
    """The three-way answer for ``candidate``'s runs against ``good``'s (each run its rounds); ``threshold``: the
    smallest relative move that matters (0.05: 5%)."""
    if not 0 < threshold < 1:
        raise ValueError(f"threshold: got {threshold}, but should be between 0 and 1")
    if not good or not candidate or any(len(run) < 1 for run in (*good, *candidate)):
        raise ValueError(f"runs: got {len(good)} and {len(candidate)}, but should be at least one a side, each with "
                         "its rounds")
    good_all, candidate_all = pooled(good), pooled(candidate)
    ratio = statistics.median(candidate_all) / statistics.median(good_all)
    low, high = _interval(good, candidate, seed)
    p_value = float(stats.mannwhitneyu(good_all, candidate_all, alternative="two-sided").pvalue) \
        if min(len(good_all), len(candidate_all)) >= 2 else 1.0
    enough = min(len(good), len(candidate)) >= MIN_RUNS
    if enough and p_value < alpha and abs(ratio - 1) > threshold and (low > 1 + threshold / 2 or
                                                                       high < 1 - threshold / 2):
        outcome: Outcome = "moved"
    elif enough and 1 - threshold < low and high < 1 + threshold:
        outcome = "same"
    else:
        outcome = "unknown"
    return Decision(outcome, ratio, (low, high), p_value, tuple(map(tuple, good)), tuple(map(tuple, candidate)))


def _interval(good: Sequence[Sequence[float]], candidate: Sequence[Sequence[float]], seed: int) -> tuple[float, float]:
    """Percentile interval of the ratio of pooled medians over ``RESAMPLES`` two-level resamples."""
    rng = np.random.default_rng(seed)
    sides = [[np.asarray(run, float) for run in side] for side in (candidate, good)]
    ratios = np.empty(RESAMPLES)
    for i in range(RESAMPLES):
        medians = []
        for runs in sides:
            picked = [runs[j] for j in rng.integers(0, len(runs), len(runs))]
            medians.append(np.median(np.concatenate([rng.choice(run, len(run)) for run in picked])))
        ratios[i] = medians[0] / medians[1]
    return float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5))
