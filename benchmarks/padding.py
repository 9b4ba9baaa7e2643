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

from datamodel import doc

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


