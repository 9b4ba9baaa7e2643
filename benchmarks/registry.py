"""One shape for every benchmark: what it measures and which metrics it gives.

A ``Benchmark`` is one registered unit. It declares its record type (a
frozen dataclass, one per row, every field described, from which
reports/schema.md is generated; records are built by keyword), where its
measuring lives and how it runs (on every rank, or once in the report's
process), and which metrics it contributes to the nightly comparison (each
gated or informative, with its direction). It returns records and nothing
else: how its section of the report looks is ``reports.render.sections``'.

A benchmark is two modules: ``benchmarks/<name>.py``, its definition (record,
metrics, ``Benchmark``), which imports nothing heavy, so that a run is read
with the standard library, numpy and scipy alone; and
``benchmarks/measuring/<name>.py``, its measuring, which needs torch. Adding
one takes more than these two (its budget, its section, the schema, the docs):
the checklist is docs/extending.md, "(c) A benchmark".
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Literal, Sequence

from datamodel import doc

from .sampling import GATE_RULES, Sampled, Stop
from .stats import Figure

Better = Literal["higher", "lower"]


@dataclass(frozen=True)
class MetricSampling:
    """For a gated figure sampled to a target: what the sampling achieved for it."""

    target: str = doc("the target its 95% interval aimed for, e.g. ±2%")
    rounds: int = doc("rounds taken")
    met: bool | None = doc("whether the interval ended inside the target; null when the figure had no target entry")
    stopped: Stop = doc("why sampling stopped: targets met, budget spent, max rounds, fixed rounds")


@dataclass(frozen=True)
class Metric:
    """One figure a nightly comparison reads: ``figure`` holds its samples, or it is an exact count."""

    value: float = doc("the figure's median, or the exact count")
    unit: str = doc("unit of the value")
    better: Better = doc("higher or lower")
    gated: bool = doc("true: a significant regression beyond the threshold fails the job; false: informative")
    exact: bool = doc("true for counts (any move in the bad direction counts); false for sampled figures")
    figure: Figure | None = doc("the figure the value came from; null for counts (and for the runs written before "
                                "figures kept their samples)", None)
    threshold: float | None = doc("the metric's own practical threshold (absolute times and bandwidths: 0.25; "
                                  "gated figures: their gate rule's, benchmarks/sampling.py), which a comparison "
                                  "uses instead of its default; null: the default", None)
    sampling: MetricSampling | None = doc("for a gated figure sampled to a target: how it was sampled", None)

    @classmethod
    def count(cls, value: float, unit: str, better: str, gated: bool) -> Metric:
        return cls(float(value), unit, better, gated, exact=True)

    @classmethod
    def of(cls, figure: Figure, gated: bool, threshold: float | None = None,
           sampling: MetricSampling | None = None) -> Metric:
        return cls(figure.median, figure.unit, figure.better, gated, False, figure, threshold, sampling)


@dataclass(frozen=True)
class Benchmark:
    name: str
    """The key of its records in results.json."""
    title: str
    """The heading of its report section."""
    record: type
    """The frozen dataclass of one record: its fields, each with its meaning (reports/schema.md)."""
    runner: str
    """Where its measuring lives, ``module:function``, imported only to measure (it needs torch; reading the
    records never does): ``function(ctx, settings)`` on every rank (``on_ranks``), or ``function(settings)``
    once, returning the records."""
    metrics: Callable[[Sequence[Any]], dict[str, Metric]]
    on_ranks: bool = True
    relaunched: bool = False
    """Measured again on fresh ranks, ``BenchSettings.launches`` times in all, each launch carrying on the rounds
    of those before it: its runner also takes the records so far (``function(ctx, settings, earlier)``)."""

    def run(self, *args: Any) -> list:
        module, _, function = self.runner.partition(":")
        return getattr(importlib.import_module(module), function)(*args)

    def check(self, records: Sequence[Any]) -> None:
        """Every record is of the declared type: what is written is what the schema says."""
        for i, record in enumerate(records):
            if not isinstance(record, self.record):
                raise TypeError(f"{self.name} record {i}: got a {type(record).__name__}, but should be a "
                                f"{self.record.__name__}")


@dataclass(frozen=True)
class BenchmarkFault:
    """A benchmark that raised: its records are left out, and on the ranks nothing after it ran (another rank may
    have been inside a collective), so that what finished before it is still written and judged."""

    benchmark: str = doc("the benchmark's name")
    rank: int | None = doc("the rank it raised on; null for a benchmark that runs in one process")
    error: str = doc("the exception's type and message, cut at 500 characters")
    skipped: tuple[str, ...] = doc("the benchmarks that did not run after it on that rank")
    relaunch: int | None = doc("for the relaunched benchmarks (step time): the launch that failed, whose rounds are "
                               "left out (the earlier launches' are kept); null otherwise", None)
    recovered: bool = doc("a rank died of a signal in it (a crash below Python), and it ran again on fresh ranks "
                          "to its end: its records are that run's, and the verdict reports the crash without "
                          "failing on it", False)

    @classmethod
    def of(cls, benchmark: str, rank: int | None, exc: BaseException, skipped: Sequence[str] = (),
           relaunch: int | None = None) -> BenchmarkFault:
        """The fault, its message the exception's last line first (a rank's traceback ends with what raised)."""
        text = str(exc).strip()
        last = text.splitlines()[-1] if text else ""
        message = f"{type(exc).__name__}: {last}" + (f" ({text[:300]})" if last != text else "")
        return cls(benchmark, rank, message[:500], tuple(skipped), relaunch)


ABSOLUTE_THRESHOLD = 0.25
"""Absolute times and bandwidths move with the machine's state from one run to the next, whatever the code
(docs/measurements/gate.md measures how much): they are informative, with this practical threshold; what is gated is
measured side by side in one run (ratios, efficiencies) or counted."""


def gated(figure: Figure, rule: str, sampled: Sampled | None = None, target_key: str | None = None) -> Metric:
    """A gated metric under its gate rule (``benchmarks.sampling.GATE_RULES``): the rule's threshold, and what
    sampling achieved for it (``sampled``: a benchmark's sampling record; ``target_key``: its figure there).

    A figure whose calibrated sampling missed its target is too wide to gate by that rule: it is informative
    for this run, and the report says so and names what looked wrong on the machine."""
    sampling = None
    if sampled is not None:
        entry = sampled.targets.get(target_key) if target_key is not None else None
        sampling = MetricSampling(GATE_RULES[rule].target.label(), sampled.rounds,
                                  None if entry is None else entry.met, sampled.stopped)
    missed = sampling is not None and sampling.met is False and sampling.stopped != "fixed rounds"
    return Metric.of(figure, not missed, GATE_RULES[rule].threshold, sampling)


def absolute(figure: Figure) -> Metric:
    """An informative metric of an absolute time or bandwidth."""
    return Metric.of(figure, False, ABSOLUTE_THRESHOLD)


def informative(figure: Figure) -> Metric:
    """An informative metric with the comparison's default threshold."""
    return Metric.of(figure, False)
