"""Benchmark: a bucket's cached shard views against slicing them anew (what the cache saves per step)."""

import pytest
import torch

from reference.buffer import build_buffers, shard_buffer
from reference.layout import LayoutConfig

DP, BUCKETS, RANK = 8, 64, 3


@pytest.fixture(scope="module")
def buffer():
    params = [(f"p{i}", torch.nn.Parameter(torch.empty(4096, device="meta"))) for i in range(BUCKETS)]
    (buf,) = build_buffers(params, LayoutConfig(dp=DP, policy="padded", bucket_size=4096), "meta")
    assert len(buf.buckets) == BUCKETS
    return buf


def test_cached_shard_views(benchmark, buffer):
    views = benchmark.pedantic(lambda: [buffer.grad_shards(i)[RANK] for i in range(BUCKETS)],
                               rounds=200, warmup_rounds=5)
    assert all(v is buffer.grad_shards(i)[RANK] for i, v in enumerate(views))


def test_resliced_shard_views(benchmark, buffer):
    views = benchmark.pedantic(lambda: [shard_buffer(b.grad_data, DP)[RANK] for b in buffer.buckets],
                               rounds=200, warmup_rounds=5)
    assert len(views) == BUCKETS
