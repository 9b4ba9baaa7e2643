"""The implementation trains like one process on the global batch (torch's own DDP test pattern)."""

import pytest

from suites.impls import load_implementation

from .cases import BY_NAME, CASES
from .training import train_against_single_process, train_two_configs, unsupported

pytestmark = pytest.mark.requires("ddp")

SINGLE = [c.name for c in CASES if not c.bf16]
PAIRS = [(c.name, c.name.replace("allreduce", "distopt")) for c in CASES
         if c.policy == "packed" and c.name.replace("allreduce", "distopt") in BY_NAME]


def check_matches_single_process(ctx, case_name: str) -> None:
    train_against_single_process(ctx, load_implementation(ctx.impl_spec), BY_NAME[case_name])


def check_distopt_equals_allreduce(ctx, allreduce: str, distopt: str) -> None:
    first, second = BY_NAME[allreduce], BY_NAME[distopt]
    # Gradient sums agree bitwise at ws=2; norms summed from shards round differently.
    bitwise = first.bitwise(ctx.world_size)
    train_two_configs(ctx, load_implementation(ctx.impl_spec), first, second, bitwise)


@pytest.mark.parametrize("case", SINGLE)
def test_matches_single_process(ranks, impl, case):
    if unsupported(impl, BY_NAME[case]):
        pytest.skip(unsupported(impl, BY_NAME[case]))
    ranks.run(check_matches_single_process, case)


@pytest.mark.parametrize("allreduce, distopt", PAIRS, ids=[a.removeprefix("allreduce-") for a, _ in PAIRS])
def test_distributed_optimizer_equals_allreduce(ranks, impl, allreduce, distopt):
    for name in (allreduce, distopt):
        if unsupported(impl, BY_NAME[name]):
            pytest.skip(unsupported(impl, BY_NAME[name]))
    ranks.run(check_distopt_equals_allreduce, allreduce, distopt)
