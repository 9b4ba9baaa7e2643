"""Property 5: the bucket closing rule, and shared embeddings alone in their bucket."""

import dataclasses

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from reference.layout import LayoutConfig
from suites.params import plan_specs

from .assertions import check, check_equal, is_distributed
from .strategies import models, setups

pytestmark = pytest.mark.requires("layout")


def _bucket_members(buf):
    members = [[] for _ in buf.bucket_indices]
    for name, (start, end, bucket) in buf.param_index_map.items():
        members[bucket].append((start, end, name))
    return [sorted(m) for m in members]


@given(model=models(), setup=setups())
def test_buckets_close_exactly_when_full(impl, policy, model, setup):
    shared = {s.name for s in model if s.shared_embedding} if is_distributed(policy) else set()
    size = setup.bucket_size
    for buf in plan_specs(impl, model, setup.config(policy)):
        members = _bucket_members(buf)
        for i, params in enumerate(members):
            check(params, f"params in bucket {i}", [], "at least one (no empty buckets)")
            lo = buf.bucket_indices[i][0]
            for start, end, name in params[:-1]:  # every param but the bucket's last
                check(size is None or end - lo < size, f"bucket {i} after {name}", end - lo,
                      f"< bucket_size {size}: the bucket should have closed after {name}")
                check(name not in shared, f"bucket {i} after shared embedding {name}", "open",
                      "closed: a shared embedding sits alone")
            if i == len(members) - 1:
                continue
            last_end, last_name = params[-1][1], params[-1][2]
            closed_by_shared = last_name in shared or members[i + 1][0][2] in shared
            check(closed_by_shared or (size is not None and last_end - lo >= size),
                  f"bucket {i} unpadded size", last_end - lo,
                  f">= bucket_size {size}, or closed by a shared embedding")


@given(model=models(min_shared=1), setup=setups())
def test_shared_embedding_sits_alone(impl, sharded_policy, model, setup):
    """Upstream isolates shared embeddings only under the distributed optimizer. Every model drawn holds one or
    two, anywhere in the order (a tied input embedding is laid out last, with nothing after it to share its
    bucket), and the check fails where it placed none: a property that checked nothing must not pass."""
    shared = {s.name for s in model if s.shared_embedding}
    checked = 0
    for buf in plan_specs(impl, model, setup.config(sharded_policy)):
        members = _bucket_members(buf)
        for name in shared & set(buf.param_index_map):
            bucket = buf.param_index_map[name][2]
            check_equal([n for _, _, n in members[bucket]], [name], f"params of {name}'s bucket")
            checked += 1
    event(f"shared embeddings checked: {checked}")
    check_equal(checked, len(shared), "shared embeddings placed in some buffer")


@given(model=models(), setup=setups())
def test_packed_ignores_shared_embedding_flag(impl, model, setup):
    config = setup.config("packed")
    plain = [dataclasses.replace(s, shared_embedding=False) for s in model]
    for got, want in zip(plan_specs(impl, model, config), plan_specs(impl, plain, config)):
        check_equal(list(got.bucket_indices), list(want.bucket_indices),
                    "packed bucket bounds with vs without shared_embedding flags")


@st.composite
def boundary_cases(draw, policy: str):
    """(model, the names of its first k params in layout order within one buffer, the bucket_size that ends
    exactly at their end, dp): a buffer holds one dtype, so the k are drawn from the dtype of the first param
    in layout order, whose buffer therefore holds all of them."""
    model = draw(models(shared=False))
    order = list(reversed(model))  # layout order
    group = [spec for spec in order if spec.dtype == order[0].dtype]
    first = group[:draw(st.integers(1, len(group)))]
    align = 64 if is_distributed(policy) else 1
    end = 0
    for spec in first:
        end = -(-end // align) * align + spec.numel  # the rule in docs/rules.md, section 1
    return model, [spec.name for spec in first], end, draw(st.integers(1, 64))


def check_first_bucket_holds_exactly(buffers, first: list[str], bucket_size: int) -> int:
    """Bucket 0 of the buffer that holds all of ``first`` is exactly ``first``; returns the buffers checked,
    failing where none holds them all: the property would then have checked nothing."""
    checked = 0
    for buf in buffers:
        if all(name in buf.param_index_map for name in first):
            in_first = sorted(n for n, (_, _, b) in buf.param_index_map.items() if b == 0)
            check_equal(in_first, sorted(first), f"params in the first bucket with bucket_size={bucket_size}")
            checked += 1
    assert checked, (f"buffers holding all of {first}: got 0 of {len(buffers)}, but should check at least "
                     "one (the first params of one dtype share its buffer)")
    return checked


@given(data=st.data())
def test_bucket_closes_exactly_at_the_boundary(impl, policy, data):
    """bucket_size equal to the first k params' unpadded extent: the first bucket holds exactly those k.

    Random bucket sizes almost never land on a boundary, so this draws one that does.
    """
    model, first, end, dp = data.draw(boundary_cases(policy))
    config = LayoutConfig(dp=dp, policy=policy, bucket_size=end)
    check_first_bucket_holds_exactly(plan_specs(impl, model, config), first, end)
