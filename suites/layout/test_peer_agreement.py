"""Differential check: the implementation under test plans exactly what megatron-core plans."""

import pytest
from hypothesis import given

from reference.layout import LayoutConfig
from suites.impls import load_implementation
from suites.impls.support import why_not
from suites.params import plan_specs

from .assertions import check_equal
from .strategies import expert_setups, models, setups

pytestmark = pytest.mark.requires("layout")


def _fields(buf):
    return {
        "dtypes": (buf.param_dtype, buf.grad_dtype),
        "numel": buf.numel,
        "numel_unpadded": buf.numel_unpadded,
        "bucket_indices": [tuple(b) for b in buf.bucket_indices],
        "per_bucket_numel_unpadded": list(buf.per_bucket_numel_unpadded),
        "param_index_map": {n: tuple(v) for n, v in buf.param_index_map.items()},
    }


@pytest.fixture(scope="module")
def peer(impl, policy):
    """megatron-core, where it can serve as the oracle for this policy: imported here, not at collection, so a
    session whose checks of layouts all skip never pays for megatron-core's import."""
    megatron = load_implementation("megatron")
    reason = why_not(megatron, LayoutConfig(policy=policy))
    if impl.name == megatron.name:
        reason = "the implementation under test is the peer itself"
    if reason:
        pytest.skip(f"no peer to compare with: {reason}")
    return megatron


@given(model=models(), setup=setups())
def test_same_layout_as_megatron_core(impl, peer, policy, model, setup):
    config = setup.config(policy)
    ours, theirs = plan_specs(impl, model, config), plan_specs(peer, model, config)
    check_equal(len(ours), len(theirs), "number of buffers")
    for i, (a, b) in enumerate(zip(ours, theirs)):
        for field, value in _fields(a).items():
            check_equal(value, _fields(b)[field], f"buffer {i} {field} (vs megatron-core)")


@pytest.mark.requires("expert")
@given(model=models(experts=True), setup=expert_setups())
def test_same_expert_layout_as_megatron_core(impl, peer, policy, model, setup):
    """Dense and expert buffers alike: megatron plans each expert buffer for the expert-DP size."""
    config = setup.config(policy)
    ours, theirs = plan_specs(impl, model, config), plan_specs(peer, model, config)
    check_equal(len(ours), len(theirs), "number of buffers")
    for i, (a, b) in enumerate(zip(ours, theirs)):
        check_equal(a.expert_parallel, b.expert_parallel, f"buffer {i} holds expert params (vs megatron-core)")
        for field, value in _fields(a).items():
            check_equal(value, _fields(b)[field], f"buffer {i} {field} (vs megatron-core)")
