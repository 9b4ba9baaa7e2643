"""Named padding policies, as data: how a buffer's params and bucket ends are aligned.

Upstream Megatron expresses padding as two flags (``use_distributed_optimizer``
and ``pad_buckets_for_high_nccl_busbw``). Naming the combinations lets the
suites, the planner CLI and the reports talk about them, and adds the one
policy the seeds describe in words but upstream's formula does not deliver
(every rank's shard a multiple of 2**16 elements, see docs/errata.md).

Each policy is one row of ``POLICIES``; adding a policy is adding a row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

PARAM_ALIGNMENT = 64  # elements: 128 bytes at 16-bit precision
BUCKET_ALIGNMENT = 128  # elements: 256 bytes at 16-bit precision
HIGH_BUSBW_ALIGNMENT = 2**16  # elements


@dataclass(frozen=True)
class PaddingPolicy:
    """One way of padding a buffer.

    A bucket end (and so the buffer's numel) is a multiple of
    ``lcm(*bucket_alignments, dp * shard_multiple)``; without a distributed
    optimizer nothing is sharded, so there is no ``dp`` term and no padding.
    """

    name: str
    distributed_optimizer: bool
    param_alignment: int
    """Every param starts on a multiple of this many elements."""
    bucket_alignments: tuple[int, ...]
    """Every bucket end is a multiple of each of these."""
    shard_multiple: int
    """Every rank's shard of a bucket is a multiple of this (distributed optimizer only)."""
    purpose: str
    memory_cost: str

    def bucket_divisor(self, dp: int) -> int:
        """Every bucket end (and so the buffer's numel) is a multiple of this."""
        if not self.distributed_optimizer:
            return 1
        return math.lcm(*self.bucket_alignments, dp * self.shard_multiple)


POLICIES: dict[str, PaddingPolicy] = {
    p.name: p
    for p in (
        PaddingPolicy(
            name="packed",
            distributed_optimizer=False,
            param_alignment=1,
            bucket_alignments=(),
            shard_multiple=1,
            purpose="plain all-reduce DDP; every rank holds the whole buffer, so nothing is sharded",
            memory_cost="none: numel == numel_unpadded",
        ),
        PaddingPolicy(
            name="padded",
            distributed_optimizer=True,
            param_alignment=PARAM_ALIGNMENT,
            bucket_alignments=(BUCKET_ALIGNMENT,),
            shard_multiple=1,
            purpose="distributed optimizer: params on 128-byte boundaries, buckets split evenly "
            "over dp and end on 256-byte boundaries (upstream default)",
            memory_cost="< 64 elements per param + < lcm(dp, 128) elements per bucket",
        ),
        PaddingPolicy(
            name="high-busbw",
            distributed_optimizer=True,
            param_alignment=PARAM_ALIGNMENT,
            bucket_alignments=(BUCKET_ALIGNMENT, HIGH_BUSBW_ALIGNMENT),
            shard_multiple=1,
            purpose="upstream's pad_buckets_for_high_nccl_busbw: bucket sizes divisible by 2**16 "
            "as well; per-rank shards are NOT guaranteed to be multiples of 2**16",
            memory_cost="< 64 elements per param + < lcm(dp, 128, 2**16) elements per bucket",
        ),
        PaddingPolicy(
            name="shard-aligned",
            distributed_optimizer=True,
            param_alignment=PARAM_ALIGNMENT,
            bucket_alignments=(BUCKET_ALIGNMENT,),
            shard_multiple=HIGH_BUSBW_ALIGNMENT,
            purpose="the seeds' stated intent: every rank's shard a multiple of 2**16 elements "
            "(bucket divisible by dp * 2**16); not an upstream option",
            memory_cost="< 64 elements per param + < dp * 2**16 elements per bucket",
        ),
    )
}


def distributed_policy_names() -> str:
    """The policies that shard buffers, for error messages: 'padded, high-busbw, shard-aligned'."""
    return ", ".join(name for name, p in POLICIES.items() if p.distributed_optimizer)


def get_policy(name: str | PaddingPolicy) -> PaddingPolicy:
    """Look a policy up by name; the error lists the valid names."""
    if isinstance(name, PaddingPolicy):
        return name
    try:
        return POLICIES[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"policy: got {name!r}, but should be one of {', '.join(POLICIES)}"
        ) from None


def pad(value: int, divisor: int) -> int:
    """Round ``value`` up to a multiple of ``divisor``."""
    return -(-value // divisor) * divisor
