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
        ("bucket_size", {"bucket_size": -5}, "-5"),
        ("buckets_per_group", {"buckets_per_group": 0}, "0"),
        ("policy", {"policy": "zero3"}, "'zero3'"),
    ],
)
def test_bad_ddp_config_is_rejected_by_name(field, kwargs, value):
    with pytest.raises(ValueError) as info:
        DDPConfig(**kwargs)
    message = str(info.value)
    assert message.startswith(f"{field}: got {value}"), f"message: got {message!r}, but should name {field} and {value}"


@pytest.mark.parametrize("knob, kwargs, words", [
    ("num_distributed_optimizer_instances", dict(num_distributed_optimizer_instances=2),
     "should be 1 unless the policy shards"),
    ("num_distributed_optimizer_instances", dict(num_distributed_optimizer_instances=0, policy="padded"),
     "should be an integer >= 1"),
    ("num_distributed_optimizer_instances", dict(num_distributed_optimizer_instances=2.0, policy="padded"),
     "should be an integer >= 1"),
    ("num_distributed_optimizer_instances", dict(num_distributed_optimizer_instances=True, policy="padded"),
     "should be an integer >= 1"),
    ("reduce_scatter_with_fp32_accumulation", dict(reduce_scatter_with_fp32_accumulation=True),
     "only be set with a distributed-optimizer policy"),
    ("reduce_scatter_with_fp32_accumulation",
     dict(reduce_scatter_with_fp32_accumulation=True, policy="padded", average_in_collective=True),
     "got True with average_in_collective, but should be used with neither"),
    ("reduce_scatter_with_fp32_accumulation",
     dict(reduce_scatter_with_fp32_accumulation=True, policy="padded", num_distributed_optimizer_instances=2),
     "got True with num_distributed_optimizer_instances=2, but should be used with neither"),
    ("param_name_patterns_for_fp32_local_accumulation", dict(param_name_patterns_for_fp32_local_accumulation=["*"]),
     "should be a tuple of non-empty fnmatch"),
    ("param_name_patterns_for_fp32_local_accumulation", dict(param_name_patterns_for_fp32_local_accumulation=("",)),
     "should be a tuple of non-empty fnmatch"),
    ("param_name_patterns_for_fp32_local_accumulation",
     dict(param_name_patterns_for_fp32_local_accumulation=("all",), grad_reduce_in_fp32=True), "should be empty then"),
])
def test_upstreams_newer_knobs_are_validated_by_name(knob, kwargs, words):
    """Each row names the knob its message must start with: a new knob's rows need nothing else."""
    with pytest.raises(ValueError) as info:
        DDPConfig(**kwargs)
    message = str(info.value)
    assert message.startswith(f"{knob}: got") and words in message, message


def test_instances_must_divide_the_data_parallel_sizes():
    config = DDPConfig(policy="padded", num_distributed_optimizer_instances=2)
    assert config.layout_config(4, 2).dp == 2 and config.layout_config(4, 2).expert_dp == 1
    for dp, expert_dp, name in ((3, None, "data-parallel size of 3"), (4, 1, "expert-data-parallel size of 1")):
        with pytest.raises(ValueError, match=f"num_distributed_optimizer_instances: got 2 for a {name}"):
            config.layout_config(dp, expert_dp)


def test_fp32_local_accumulation_matches_names_by_pattern():
    config = DDPConfig(param_name_patterns_for_fp32_local_accumulation=("*.weight", "head.*"))
    assert [config.accumulates_in_fp32(n) for n in ("fc1.weight", "fc1.bias", "head.bias", "weight")] == \
        [True, False, True, False]
    assert DDPConfig(param_name_patterns_for_fp32_local_accumulation=("all",)).accumulates_in_fp32("fc1.bias")
    assert not DDPConfig().accumulates_in_fp32("fc1.weight")


def test_the_smallest_valid_values_are_accepted():
    """The other side of each boundary above."""
    LayoutConfig(bucket_size=1, dp=1, expert_dp=1)
    DDPConfig(bucket_size=1, buckets_per_group=1, num_distributed_optimizer_instances=1)
    DDPConfig(policy="padded", num_distributed_optimizer_instances=2, param_name_patterns_for_fp32_local_accumulation=("a",))
    DDPConfig(policy="padded", reduce_scatter_with_fp32_accumulation=True)
    plan_layout([ParamSpec("empty", (0, 4))], LayoutConfig())


@pytest.mark.parametrize("shape", [(-1, 4), (4, -2)])
def test_negative_param_sizes_are_rejected_by_name(shape):
    with pytest.raises(ValueError, match=re.escape(f"params: 'w' has shape {shape}, but sizes should be >= 0")):
        plan_layout([ParamSpec("w", shape)], LayoutConfig())
