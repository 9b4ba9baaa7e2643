"""The bus-bandwidth section: what padding buys at the largest size, then nccl-tests' table per collective."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from benchmarks.busbw import COLLECTIVES, BusbwRecord, gated_cells

from ..plots import plot_busbw
from ..table import bytes_label, cell, sampling_note, table


def summary_markdown(records: Sequence[BusbwRecord]) -> str:
    """One row per collective and policy: what padding buys the payload at the largest size."""
    if not records:
        return "(none)"
    if records[0].world_size == 1:
        return ("One rank: nothing crosses a bus, so bus bandwidth and the padding ratios are undefined (null in "
                "results.json; nccl-tests prints 0). The tables give the time and algbw of each call.")
    cells = gated_cells(records)
    rows = [{"collective": r.collective, "policy": r.policy,
             "bucket (before padding)": bytes_label(r.requested_bytes),
             "padded to": bytes_label(r.size_bytes),
             "effective busbw (GB/s)": cell(r.effective_busbw_gbps),
             "ratio to unpadded": "1" if r.policy == "unpadded" else cell(r.effective_ratio_to_unpadded, r.refused)}
            for r in cells]
    sampled = {r.collective: r.sampling for r in cells}
    return table(rows) + (
        "\n\nMedian [95% interval] over rounds. Effective busbw counts the unpadded bucket's bytes only; "
        "the ratio is per round, the padded collective timed beside the unpadded one. Sampled: "
        + " ".join(f"{collective}: {sampling_note(s)}" for collective, s in sampled.items()))


def markdown(records: Sequence[BusbwRecord]) -> str:
    parts = [summary_markdown(records)]
    for collective in COLLECTIVES:
        rows = [{"size(B)": r.size_bytes, "count": r.count, "type": r.element_type, "redop": r.redop,
                 "policy": r.policy, "placement": r.placement, "time(us)": cell(r.time_us),
                 "algbw(GB/s)": cell(r.algbw_gbps), "busbw(GB/s)": cell(r.busbw_gbps),
                 "eff. busbw": cell(r.effective_busbw_gbps), "#wrong": r.wrong}
                for r in records if r.collective == collective]
        if rows:
            parts.append(f"### {collective}\n\n" + table(rows))
    return "\n\n".join(parts)


def plots(records: Sequence[BusbwRecord], out: Path) -> list[Path]:
    return plot_busbw(records, out)
