"""The padding-overhead table (``benchmarks.padding``) as markdown."""

from __future__ import annotations

from typing import Sequence

from benchmarks.padding import OverheadRow

from .table import bytes_label, table


def render_markdown(rows: Sequence[OverheadRow]) -> str:
    shown = [
        {
            "model": r.model, "dp": r.dp, "ep": r.ep, "policy": r.policy, "buckets": r.buckets,
            "padding (elements)": f"{r.padding_elements:,}",
            "of it in expert buffers": f"{r.expert_padding_elements:,}" if r.ep > 1 else "",
            "padding %": f"{r.padding_pct:.4f}",
            "avg end pad / bucket %": f"{r.avg_bucket_end_padding_pct:.4f}",
            "padding (bf16)": bytes_label(r.padding_bytes_bf16),
            "shards % 2**16 == 0": r.shards_aligned,
            "notes' claims (avg, total)": ", ".join(x for x in (r.notes_claim_avg_per_bucket, r.notes_claim_total)
                                                    if x),
        }
        for r in rows
    ]
    return table(shown, numparse=False)
