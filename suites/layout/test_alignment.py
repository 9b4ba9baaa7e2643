"""Property 2: under the distributed optimizer every param starts on a 64-element boundary."""

import pytest
from hypothesis import given

from suites.params import plan_specs

from .assertions import check_multiple
from .strategies import models, setups

pytestmark = pytest.mark.requires("layout")


@given(model=models(), setup=setups())
def test_param_starts_are_64_element_aligned(impl, sharded_policy, model, setup):
    """Only under the distributed optimizer: packed buffers do not align params, as upstream."""
    for buf in plan_specs(impl, model, setup.config(sharded_policy)):
        for name, (start, _, _) in buf.param_index_map.items():
            check_multiple(start, 64, f"start of {name}")
