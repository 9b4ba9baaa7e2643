"""Property 10: expert-parallel params get buffers of their own, planned for the expert-data-parallel size.

Upstream keys buffers by (param dtype, grad dtype, expert parallel): expert
buffers never hold a dense param, each has its own index space from 0, is
padded and sharded for ``expert_dp`` (= dp / ep), and leaves every dense
offset exactly where it would be without experts (docs/rules.md, section 1).
"""

import dataclasses

import pytest
import torch
from hypothesis import given

from suites.params import make_params, plan_specs

from .assertions import check, check_equal, check_multiple, expected_divisor
from .strategies import expert_setups, models

pytestmark = pytest.mark.requires("layout", "expert")

moe_models = models(experts=True)


def _kind(buf) -> bool:
    return buf.expert_parallel


@given(model=moe_models, setup=expert_setups())
def test_expert_buffers_are_separate_with_their_own_index_space(impl, policy, model, setup):
    buffers = plan_specs(impl, model, setup.config(policy))
    experts = {s.name for s in model if s.expert_parallel}
    for i, buf in enumerate(buffers):
        names = set(buf.param_index_map)
        check_equal(names <= experts if _kind(buf) else not names & experts, True,
                    f"buffer {i} (expert_parallel={_kind(buf)}) holds only params of its kind "
                    f"(holds {sorted(names)}, experts {sorted(experts)})")
        check_equal(buf.bucket_indices[0][0], 0, f"buffer {i} first bucket start")
    placed = [n for buf in buffers if _kind(buf) for n in buf.param_index_map]
    check_equal(sorted(placed), sorted(experts), "expert params placed in expert buffers, each once")


@given(model=moe_models, setup=expert_setups())
def test_expert_buffers_are_padded_for_expert_dp(impl, policy, model, setup):
    """Bucket ends on the expert-DP divisor, and no further: padding for dp would waste memory."""
    for i, buf in enumerate(plan_specs(impl, model, setup.config(policy))):
        dp = setup.expert_dp if _kind(buf) else setup.dp
        divisor = expected_divisor(policy, dp)
        what = f"buffer {i} (expert_parallel={_kind(buf)}, {policy}, dp={setup.dp}, expert_dp={setup.expert_dp})"
        for b, ((start, end), unpadded) in enumerate(zip(buf.bucket_indices, buf.per_bucket_numel_unpadded)):
            check_multiple(end, divisor, f"{what} bucket {b} end")
            check(end - start - unpadded < divisor, f"{what} bucket {b} end padding", end - start - unpadded,
                  f"less than the divisor {divisor}")


@pytest.mark.requires("shards")
@given(model=models(experts=True, max_params=6), setup=expert_setups())
def test_expert_shards_are_owned_by_expert_dp_ranks(impl, sharded_policy, model, setup):
    for buf in impl.build(make_params(model), setup.config(sharded_policy), "meta"):
        if not _kind(buf.layout):
            continue
        for b, (lo, hi) in enumerate(buf.layout.bucket_indices):
            shard = (hi - lo) // setup.expert_dp
            for r in range(setup.expert_dp):
                check_equal(tuple(buf.owned_range(b, r)), (lo + r * shard, lo + (r + 1) * shard),
                            f"expert bucket {b} range owned by expert-DP rank {r} of {setup.expert_dp}")


@given(model=moe_models, setup=expert_setups())
def test_dense_layout_is_unchanged_by_experts(impl, policy, model, setup):
    dense_only = [s for s in model if not s.expert_parallel]
    with_experts = [b for b in plan_specs(impl, model, setup.config(policy)) if not _kind(b)]
    if not dense_only:
        check_equal(len(with_experts), 0, "dense buffers of an all-expert model")
        return
    without = plan_specs(impl, dense_only, dataclasses.replace(setup, expert_dp=None).config(policy))
    check_equal(len(with_experts), len(without), "number of dense buffers")
    for i, (a, b) in enumerate(zip(with_experts, without)):
        for field in ("param_dtype", "grad_dtype", "numel", "numel_unpadded", "bucket_indices",
                      "per_bucket_numel_unpadded", "param_index_map"):
            check_equal(_field(a, field), _field(b, field), f"dense buffer {i} {field} with experts present")


@given(model=moe_models, setup=expert_setups())
def test_one_buffer_per_dtype_pair_within_each_kind(impl, policy, model, setup):
    buffers = plan_specs(impl, model, setup.config(policy))
    fp32 = setup.grad_reduce_in_fp32
    for expert in (False, True):
        specs = [s for s in model if s.expert_parallel == expert]
        pairs = [(b.param_dtype, b.grad_dtype) for b in buffers if _kind(b) == expert]
        want = list(dict.fromkeys((s.dtype, torch.float32 if fp32 else s.dtype) for s in specs))
        check_equal(pairs, want, f"(param dtype, grad dtype) of the {'expert' if expert else 'dense'} "
                                 "buffers, in first-seen order")
        for spec in specs:
            holders = [b for b in buffers if spec.name in b.param_index_map]
            check(len(holders) == 1 and holders[0].param_dtype == spec.dtype, f"buffer of {spec.name}",
                  [(b.param_dtype, _kind(b)) for b in holders], f"one buffer of dtype {spec.dtype}")


def _field(buf, field):
    value = getattr(buf, field)
    if field == "bucket_indices":
        return [tuple(b) for b in value]
    if field in ("per_bucket_numel_unpadded",):
        return list(value)
    if field == "param_index_map":
        return {n: tuple(v) for n, v in value.items()}
    return value
