"""Sampling calibrated to a target: rounds until each gated figure's interval is narrow enough, or time is up.

A fixed number of rounds is too few on a noisy machine and too many on a
quiet one. So a benchmark with gated figures samples as pyperf and asv do:

- **warm-up, calibrated**: rounds are run and dropped until the round's time
  settles (the median of the last ``SETTLE_WINDOW`` rounds within
  ``SETTLE_TOLERANCE`` of the median of the window before), at most
  ``max_warmup`` of them;
- **rounds, calibrated**: at least ``min_rounds``, then one at a time until
  the 95% interval of the median of every gated figure is inside its target
  (``GATE_RULES``), or the benchmark's time budget runs out, or
  ``max_rounds`` is reached.

``--smoke`` and an explicit ``--rounds`` fix the count instead. What was done
(rounds, warm-up, why sampling stopped, each target and whether it was met)
is recorded beside the figures. Every rank takes the same decisions: the
samples are the slowest rank's on every rank, and each decision is rank 0's,
broadcast over the control group.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Callable, Literal, Mapping

from datamodel import doc

from .stats import Figure

SETTLE_WINDOW = 3
SETTLE_TOLERANCE = 0.05


@dataclass(frozen=True)
class Target:
    """How narrow a figure's 95% interval of the median must be: a half-width, relative to the median or in the
    figure's own unit."""

    half_width: float
    kind: Literal["relative", "absolute"]

    def achieved(self, figure: Figure | None) -> float | None:
        """The interval's half-width in this target's terms; None when there is no interval yet, or no figure
        (refused so far)."""
        interval = figure.interval if figure is not None else None
        if interval is None:
            return None
        half = (interval[1] - interval[0]) / 2
        if self.kind == "absolute":
            return half
        return half / abs(figure.median) if figure.median else math.inf

    def met(self, figure: Figure | None) -> bool:
        got = self.achieved(figure)
        return got is not None and got <= self.half_width

    def label(self) -> str:
        return f"±{self.half_width:.0%}" if self.kind == "relative" else f"±{self.half_width:g}"


@dataclass(frozen=True)
class GateRule:
    """A gated figure's rule: the practical threshold a comparison uses, and the target its sampling aims for.
    The target is tighter than the threshold, so that a change the size of the threshold stands out of it."""

    threshold: float
    target: Target


GATE_RULES: Mapping[str, GateRule] = {
    "ratio": GateRule(0.03, Target(0.02, "relative")),
    "efficiency": GateRule(0.10, Target(0.03, "absolute")),
    "busbw_ratio": GateRule(0.10, Target(0.05, "relative")),
}
"""Ratios measured side by side (step time, harness): threshold 3%, target ±2%; overlap efficiencies: 0.10 and
±0.03 absolute; bus-bandwidth ratios of padded to unpadded buckets: 10% and ±5%. The rule: each threshold sits
above the run-to-run drift of the same code (``python -m selfcheck.gate_check`` measures it; docs/measurements/gate.md has
the figures that chose these), and each target inside its threshold."""


