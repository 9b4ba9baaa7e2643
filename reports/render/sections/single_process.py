"""The sections of the pytest-benchmark files (shard caching, planning): one row per benchmark, with what it
recorded of its input."""

from __future__ import annotations

from typing import Sequence

from benchmarks.single_process import PytestBenchmarkRecord

from ..table import cell, table


def markdown(records: Sequence[PytestBenchmarkRecord]) -> str:
    return table([{"name": r.name, "time (ms)": cell(r.time_ms), **r.extra} for r in records])
