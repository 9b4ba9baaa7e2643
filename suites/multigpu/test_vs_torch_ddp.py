"""Every registered case trains exactly like torch's DistributedDataParallel (bitwise at ws=2, fp32)."""

import pytest

from suites.impls import load_implementation

from .cases import CASES, GRAD_SYNC_CASES, Case, params
from .models import make_model
from .training import first_step_grads_against_torch_ddp, train_against_torch_ddp

pytestmark = pytest.mark.requires("ddp")


def check_matches_torch_ddp(ctx, case: Case) -> int:
    return train_against_torch_ddp(ctx, load_implementation(ctx.impl_spec), case)


def check_grad_sync_matches_torch_ddp(ctx, case: Case) -> int:
    return first_step_grads_against_torch_ddp(ctx, load_implementation(ctx.impl_spec), case)


@pytest.mark.parametrize("case", params(GRAD_SYNC_CASES))
def test_grad_sync_matches_torch_ddp(ranks, impl, case):
    """The ddp level alone: one step's reduced grads, so peers without an optimizer level are checked too."""
    compared = ranks.run(check_grad_sync_matches_torch_ddp, case)
    numel = sum(p.numel() for p in make_model(case.tied).parameters())
    # All-reduce (or a forced one): every rank holds every grad; distributed optimizer: each element on exactly
    # one rank of each instance.
    everywhere = case.policy == "packed" or case.force_all_reduce
    want = numel * (ranks.world_size if everywhere else case.instances)
    assert sum(compared) == want, f"grad elements compared over all ranks: got {compared}, but should sum to {want}"


@pytest.mark.parametrize("case", params(CASES))
def test_matches_torch_ddp(ranks, impl, case):
    steps = ranks.run(check_matches_torch_ddp, case)
    assert steps == [case.steps] * ranks.world_size, f"steps compared per rank: got {steps}"