@dataclass(frozen=True)
class Sampling:
    """How one benchmark samples its rounds."""

    budget_s: float = 60.0
    """Seconds of calibrated rounds (warm-up not counted) before sampling stops, targets met or not."""
    min_rounds: int = 10
    max_rounds: int = 500
    fixed_rounds: int | None = None
    """A fixed count (smoke mode, --rounds): no calibration of the rounds."""
    fixed_warmup: int | None = None
    """A fixed warm-up (smoke mode: none); None calibrates it."""
    max_warmup: int = 20

    def __post_init__(self) -> None:
        for name in ("min_rounds", "max_rounds", "max_warmup"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: got {getattr(self, name)}, but should be at least 1")
        if self.fixed_rounds is not None and self.fixed_rounds < 1:
            raise ValueError(f"rounds: got {self.fixed_rounds}, but should be at least 1")
        if self.budget_s <= 0:
            raise ValueError(f"budget_s: got {self.budget_s}, but should be above 0 seconds")


Round = Callable[[int, bool], float]
"""``one_round(index, keep)``: run round ``index`` (its order may rotate with it), keep its samples when ``keep``,
and return the round's time (the sum of its timed steps), by which the warm-up settles."""


def rotating_round(ops: Mapping[str, Callable[[], float]], kept: Mapping[str, list[float]]) -> Round:
    """A round that times every op once, starting one op later each round so that none always runs first (on a
    warm cache, or right after another's traffic); each time goes to ``kept[name]`` when the round is kept."""
    names = list(ops)

    def one_round(index: int, keep: bool) -> float:
        shift = index % len(names)
        total = 0.0
        for name in names[shift:] + names[:shift]:
            seconds = ops[name]()
            total += seconds
            if keep:
                kept[name].append(seconds)
        return total

    return one_round


def settled(times: list[float], window: int = SETTLE_WINDOW, tolerance: float = SETTLE_TOLERANCE) -> bool:
    """Whether the last ``window`` round times agree with the ``window`` before them (medians within
    ``tolerance``)."""
    if len(times) < 2 * window:
        return False
    last = sorted(times[-window:])[window // 2]
    before = sorted(times[-2 * window: -window])[window // 2]
    return abs(last - before) <= tolerance * before


@dataclass(frozen=True)
class TargetOutcome:
    """What calibrated sampling reached for one gated figure."""

    target: str = doc("the target, e.g. ±2% (relative) or ±0.03 (absolute)")
    kind: Literal["relative", "absolute"] = doc("whether the target's half-width is relative to the median or in "
                                                "the figure's own unit")
    achieved: float | None = doc("the interval's half-width in the target's terms; null without an interval")
    met: bool = doc("whether the 95% interval ended inside the target")


Stop = Literal["targets met", "budget spent", "max rounds", "fixed rounds"]
"""Why a benchmark's sampling stopped."""


@dataclass(frozen=True)
class Sampled:
    """How a benchmark's rounds were taken, recorded beside its figures."""

    rounds: int = doc("rounds kept")
    warmup: int = doc("rounds run and dropped first")
    warmup_settled: bool | None = doc("whether the round time settled within the warm-up; null when it was fixed")
    stopped: Stop = doc("why sampling stopped: targets met, budget spent, max rounds or fixed rounds")
    seconds: float = doc("seconds the kept rounds took")
    budget_s: float = doc("seconds the calibrated rounds were allowed")
    targets: dict[str, TargetOutcome] = doc("each gated figure's target and whether it was met")
    launches: int = doc("sets of fresh rank processes the rounds came from, each carrying on the rounds of those "
                        "before it (the counts and seconds above are their sums; the targets, the last launch's, "
                        "judged on every round)", 1)

    @property
    def targets_met(self) -> bool:
        return all(t.met for t in self.targets.values())


def sample(ctx, sampling: Sampling, one_round: Round,
           gated: Callable[[], Mapping[str, tuple[Figure | None, Target]]]) -> Sampled:
    """Warm up, then run rounds until ``gated()``'s figures meet their targets (or the budget or ``max_rounds``
    ends it, or the count is fixed); what was done, for the records.

    A gated figure refused so far (None: its denominator still within its noise, say) has not met its target:
    more rounds are what may make it measurable, so they go on within the budget.
    """
    warmup, warm_times = 0, []
    if sampling.fixed_warmup is not None:
        for index in range(sampling.fixed_warmup):
            one_round(index, False)
        warmup, is_settled = sampling.fixed_warmup, None
    else:
        is_settled = False
        while warmup < sampling.max_warmup and not is_settled:
            warm_times.append(one_round(warmup, False))
            warmup += 1
            is_settled = _agree(ctx, settled(warm_times))
    start = time.monotonic()
    rounds, stopped = 0, ""
    while not stopped:
        one_round(warmup + rounds, True)
        rounds += 1
        if sampling.fixed_rounds is not None:
            stopped = "fixed rounds" if rounds >= sampling.fixed_rounds else ""
        elif rounds >= sampling.min_rounds:
            stop = ("targets met" if all(target.met(figure) for figure, target in gated().values())
                    else "budget spent" if time.monotonic() - start >= sampling.budget_s
                    else "max rounds" if rounds >= sampling.max_rounds else "")
            stopped = STOPS[_agree(ctx, STOPS.index(stop))]
    targets = {key: TargetOutcome(target.label(), target.kind, _compact(target.achieved(figure)), target.met(figure))
               for key, (figure, target) in gated().items()}
    return Sampled(rounds, warmup, is_settled, stopped, round(time.monotonic() - start, 3), sampling.budget_s,
                   targets)


STOPS = ("", "targets met", "budget spent", "max rounds")
"""What each rank may propose after a round, agreed by index; "" goes on sampling."""


def launch_target(target: Target, launch: int, launches: int) -> Target:
    """What launch ``launch`` of ``launches`` samples the rounds so far to: wider than ``target`` by
    sqrt(launches / launch), where the launches still to come, as many rounds again each, would bring the
    interval to ``target``; the last launch samples to ``target`` itself."""
    return Target(target.half_width * math.sqrt(launches / launch), target.kind)


def carried(earlier: Sampled | None, own: Sampled) -> Sampled:
    """A launch's sampling record counting the launches before it (``earlier``, None for the first), whose rounds
    its figures carry on."""
    if earlier is None:
        return own
    settled_both = (None if None in (earlier.warmup_settled, own.warmup_settled)
                    else earlier.warmup_settled and own.warmup_settled)
    return replace(own, rounds=earlier.rounds + own.rounds, warmup=earlier.warmup + own.warmup,
                   warmup_settled=settled_both, seconds=round(earlier.seconds + own.seconds, 3),
                   budget_s=earlier.budget_s + own.budget_s, launches=earlier.launches + 1)


def rounds_left(sampling: Sampling, kept: int, elapsed: float) -> float:
    """Seconds of rounds still to come at most: the fixed count's, or what is left of the budget (the
    minimum rounds' time when that is more)."""
    per_round = elapsed / max(kept, 1)
    if sampling.fixed_rounds is not None:
        return per_round * max(sampling.fixed_rounds - kept, 0)
    return max(sampling.budget_s - elapsed, per_round * max(sampling.min_rounds - kept, 0), 0.0)


class RoundProgress:
    """A progress line for rounds being kept: '<what>: round 7, about 12 s left', a line a second at most."""

    def __init__(self, report: Callable[[str], None], what: str, sampling: Sampling, every_s: float = 1.0) -> None:
        self.report, self.what, self.sampling, self.every_s = report, what, sampling, every_s
        self.start: float | None = None
        self.last = -float("inf")

    def __call__(self, kept: int, round_s: float) -> None:
        now = time.monotonic()
        if self.start is None:
            self.start = now - round_s
        if now - self.last >= self.every_s:
            self.last = now
            left = rounds_left(self.sampling, kept, now - self.start)
            self.report(f"{self.what}: round {kept}, about {left:.0f} s left")


def _compact(value: float | None) -> float | None:
    return None if value is None else float(f"{value:.4g}")


def _agree(ctx, value):
    """Rank 0's decision on every rank (``RankContext.agree``); alone (no context) it is this process's."""
    return value if ctx is None else ctx.agree(value)
