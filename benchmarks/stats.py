"""A timed figure as repeated samples, and what the report says of it: median, interval, spread.

Every timed figure is measured as independent samples (rounds after a
warm-up, the same number on every rank). ``Figure`` keeps them (compactly,
6 significant digits, so a later comparison can test them) and derives:

- the median and a distribution-free 95% confidence interval of the median
  (``scipy.stats.quantile_test``; undefined below 6 samples);
- the spread: the interquartile range, relative to the median for
  quantities (times, bandwidths, ratios), absolute for efficiencies, which
  may sit near zero;
- ``unstable``: the spread exceeds ``UNSTABLE_LIMITS`` (pyperf warns at a
  standard deviation over 10% of the mean; this is its robust cousin).

Nothing here is computed by hand: scipy does the statistics.
"""

from __future__ import annotations

import math
from functools import cached_property
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from datamodel import doc

CONFIDENCE = 0.95
MIN_INTERVAL_SAMPLES = 6
"""The fewest samples from which quantile_test gives a finite 95% interval of the median."""
UNSTABLE_LIMITS = {"relative": 0.10, "absolute": 0.05}
UNSTABLE_MARK = "†"
UNSTABLE_FOOTNOTE = (f"{UNSTABLE_MARK} unstable: the samples' interquartile range passes "
                     f"{UNSTABLE_LIMITS['relative']:.0%} of the median ({UNSTABLE_LIMITS['absolute']:g} absolute "
                     "for efficiencies); read the figure as noise-bound.")
BETTER = ("higher", "lower")


def compact(value: float) -> float:
    """6 significant digits: samples stay exact enough to test and small enough to keep."""
    return float(f"{value:.6g}") if math.isfinite(value) else value


@dataclass(frozen=True)
class Figure:
    """One timed figure: its samples and what they mean."""

    samples: tuple[float, ...]
    unit: str
    better: str
    spread_kind: str = "relative"

    def __post_init__(self) -> None:
        if self.better not in BETTER:
            raise ValueError(f"better: got {self.better!r}, but should be one of {BETTER}")
        if self.spread_kind not in UNSTABLE_LIMITS:
            raise ValueError(f"spread_kind: got {self.spread_kind!r}, but should be one of {tuple(UNSTABLE_LIMITS)}")
        if not self.samples:
            raise ValueError("samples: got none, but a figure needs at least one")
        object.__setattr__(self, "samples", tuple(compact(float(s)) for s in self.samples))

    @classmethod
    def of(cls, samples: Iterable[float], unit: str, better: str, spread_kind: str = "relative") -> Figure:
        return cls(tuple(samples), unit, better, spread_kind)

    @property
    def n(self) -> int:
        return len(self.samples)

    @cached_property
    def median(self) -> float:
        return float(np.median(self.samples))

    @cached_property
    def interval(self) -> tuple[float, float] | None:
        """95% confidence interval of the median; None when there are too few samples for one. Computed once:
        sampling and the refusal rules ask for it again and again."""
        if self.n < 2 or not all(math.isfinite(s) for s in self.samples):
            return None
        from scipy import stats  # here, not at the top: a reader of stored runs needs no scipy (1 s to import)

        ci = stats.quantile_test(np.asarray(self.samples), q=self.median, p=0.5).confidence_interval(CONFIDENCE)
        if not (math.isfinite(ci.low) and math.isfinite(ci.high)):
            return None
        return float(ci.low), float(ci.high)

    @property
    def bounds(self) -> tuple[float, float]:
        """The interval, or the median at both ends when there is none: what a plot draws and a comparison of
        two figures' ranges reads."""
        return self.interval or (self.median, self.median)

    @cached_property
    def iqr(self) -> float:
        """Interquartile range, in the figure's unit."""
        from scipy import stats

        return float(stats.iqr(self.samples))

    @property
    def spread(self) -> float:
        """Interquartile range; relative to |median| for quantities."""
        if self.spread_kind == "absolute":
            return self.iqr
        return self.iqr / abs(self.median) if self.median else math.inf

    @property
    def unstable(self) -> bool:
        return not self.spread <= UNSTABLE_LIMITS[self.spread_kind]

    def to_json(self) -> dict:
        interval = self.interval
        return {
            "median": compact(self.median),
            "ci_low": None if interval is None else compact(interval[0]),
            "ci_high": None if interval is None else compact(interval[1]),
            "spread": compact(self.spread),
            "spread_kind": self.spread_kind,
            "unstable": self.unstable,
            "n": self.n,
            "unit": self.unit,
            "better": self.better,
            "samples": list(self.samples),
        }

    @classmethod
    def json_schema(cls) -> dict:
        """What ``to_json`` writes, as JSON Schema: what is read back (the samples, unit, better, spread kind)
        and what they derive, each with its meaning."""
        number, nullable = {"type": "number"}, {"type": ["number", "null"]}
        properties = {
            "median": (number, "median of the samples"),
            "ci_low": (nullable, "distribution-free 95% confidence interval of the median (scipy.stats."
                                 "quantile_test), its low end; null below 6 samples"),
            "ci_high": (nullable, "the interval's high end"),
            "spread": (number, "interquartile range, over |median| when spread_kind is relative"),
            "spread_kind": ({"enum": list(UNSTABLE_LIMITS)}, "relative (quantities) or absolute (efficiencies)"),
            "unstable": ({"type": "boolean"}, "spread beyond " + " / ".join(
                f"{v:g} ({k})" for k, v in UNSTABLE_LIMITS.items())),
            "n": ({"type": "integer"}, "number of samples"),
            "unit": ({"type": "string"}, "unit"),
            "better": ({"enum": list(BETTER)}, "higher or lower"),
            "samples": ({"type": "array", "items": number, "minItems": 1},
                        "every sample, 6 significant digits (what is read back: the rest is derived from them)"),
        }
        return {"type": "object", "description": "A timed figure, built from its samples (benchmarks/stats.py).",
                "properties": {k: {**schema, "description": text} for k, (schema, text) in properties.items()},
                "required": ["samples", "unit", "better"]}

    @classmethod
    def from_json(cls, data: dict) -> Figure:
        return cls(tuple(data["samples"]), data["unit"], data["better"], data.get("spread_kind", "relative"))

    def summary(self) -> Summary:
        return Summary(compact(self.median), None if self.interval is None else tuple(map(compact, self.interval)),
                       self.unstable)


@dataclass(frozen=True)
class Summary:
    """What a table shows of a figure, kept where its samples are not (a comparison's earlier run)."""

    median: float = doc("median of the samples")
    interval: tuple[float, float] | None = doc("95% interval of the median; null below 6 samples")
    unstable: bool = doc("whether the samples' spread passes its limit")


def describe(figure: Figure | Summary, digits: int = 4) -> str:
    """``median [low, high]``, marked when unstable (``UNSTABLE_FOOTNOTE`` says what the mark means): one cell."""
    fmt = f"{{:.{digits}g}}"
    text = fmt.format(figure.median)
    interval = figure.interval
    text += f" [{fmt.format(interval[0])}, {fmt.format(interval[1])}]" if interval else " [n<6]"
    return text + (f" {UNSTABLE_MARK}" if figure.unstable else "")
