"""Which metric a refused figure would have been: a refused figure is null and gives no metric, so a history
chart has a gap there, and the gap says why.

A benchmark's ``metrics`` is the one place that names its keys; so the key of
a refused record is found by asking it: the record with a stand-in for each
of its null figures gives the keys the refusal took away.
"""

from __future__ import annotations

import dataclasses
import typing
from functools import cache
from typing import Any

from benchmarks import BENCHMARKS
from benchmarks.measurable import Refusal
from benchmarks.stats import Figure

from ..store.model import Results

STAND_IN = Figure.of([1.0, 1.0, 1.0], "", "higher")


@cache
def _figure_fields(record_type: type) -> tuple[str, ...]:
    hints = typing.get_type_hints(record_type)
    return tuple(f.name for f in dataclasses.fields(record_type)
                 if hints[f.name] is Figure or Figure in typing.get_args(hints[f.name]))


def _filled(record: Any) -> Any:
    """The record as if nothing had been refused: each null figure a stand-in."""
    nulls = {name: STAND_IN for name in _figure_fields(type(record)) if getattr(record, name) is None}
    return dataclasses.replace(record, refused=None, **nulls)


def refused_keys(results: Results) -> dict[str, Refusal]:
    """metric key -> the refusal that took it away, for every refused record of the run."""
    found: dict[str, Refusal] = {}
    for benchmark in BENCHMARKS:
        records = list(results.records(benchmark.name))
        refused = [i for i, r in enumerate(records) if getattr(r, "refused", None) is not None]
        if not refused:
            continue
        given = set(benchmark.metrics(records))
        for i in refused:
            filled = [*records[:i], _filled(records[i]), *records[i + 1:]]
            for key in set(benchmark.metrics(filled)) - given:
                found.setdefault(key, records[i].refused)
    return found
