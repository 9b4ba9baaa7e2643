"""The configuration objects every implementation is handed reject bad values by name."""

import re

import pytest

from reference.config import DDPConfig
from reference.layout import LayoutConfig, ParamSpec, plan_layout


@pytest.mark.parametrize(
    "field, kwargs, value",
    [
        ("bucket_size", {"bucket_size": 0}, "0"),
        ("bucket_size", {"bucket_size": -5}, "-5"),
        ("dp", {"dp": 0}, "0"),
        ("policy", {"policy": "zero3"}, "'zero3'"),
        ("expert_dp", {"dp": 4, "expert_dp": 3}, "3"),
        ("expert_dp", {"dp": 4, "expert_dp": 0}, "0"),
    ],
)
def test_bad_config_is_rejected_by_name(field, kwargs, value):
    with pytest.raises(ValueError) as info:
        LayoutConfig(**kwargs)
    message = str(info.value)
    assert message.startswith(f"{field}: got {value}"), f"message: got {message!r}, but should name {field} and {value}"
    assert "should be" in message, f"message: got {message!r}, but should say what is valid"


@pytest.mark.parametrize(
    "field, kwargs, value",
    [
        ("bucket_size", {"bucket_size": 0}, "0"),
        ("buckets_per_group", {"buckets_per_group": 0}, "0"),
        ("policy", {"policy": "zero3"}, "'zero3'"),
    ],
)
def test_bad_ddp_config_is_rejected_by_name(field, kwargs, value):
    with pytest.raises(ValueError) as info:
        DDPConfig(**kwargs)
    message = str(info.value)
    assert message.startswith(f"{field}: got {value}"), f"message: got {message!r}, but should name {field} and {value}"


def test_the_smallest_valid_values_are_accepted():
    """The other side of each boundary above."""
    LayoutConfig(bucket_size=1, dp=1, expert_dp=1)
    DDPConfig(bucket_size=1, buckets_per_group=1)
    plan_layout([ParamSpec("empty", (0, 4))], LayoutConfig())


@pytest.mark.parametrize("shape", [(-1, 4), (4, -2)])
def test_negative_param_sizes_are_rejected_by_name(shape):
    with pytest.raises(ValueError, match=re.escape(f"params: 'w' has shape {shape}, but sizes should be >= 0")):
        plan_layout([ParamSpec("w", shape)], LayoutConfig())
