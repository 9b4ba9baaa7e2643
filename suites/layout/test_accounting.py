"""Property 6: ``numel_unpadded`` and per-bucket counts as upstream defines them."""

import pytest
from hypothesis import given

from suites.params import plan_specs

from .assertions import check, check_equal, expected_divisor, is_distributed
from .strategies import models, setups

pytestmark = pytest.mark.requires("layout")


def closed_early_by_shared(buf, bucket, model, policy) -> bool:
    """The next bucket opens with a shared embedding (distributed optimizer only)."""
    shared = {s.name for s in model if s.shared_embedding}
    first_of_next = [n for n, (s, e, b) in buf.param_index_map.items() if b == bucket + 1]
    if not is_distributed(policy) or not first_of_next:
        return False
    first = min(first_of_next, key=lambda n: buf.param_index_map[n][0])
    return first in shared and bucket_params(buf, bucket)[-1] not in shared


def bucket_params(buf, bucket):
    return sorted((n for n, v in buf.param_index_map.items() if v[2] == bucket),
                  key=lambda n: buf.param_index_map[n][0])


@given(model=models(), setup=setups())
def test_unpadded_counts_exclude_only_end_padding(impl, policy, model, setup):
    divisor = expected_divisor(policy, setup.dp)
    for buf in plan_specs(impl, model, setup.config(policy)):
        counts = list(buf.per_bucket_numel_unpadded)
        check_equal(len(counts), len(buf.bucket_indices), "number of per-bucket counts")
        for i, (lo, hi) in enumerate(buf.bucket_indices):
            last_end = max(e for s, e, b in buf.param_index_map.values() if b == i)
            if closed_early_by_shared(buf, i, model, policy) and not (
                setup.bucket_size is not None and last_end - lo >= setup.bucket_size
            ):
                # Closed "at the padded start" of the shared embedding that follows it.
                last_end = -(-last_end // 64) * 64
            # "unpadded" includes the gaps between params; it excludes only end padding.
            check_equal(counts[i], last_end - lo, f"bucket {i} unpadded count (last param end - start)")
            end_pad = hi - lo - counts[i]
            check(0 <= end_pad < divisor, f"bucket {i} end padding", end_pad, f"in [0, {divisor})")
        check_equal(buf.numel_unpadded, sum(counts), "numel_unpadded (sum of per-bucket counts)")
        check(buf.numel_unpadded <= buf.numel, "numel_unpadded", buf.numel_unpadded, f"<= numel {buf.numel}")
