"""The bucketing section: per-parameter all-reduce against bucketed, overlapped sync."""

from __future__ import annotations

from typing import Sequence

from benchmarks.bucketing import BucketingRecord

from ..table import cell, table


def markdown(records: Sequence[BucketingRecord]) -> str:
    return table([{"model": f"{r.model.size_class}: {r.model.params / 1e6:.1f}M params",
                   "naive (ms)": cell(r.naive_ms), "bucketed (ms)": cell(r.bucketed_ms),
                   "speedup": cell(r.speedup, r.refused)} for r in records])
