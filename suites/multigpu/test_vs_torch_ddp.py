"""Every registered case trains exactly like torch's DistributedDataParallel (bitwise at ws=2, fp32)."""

import pytest

from suites.impls import load_implementation

from .cases import BY_NAME, CASE_IDS
from .training import train_against_torch_ddp, unsupported

pytestmark = pytest.mark.requires("ddp")


def check_matches_torch_ddp(ctx, case_name: str) -> int:
    records = train_against_torch_ddp(ctx, load_implementation(ctx.impl_spec), BY_NAME[case_name])
    return len(records)


@pytest.mark.parametrize("case", CASE_IDS)
def test_matches_torch_ddp(ranks, impl, case):
    if unsupported(impl, BY_NAME[case]):
        pytest.skip(unsupported(impl, BY_NAME[case]))
    steps = ranks.run(check_matches_torch_ddp, case)
    assert steps == [BY_NAME[case].steps] * ranks.world_size, f"steps compared per rank: got {steps}"
