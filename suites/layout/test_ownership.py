"""Property 8: per-rank ownership covers every bucket, and every param element, exactly once."""

import pytest
from hypothesis import given

from suites.params import make_params

from .assertions import check_equal
from .strategies import models, setups

pytestmark = pytest.mark.requires("shards")


@given(model=models(), setup=setups())
def test_ranks_own_each_element_exactly_once(impl, sharded_policy, model, setup):
    buffers = impl.build(make_params(model), setup.config(sharded_policy), "meta")
    for buf in buffers:
        for i, (lo, hi) in enumerate(buf.layout.bucket_indices):
            shard = (hi - lo) // setup.dp  # rank r owns the r-th equal slice (docs/rules.md)
            for r in range(setup.dp):
                want = (lo + r * shard, lo + (r + 1) * shard)
                check_equal(tuple(buf.owned_range(i, r)), want, f"bucket {i} range owned by rank {r}")
        for name, (start, end, bucket) in buf.layout.param_index_map.items():
            owned = sum(
                max(0, min(end, e) - max(start, s))
                for s, e in (buf.owned_range(bucket, r) for r in range(setup.dp))
            )
            check_equal(owned, end - start, f"elements of {name} owned, summed over ranks")
