"""Expert parallelism: a mixture of experts trains like one process holding every expert.

Each rank holds the experts of its expert-parallel slice; tokens reach them
through an all-to-all over the ep group (``moe.TinyMoE``). The oracle is the
same model in one process, trained on the global batch with the global mean
loss: its gradient of every expert is what the expert's replicas must hold
after the sync, summed over the expert-data-parallel group and scaled by 1/dp.
"""

import pytest

from suites.impls import load_implementation

from .cases import EXPERT_CASES, Case, params
from .training import train_against_single_process

pytestmark = pytest.mark.requires("ddp", "expert")

def check_experts_match_single_process(ctx, case: Case) -> int:
    return train_against_single_process(ctx, load_implementation(ctx.impl_spec), case)


@pytest.mark.parametrize("case", params(EXPERT_CASES))
def test_experts_train_like_one_process(ranks, impl, case):
    steps = ranks.run(check_experts_match_single_process, case)
    assert steps == [case.steps] * case.moe.world, f"steps compared per rank: got {steps}"
