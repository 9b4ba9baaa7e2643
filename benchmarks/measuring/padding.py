"""Padding overhead computed with the planner from real models' shapes (``benchmarks.padding`` defines its rows)."""

from __future__ import annotations

from typing import Sequence

from reference.layout import POLICIES, LayoutConfig, plan_layout
from reference.layout.catalog import model_specs
from reference.layout.policies import HIGH_BUSBW_ALIGNMENT

from ..padding import BYTES_PER_ELEMENT, DPS, EXPERT_PARALLEL, MODELS, NOTES_BUCKET_SIZE, NOTES_CLAIMS, OverheadRow


def overhead_row(model: str, dp: int, policy: str, bucket_size: int = NOTES_BUCKET_SIZE) -> OverheadRow:
    """One rank's buffers; a mixture-of-experts model's expert buffers are planned for dp / ep."""
    ep = EXPERT_PARALLEL.get(model, 1)
    specs = model_specs(model, ep=ep)
    layout = plan_layout(specs, LayoutConfig(dp=dp, policy=policy, bucket_size=bucket_size, expert_dp=dp // ep))
    raw = sum(s.numel for s in specs)
    numel = sum(b.numel for b in layout.buffers)
    expert_raw = sum(s.numel for s in specs if s.expert_parallel)
    end_pcts, aligned, buckets = [], 0, 0
    for buf in layout.buffers:
        for (lo, hi), unpadded in zip(buf.bucket_indices, buf.per_bucket_numel_unpadded):
            buckets += 1
            end_pcts.append(100.0 * (hi - lo - unpadded) / unpadded)
            aligned += (hi - lo) % buf.dp == 0 and ((hi - lo) // buf.dp) % HIGH_BUSBW_ALIGNMENT == 0
    claim = NOTES_CLAIMS.get((model, dp), ("", ""))
    return OverheadRow(
        model=model, dp=dp, ep=ep, policy=policy, buckets=buckets, padding_elements=numel - raw,
        expert_padding_elements=sum(b.numel for b in layout.expert) - expert_raw,
        padding_pct=100.0 * (numel - raw) / raw, avg_bucket_end_padding_pct=sum(end_pcts) / len(end_pcts),
        padding_bytes_bf16=(numel - raw) * BYTES_PER_ELEMENT,
        shards_aligned=f"{aligned}/{buckets}" if POLICIES[policy].distributed_optimizer else "n/a",
        notes_claim_avg_per_bucket=claim[0], notes_claim_total=claim[1])


def overhead_table(models: Sequence[str] = MODELS, dps: Sequence[int] = DPS,
                   policies: Sequence[str] = tuple(POLICIES)) -> list[OverheadRow]:
    return [overhead_row(m, dp, p) for m in models for dp in dps for p in policies]
