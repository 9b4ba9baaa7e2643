"""Bad input to the implementation gets a clear error naming the field, the value and what would be valid."""

import pytest

from reference.layout import LayoutConfig, ParamSpec
from suites.params import make_params


@pytest.mark.requires("validation")
def test_empty_parameter_list_is_rejected(impl):
    with pytest.raises(ValueError, match="params: got an empty list"):
        impl.plan([], LayoutConfig())


@pytest.mark.requires("validation")
def test_frozen_parameter_is_rejected(impl):
    named = make_params([ParamSpec("w", (4, 4)), ParamSpec("frozen", (3,), requires_grad=False)])
    with pytest.raises(ValueError, match="frozen parameter 'frozen'"):
        impl.plan(named, LayoutConfig())


@pytest.mark.requires("validation", "shards")
def test_non_divisible_shard_request_is_rejected(impl):
    # 10 packed elements cannot be split over 3 ranks.
    (buf,) = impl.build(make_params([ParamSpec("w", (10,))], "cpu"), LayoutConfig(dp=3), "cpu")
    with pytest.raises(ValueError, match="shard count: got 3 for a buffer of 10 elements"):
        buf.grad_shards(0)

