"""Property 3: params never overlap, lie inside their bucket, and each is placed exactly once."""

import pytest
from hypothesis import given

from suites.params import plan_specs

from .assertions import check, check_equal
from .strategies import models, setups

pytestmark = pytest.mark.requires("layout")


@given(model=models(), setup=setups())
def test_every_param_placed_once_inside_its_bucket(impl, policy, model, setup):
    buffers = plan_specs(impl, model, setup.config(policy))
    placed = [name for buf in buffers for name in buf.param_index_map]
    check_equal(sorted(placed), sorted(s.name for s in model), "names placed across all buffers")
    sizes = {s.name: s.numel for s in model}
    for buf in buffers:
        for name, (start, end, bucket) in buf.param_index_map.items():
            check_equal(end - start, sizes[name], f"extent of {name}")
            check(0 <= bucket < len(buf.bucket_indices), f"bucket id of {name}", bucket,
                  f"in [0, {len(buf.bucket_indices)})")
            lo, hi = buf.bucket_indices[bucket]
            check(lo <= start and end <= hi, f"{name} at [{start}, {end})", (start, end),
                  f"inside its bucket [{lo}, {hi})")


@given(model=models(), setup=setups())
def test_params_do_not_overlap(impl, policy, model, setup):
    for buf in plan_specs(impl, model, setup.config(policy)):
        spans = sorted((s, e, n) for n, (s, e, _) in buf.param_index_map.items())
        for (s0, e0, n0), (s1, e1, n1) in zip(spans, spans[1:]):
            check(e0 <= s1, f"{n0} [{s0}, {e0}) vs {n1} [{s1}, {e1})", "overlapping", "disjoint")


@given(model=models(), setup=setups())
def test_buckets_tile_the_buffer(impl, policy, model, setup):
    for buf in plan_specs(impl, model, setup.config(policy)):
        bounds = list(buf.bucket_indices)
        check_equal(bounds[0][0], 0, "first bucket start")
        for i, ((_, e0), (s1, _)) in enumerate(zip(bounds, bounds[1:])):
            check_equal(s1, e0, f"bucket {i + 1} start (previous bucket's end)")
        check_equal(buf.numel, bounds[-1][1], "buffer numel (last bucket end)")
