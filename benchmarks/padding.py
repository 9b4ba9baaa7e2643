"""Padding overhead of real models under each policy, beside the design notes' claimed figures.

The design notes' "Typical Overhead" table (docs/errata.md) gives figures without a
derivation; this recomputes them from real shapes with the planner, at the
notes' bucket size of 40,000,000 elements (the notes write "40MB"; upstream
counts elements, see docs/errata.md).

Exact: computed from the planner, no samples; ``reports.render.padding``
renders it, ``python -m reports.overhead`` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from datamodel import doc

from reference.layout import LayoutConfig, POLICIES, plan_layout
from reference.layout.catalog import model_specs
from reference.layout.policies import HIGH_BUSBW_ALIGNMENT

NOTES_BUCKET_SIZE = 40_000_000


BYTES_PER_ELEMENT = 2  # the notes' buffers are bf16


DPS = (8, 32, 64, 128)


MODELS = ("llama2-7b", "llama2-70b", "gpt3-175b", "palm-540b", "mixtral-8x7b")


EXPERT_PARALLEL = {"mixtral-8x7b": 8}  # ep: one expert per rank of each expert-parallel group


# Design note 000, "Typical Overhead": (model, dp) -> (avg overhead per bucket, total overhead).
NOTES_CLAIMS = {
    ("llama2-7b", 8): ("0.01%", "4KB"),
    ("llama2-70b", 32): ("0.8%", "160KB"),
    ("gpt3-175b", 64): ("2.5%", "1.2MB"),
    ("palm-540b", 128): ("4.2%", "4.5MB"),
}


@dataclass(frozen=True)
class OverheadRow:
    """One (model, dp, policy): the padding the planner gives a real model's buffers."""

    model: str = doc("a model of the catalogue (fixtures/models.json)")
    dp: int = doc("data-parallel size")
    ep: int = doc("expert-parallel size (1 without experts)")
    policy: str = doc("padding policy")
    buckets: int = doc("buckets over every buffer of one rank")
    padding_elements: int = doc("elements that are not a parameter: 64-element start gaps and bucket-end padding")
    expert_padding_elements: int = doc("of it, in expert buffers")
    padding_pct: float = doc("padding over the parameters, %")
    avg_bucket_end_padding_pct: float = doc("bucket-end padding over the bucket's parameters, % (mean over buckets)")
    padding_bytes_bf16: int = doc("padding in bytes at bf16")
    shards_aligned: str = doc("buckets whose shard is a multiple of 2**16 elements, 'k/n'; n/a for packed policies",
                              json="shards_2**16_aligned")
    notes_claim_avg_per_bucket: str = doc("the design notes' claimed average overhead per bucket, where they list "
                                          "this (model, dp)", json="seed_claim_avg_per_bucket")
    notes_claim_total: str = doc("the design notes' claimed total overhead, where they list this (model, dp)",
                                 json="seed_claim_total")


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
