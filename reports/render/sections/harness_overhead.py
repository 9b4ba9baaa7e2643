"""The harness section: what timing and the recording group add to a collective."""

from __future__ import annotations

from typing import Sequence

from benchmarks.harness_overhead import HarnessRecord

from ..table import cell, sampling_note, table


def markdown(records: Sequence[HarnessRecord]) -> str:
    return table([{"machinery": r.what, "all-reduce": f"{r.count:,} fp32", "calls a round": r.calls,
                   "time with / without": cell(r.ratio, r.refused)} for r in records]) + (
        "\n\nGoal for the timing harness: < 1.02x. The recording group is what observing an implementation costs "
        "a suite check, per collective. The timing harness sampled: "
        + (sampling_note(records[0].sampling) or "not at all (refused)") if records else "")
