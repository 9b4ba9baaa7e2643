"""Figures a setup cannot give, and values that cannot be: refused with the reason, never a number.

Two kinds of refusal, recorded beside the figure they replace (a record's
``refused``); a refused figure is null, and is never gated, trended, plotted
or given a claims verdict:

- **not measurable here**: the figure has no denominator in this setup. At
  one rank nothing crosses a bus (``lone_rank``); in general, a ratio or an
  efficiency whose denominator cannot be told from its own noise
  (``noise_bound``): its median is not above zero, its 95% interval reaches
  zero, or it is smaller than its own interquartile range.
- **measurement failure**: the samples say something impossible happened
  (``outside``, ``below_zero``), or something noise could explain: an
  efficiency outside [0, 1] whose steps' intervals overlap, an overlapped
  step faster than compute alone beyond noise. The figure is not reported,
  and what to try is named.
- **finding**: the figure has no meaning because the machine did something
  real that the figure's model leaves out (``costs_more``): an overlapped
  step slower than the serial one, their intervals apart, is no efficiency
  but a fact about this machine, said with both steps and the difference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from datamodel import doc

from .stats import Figure

NOT_MEASURABLE = "not measurable here"
FAILURE = "measurement failure"
FINDING = "finding"
REMEDY = ("more rounds (a larger --budget for it), a quieter node, or the benchmark alone "
          "(--benchmark {benchmark})")


@dataclass(frozen=True)
class Refusal:
    """Why a figure is not given."""

    kind: str = doc(f"{NOT_MEASURABLE}, {FAILURE} or {FINDING}")
    why: str = doc("what made it so, with the numbers")
    remedy: str = doc("what to try (measurement failures only)", "")
    rule: str = doc("the test that refused it, without the numbers: the refusals of one benchmark under one rule "
                    "read as one line; empty: the reason stands alone", "")

    def __str__(self) -> str:
        """One line for a table cell or a claim: 'measurement failure: ...; try ...'."""
        return f"{self.kind}: {self.why}" + (f"; try {self.remedy}" if self.remedy else "")


def lone_rank(world_size: int, what: str) -> Refusal | None:
    """At one rank a figure about communication ``what`` (e.g. "to hide") has no denominator."""
    if world_size == 1:
        return Refusal(NOT_MEASURABLE, f"one rank: nothing is communicated, so there is no communication {what}",
                       rule="one rank")
    return None


def noise_bound(denominator: Sequence[float], what: str, unit: str) -> Refusal | None:
    """Why ``denominator`` (per-round samples of ``what``, in ``unit``) cannot divide anything, or None."""
    figure = Figure.of(denominator, unit, "lower")
    if figure.median <= 0:
        return Refusal(NOT_MEASURABLE, f"{what} = {shown(figure.median, unit)}: not above zero",
                       rule=f"{what} not above zero")
    interval = figure.interval
    if interval is not None and interval[0] <= 0:
        return Refusal(NOT_MEASURABLE, f"{what}'s 95% interval reaches zero ({shown(interval[0], unit)} to "
                                       f"{shown(interval[1], unit)})", rule=f"{what}'s 95% interval reaches zero")
    if figure.n > 1 and figure.median < figure.iqr:
        return Refusal(NOT_MEASURABLE, f"{what} = {shown(figure.median, unit)}, below its own spread "
                                       f"(IQR {shown(figure.iqr, unit)})", rule=f"{what} below its own spread")
    return None


def outside(figure: Figure, low: float, high: float, what: str, benchmark: str, below: str = "", above: str = ""
            ) -> Refusal | None:
    """A measurement failure when ``figure``'s median lies outside [low, high], where the quantity has no
    meaning; ``below`` and ``above`` say what such a value means on either side."""
    if low <= figure.median <= high:
        return None
    meaning = below if figure.median < low else above
    return Refusal(FAILURE, f"{what} = {figure.median:.3g}, outside [{low:g}, {high:g}]" + (f" ({meaning})"
                                                                                           if meaning else ""),
                   REMEDY.format(benchmark=benchmark), rule=f"{what} outside [{low:g}, {high:g}]")


def below_zero(difference: Figure, what: str, benchmark: str) -> Refusal | None:
    """A measurement failure when ``difference`` (per-round samples of ``what``) is below zero beyond noise: its
    whole interval under zero."""
    interval = difference.interval
    if interval is None or interval[1] >= 0:
        return None
    return Refusal(FAILURE, f"{what} was below zero beyond noise (95% interval {shown(interval[0], difference.unit)} "
                            f"to {shown(interval[1], difference.unit)}), which cannot happen",
                   REMEDY.format(benchmark=benchmark), rule=f"{what} below zero beyond noise")


def costs_more(overlap: Figure, serial: Figure) -> Refusal | None:
    """A finding when the overlapped step's 95% interval lies wholly above the serial step's: overlapping cost more
    than it hid, beyond noise."""
    low, high = overlap.interval, serial.interval
    if low is None or high is None or low[0] <= high[1]:
        return None
    difference = overlap.median - serial.median
    return Refusal(FINDING, f"overlapping costs more than it hides here: the overlapped step took "
                            f"{_step(overlap)} against {_step(serial)} serial, {shown(difference, 's')} more "
                            "(intervals apart)", rule="overlapping costs more than it hides")


def _step(figure: Figure) -> str:
    """A step in seconds as 'median [low, high] ms'."""
    low, high = figure.interval
    return f"{figure.median * 1e3:.4g} [{low * 1e3:.4g}, {high * 1e3:.4g}] ms"


def ratio(numerators: Sequence[float], denominators: Sequence[float], better: str, what: str, unit: str
          ) -> tuple[Figure | None, Refusal | None]:
    """Per-round ratios of two figures measured side by side (the denominators ``what``, in ``unit``), or None with
    why the denominator cannot divide."""
    if len(numerators) != len(denominators):
        raise ValueError(f"ratio: got {len(numerators)} and {len(denominators)} samples, but should be one pair per "
                         "round")
    refused = noise_bound(denominators, what, unit)
    if refused:
        return None, refused
    return Figure.of([a / b for a, b in zip(numerators, denominators)], "x", better), None


def shown(value: float, unit: str) -> str:
    """Seconds read as ms; other units as they are."""
    return f"{value * 1e3:.3g} ms" if unit == "s" else f"{value:.3g} {unit}".rstrip()
