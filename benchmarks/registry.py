"""One shape for every benchmark: what it measures and which metrics it gives.

A ``Benchmark`` is one registered unit. It declares its records (one
``Record`` per row, with every field described, from which reports/schema.md
is generated), how to run (on every rank, or once in the report's process),
and which metrics it contributes to the nightly comparison (each gated or
informative, with its direction). It returns records and nothing else: how
its section of the report looks is ``reports.render.sections``'. Adding a
benchmark is adding one module that defines one ``Benchmark``, naming it in
``benchmarks/__init__.py``'s list, and giving it a section there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .sampling import GATE_RULES
from .stats import Figure


@dataclass(frozen=True)
class Metric:
    """One figure a nightly comparison reads: ``figure`` holds its samples, or it is an exact count."""

    key: str
    unit: str
    better: str
    gated: bool
    figure: Figure | None = None
    count: float | None = None
    threshold: float | None = None
    """The practical threshold of this metric, when it is not the comparison's default."""
    sampling: dict | None = None
    """For a gated figure sampled to a target: the target, whether it was met, and the rounds taken."""

    def __post_init__(self) -> None:
        if (self.figure is None) == (self.count is None):
            raise ValueError(f"metric {self.key!r}: got figure={self.figure!r} and count={self.count!r}, "
                             "but should have exactly one of them")

    @property
    def value(self) -> float:
        return self.figure.median if self.figure is not None else float(self.count)

    def to_json(self) -> dict:
        data = {"value": self.value, "unit": self.unit, "better": self.better, "gated": self.gated,
                "exact": self.figure is None}
        if self.figure is not None:
            data["figure"] = self.figure.to_json()
        if self.threshold is not None:
            data["threshold"] = self.threshold
        if self.sampling is not None:
            data["sampling"] = self.sampling
        return data


@dataclass(frozen=True)
class Record:
    """The fields of one record of a benchmark, each with what it means (for reports/schema.md)."""

    fields: dict[str, str]

    def check(self, benchmark: str, rows: Sequence[dict]) -> None:
        """Every row has exactly the declared fields: what is written is what the schema says."""
        for i, row in enumerate(rows):
            got, want = set(row), set(self.fields)
            if got != want:
                raise ValueError(f"{benchmark} record {i}: got fields {sorted(got)}, but should be "
                                 f"{sorted(want)} (missing {sorted(want - got)}, extra {sorted(got - want)})")


@dataclass(frozen=True)
class Benchmark:
    name: str
    """The key of its records in results.json."""
    title: str
    """The heading of its report section."""
    record: Record
    run: Callable[..., list[dict]]
    """``run(ctx, settings)`` on every rank (``on_ranks``), or ``run(settings)`` once: the records."""
    metrics: Callable[[list[dict]], list[Metric]]
    on_ranks: bool = True
    summary: str = ""
    """One paragraph for the report: what is measured, how, and what to read from it."""

    def records_of(self, results: dict) -> list[dict]:
        return results.get(self.name) or []


# Absolute times and bandwidths move with the machine's state from one run to the next, whatever the
# code: back-to-back runs of one commit on a shared 2-core host moved their medians by a median 11-24%
# (reports/gate_check.py). They are informative, with this practical threshold; what is gated is measured
# side by side in one run (ratios, efficiencies) or counted.
ABSOLUTE_THRESHOLD = 0.25


def gated(key: str, better: str, figure: Figure, rule: str, sampled: dict | None = None,
          target_key: str | None = None) -> Metric:
    """A gated metric under its gate rule (``benchmarks.sampling.GATE_RULES``): the rule's threshold, and what
    sampling achieved for it (``sampled``: a benchmark's sampling record; ``target_key``: its figure there).

    A figure whose calibrated sampling missed its target is too wide to gate by that rule: it is informative
    for this run, and the report says so and names what looked wrong on the machine."""
    entry = (sampled or {}).get("targets", {}).get(target_key) if target_key is not None else None
    sampling = None
    if sampled is not None:
        sampling = {"target": GATE_RULES[rule].target.label(), "rounds": sampled["rounds"],
                    "met": None if entry is None else entry["met"], "stopped": sampled["stopped"]}
    missed = sampling is not None and sampling["met"] is False and sampling["stopped"] != "fixed rounds"
    return Metric(key, figure.unit, better, not missed, figure=figure, threshold=GATE_RULES[rule].threshold,
                  sampling=sampling)


def absolute(key: str, figure: Figure) -> Metric:
    """An informative metric of an absolute time or bandwidth."""
    return Metric(key, figure.unit, figure.better, False, figure=figure, threshold=ABSOLUTE_THRESHOLD)


def figure_of(record: dict, name: str) -> Figure:
    """A figure stored in a record by ``Figure.to_json``."""
    return Figure.from_json(record[name])


def figures_json(**figures: Figure) -> dict[str, Any]:
    return {name: f.to_json() for name, f in figures.items()}
