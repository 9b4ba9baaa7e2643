"""Benchmark: planning real models without allocating (goal: GPT-3 175B at dp=1024 well under 1 s, and
reading and planning Llama-2-70B from its config.json, once built on meta, under 1 s)."""

from pathlib import Path

import pytest
import torch

from reference.layout import POLICIES, LayoutConfig, default_bucket_size, plan_layout
from reference.layout.catalog import model_specs
from reference.layout.from_module import read_module

LLAMA2_70B_CONFIG = Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "llama-2-70b.json"

CASES = [("gpt3-175b", 1024, "padded"), ("gpt3-175b", 1024, "high-busbw"),
         ("palm-540b", 128, "shard-aligned")]


@pytest.mark.parametrize("bucket", ["seed-40M", "default"])
@pytest.mark.parametrize("model, dp, policy", CASES, ids=[f"{m}-dp{d}-{p}" for m, d, p in CASES])
def test_plan(benchmark, model, dp, policy, bucket):
    specs = model_specs(model)
    bucket_size = 40_000_000 if bucket == "seed-40M" else default_bucket_size(dp)
    config = LayoutConfig(dp=dp, policy=policy, bucket_size=bucket_size)
    layout = benchmark.pedantic(plan_layout, args=(specs, config), rounds=20, warmup_rounds=2)
    benchmark.extra_info.update(buckets=layout.buffers[0].num_buckets, params=len(specs))


def test_read_and_plan_from_config(benchmark):
    """What ``--config ... --dp 64 --summary`` does beyond building the meta model: read its params, plan the
    chosen policy and every policy for the comparison."""
    pytest.importorskip("transformers", reason="--config builds models with transformers, not installed")
    from reference.layout.hf_config import build_meta_model

    model = build_meta_model(LLAMA2_70B_CONFIG)[1]

    def read_and_plan():
        specs = read_module(model, torch.bfloat16).specs
        return [plan_layout(specs, LayoutConfig(64, name, default_bucket_size(64))) for name in POLICIES]

    layouts = benchmark.pedantic(read_and_plan, rounds=10, warmup_rounds=1)
    benchmark.extra_info.update(buckets=layouts[1].buffers[0].num_buckets)
