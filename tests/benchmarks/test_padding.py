"""The padding-overhead table's figures, worked by hand."""

from benchmarks.measuring import padding


def test_llama2_7b_needs_no_padding_under_upstream_padding():
    # Every Llama-2 7B param size is a multiple of 4096 * ... >= 128 (4096, 4096*4096,
    # 11008*4096, 32000*4096): no 64-element gaps and no bucket end off lcm(8, 128) = 128.
    row = padding.overhead_row("llama2-7b", 8, "padded")
    assert row.padding_elements == 0, row


def test_shard_aligned_aligns_every_shard():
    row = padding.overhead_row("llama2-70b", 32, "shard-aligned")
    assert row.shards_aligned == f"{row.buckets}/{row.buckets}", row
