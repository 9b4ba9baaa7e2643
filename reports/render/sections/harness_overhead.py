"""The harness section: what timing and the recording group add to a collective."""

from __future__ import annotations

from ..table import cell, sampling_note, table


def markdown(records: list[dict]) -> str:
    return table([{"machinery": r["what"], "all-reduce": f"{r['count']:,} fp32", "calls a round": r["calls"],
                   "time with / without": cell(r, "ratio")} for r in records]) + (
        "\n\nGoal for the timing harness: < 1.02x. The recording group is what observing an implementation costs "
        "a suite check, per collective. The timing harness sampled: "
        + (sampling_note(records[0].get("sampling")) or "not at all (refused)") if records else "")
