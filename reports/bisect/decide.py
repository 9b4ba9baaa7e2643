"""Did a commit move a figure? Three answers, as Chromium's Pinpoint gives them: *moved*, *same*, or *unknown*
(measure more).

The candidate's runs are compared with the good commit's, measured side by side (interleaved runs on the same
machine, so its drift falls on both). Each run is a process with a level of its own (pyperf's reason for many
processes): two runs of the same code may differ far beyond the spread of either's rounds. So the run, not the
round, is the unit: a run's level is the median of its rounds, and the effect is the ratio of the two sides' mean
levels (on a log scale), with a 95% Student interval whose spread is the runs' own around their side's mean,
pooled over both sides (a commit's spread between runs is the machine's and the benchmark's, not the commit's:
the good commit, measured beside every commit of a search, supplies most of it), and never narrower than what
the rounds of a run leave uncertain about its level. One run of the candidate is enough once the good commit has
several; one run each is refused (no spread to judge by):

- **moved**: the interval excludes no move (p < ``alpha``), the ratio lies beyond the practical threshold and the
  interval beyond half of it, on the same side;
- **same**: the interval lies wholly within the threshold (the data rule out a move of that size);
- **unknown**: neither; more runs narrow the interval.
"""

from __future__ import annotations

import math
import statistics
from typing import Sequence

import numpy as np

from ..store.bisection import Decision, Outcome, pooled

ALPHA = 0.05
def decide(good: Sequence[Sequence[float]], candidate: Sequence[Sequence[float]], threshold: float,
           alpha: float = ALPHA) -> Decision:
    """The three-way answer for ``candidate``'s runs against ``good``'s (each run its rounds); ``threshold``: the
    smallest relative move that matters (0.05: 5%)."""
    from scipy import stats

    if not 0 < threshold < 1:
        raise ValueError(f"threshold: got {threshold}, but should be between 0 and 1")
    if not good or not candidate or any(len(run) < 1 for run in (*good, *candidate)):
        raise ValueError(f"runs: got {len(good)} and {len(candidate)}, but should be at least one a side, each with "
                         "its rounds")
    if any(x <= 0 or not math.isfinite(x) for x in (*pooled(good), *pooled(candidate))):
        raise ValueError("rounds: got a value that is not a positive number, but a ratio needs positive figures")
    if not decidable(good, candidate):
        raise ValueError("runs: got one a side, but at least one side needs two: one run each leaves no spread "
                         "between runs to judge by")
    sides = [np.log([np.median(run) for run in side]) for side in (good, candidate)]
    effect = float(sides[1].mean() - sides[0].mean())
    df = sum(len(side) - 1 for side in sides)
    frozen = tuple(map(tuple, good)), tuple(map(tuple, candidate))
    between = math.sqrt(sum(float(((side - side.mean()) ** 2).sum()) for side in sides) / df)
    spread = max(between, _level_uncertainty((*good, *candidate)))
    se = spread * math.sqrt(1 / len(sides[0]) + 1 / len(sides[1]))
    reach = float(stats.t.ppf(1 - alpha / 2, df)) * se
    low, high = math.exp(effect - reach), math.exp(effect + reach)
    p_value = float(2 * stats.t.sf(abs(effect) / se, df)) if se > 0 else (1.0 if effect == 0 else 0.0)
    ratio = math.exp(effect)
    if p_value < alpha and abs(ratio - 1) > threshold and (low > 1 + threshold / 2 or high < 1 - threshold / 2):
        outcome: Outcome = "moved"
    elif 1 - threshold < low and high < 1 + threshold:
        outcome = "same"
    else:
        outcome = "unknown"
    return Decision(outcome, ratio, (low, high), p_value, *frozen)


def decidable(good: Sequence[Sequence[float]], candidate: Sequence[Sequence[float]]) -> bool:
    """Whether the runs show a spread between runs to judge by: one side has two or more."""
    return max(len(good), len(candidate)) >= 2


def _level_uncertainty(runs: Sequence[Sequence[float]]) -> float:
    """The standard error a typical run's rounds leave on its log median (normal approximation, from the rounds'
    interquartile range): a floor for the spread between runs, which two runs that agree by chance underestimate."""
    errors = []
    for run in runs:
        logs = np.log(run)
        if len(logs) >= 4:
            q1, q3 = np.percentile(logs, [25, 75])
            errors.append(1.2533 * (q3 - q1) / 1.349 / math.sqrt(len(logs)))
    return statistics.median(errors) if errors else 0.0
