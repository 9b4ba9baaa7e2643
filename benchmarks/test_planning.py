"""Benchmark: planning real models without allocating (goal: GPT-3 175B at dp=1024 well under 1 s)."""

import pytest

from reference.layout import LayoutConfig, default_bucket_size, plan_layout
from reference.layout.catalog import model_specs

CASES = [("gpt3-175b", 1024, "padded"), ("gpt3-175b", 1024, "high-busbw"), ("palm-540b", 128, "shard-aligned")]


@pytest.mark.parametrize("bucket", ["seed-40M", "default"])
@pytest.mark.parametrize("model, dp, policy", CASES, ids=[f"{m}-dp{d}-{p}" for m, d, p in CASES])
def test_plan(benchmark, model, dp, policy, bucket):
    specs = model_specs(model)
    bucket_size = 40_000_000 if bucket == "seed-40M" else default_bucket_size(dp)
    config = LayoutConfig(dp=dp, policy=policy, bucket_size=bucket_size)
    layout = benchmark.pedantic(plan_layout, args=(specs, config), rounds=20, warmup_rounds=2)
    benchmark.extra_info.update(buckets=layout.buffers[0].num_buckets, params=len(specs))
