"""Pure layout planning: parameter descriptions in, offsets out, no storage allocated."""

from .planner import (
    BufferLayout,
    LayoutConfig,
    LayoutRecord,
    ModelLayout,
    ParamSpec,
    default_bucket_size,
    is_expert_parallel,
    plan_buffer,
    plan_layout,
    shard_numel,
)
from .policies import POLICIES, PaddingPolicy, distributed_policy_names, get_policy, pad

__all__ = [
    "BufferLayout",
    "LayoutConfig",
    "LayoutRecord",
    "ModelLayout",
    "POLICIES",
    "PaddingPolicy",
    "ParamSpec",
    "default_bucket_size",
    "distributed_policy_names",
    "get_policy",
    "is_expert_parallel",
    "pad",
    "plan_buffer",
    "plan_layout",
    "shard_numel",
]
