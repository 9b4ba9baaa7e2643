"""Property 7: main_grad, param, bucket and shard views point into the buffer, at the right offsets."""

import pytest
import torch
from hypothesis import given

from suites.params import make_params

from .assertions import check, check_equal, check_view_at, is_distributed
from .strategies import models, setups

# Real storage is allocated here, so dp stays small (shard-aligned buckets are dp * 2**16).
small_models = models(max_params=6)
small_setups = setups(max_dp=8)


def _build(impl, model, setup, policy, device):
    named = make_params(model, device=device)
    before = {n: p.detach().clone() for n, p in named}
    return impl.build(named, setup.config(policy), device), dict(named), before


@pytest.mark.requires("buffer")
@given(model=small_models, setup=small_setups)
def test_main_grad_is_a_view_into_the_grad_buffer(impl, device, policy, model, setup):
    buffers, params, _ = _build(impl, model, setup, policy, device)
    for buf in buffers:
        for name, (start, end, _) in buf.layout.param_index_map.items():
            main_grad = params[name].main_grad
            check_equal(tuple(main_grad.shape), tuple(params[name].shape), f"{name}.main_grad shape")
            check_view_at(main_grad, buf.grad_data, start, f"{name}.main_grad")


@pytest.mark.requires("buffer")
@given(model=small_models, setup=small_setups)
def test_param_data_repointed_with_values_preserved(impl, device, policy, model, setup):
    buffers, params, before = _build(impl, model, setup, policy, device)
    for buf in buffers:
        check_equal(buf.param_data is not None, is_distributed(policy), "has a param buffer")
        for name, (start, _, _) in buf.layout.param_index_map.items():
            check(torch.equal(params[name].data, before[name]), f"{name} values after build",
                  "changed", "the values it had before")
            if buf.param_data is not None:
                check_view_at(params[name].data, buf.param_data, start, f"{name}.data")


@pytest.mark.requires("buffer")
@given(model=small_models, setup=small_setups)
def test_bucket_views_cover_their_ranges(impl, device, policy, model, setup):
    buffers, _, _ = _build(impl, model, setup, policy, device)
    for buf in buffers:
        check_equal(len(buf.buckets), len(buf.layout.bucket_indices), "number of bucket objects")
        for i, (bucket, (lo, hi)) in enumerate(zip(buf.buckets, buf.layout.bucket_indices)):
            check_equal(bucket.grad_data.numel(), hi - lo, f"bucket {i} grad view numel")
            check_view_at(bucket.grad_data, buf.grad_data, lo, f"bucket {i} grad view")
            if buf.param_data is not None:
                check_view_at(bucket.param_data, buf.param_data, lo, f"bucket {i} param view")


@pytest.mark.requires("shards")
@given(model=small_models, setup=small_setups)
def test_shard_views_are_cached_views(impl, device, sharded_policy, model, setup):
    buffers, _, _ = _build(impl, model, setup, sharded_policy, device)
    for buf in buffers:
        for i, (lo, hi) in enumerate(buf.layout.bucket_indices):
            shard = (hi - lo) // setup.dp
            for kind, get, base in (("grad", buf.grad_shards, buf.grad_data),
                                    ("param", buf.param_shards, buf.param_data)):
                shards = get(i)
                check_equal(len(shards), setup.dp, f"bucket {i} {kind} shard count")
                again = get(i)
                check(again is shards and all(a is b for a, b in zip(again, shards)),
                      f"bucket {i} {kind} shards on a second call", "new objects",
                      "the same cached objects")
                for r, view in enumerate(shards):
                    check_equal(view.numel(), shard, f"bucket {i} {kind} shard {r} numel")
                    check_view_at(view, base, lo + r * shard, f"bucket {i} {kind} shard {r}")


@pytest.mark.requires("buffer")
@given(model=small_models, setup=small_setups)
def test_bucket_param_to_index_is_the_param_offset_in_the_bucket(impl, device, policy, model, setup):
    """upstream's test_param_to_index_alignment_with_padding: a bucket's per-param ranges count the start
    padding, so reading a param through its bucket reads that param."""
    buffers, params, _ = _build(impl, model, setup, policy, device)
    for buf in buffers:
        for i, (bucket, (lo, _)) in enumerate(zip(buf.buckets, buf.layout.bucket_indices)):
            for name, (start, end, b) in buf.layout.param_index_map.items():
                if b != i:
                    continue
                check_equal(tuple(bucket.param_to_index[name]), (start - lo, end - lo),
                            f"bucket {i} param_to_index of {name}")
                check_view_at(params[name].main_grad, bucket.grad_data, start - lo,
                              f"{name}.main_grad in bucket {i}")
