"""The implementation trains like one process on the global batch (torch's own DDP test pattern)."""

import pytest

from suites.impls import load_implementation

from .cases import BY_NAME, CASES, Case, params
from .training import train_against_single_process, train_two_configs

pytestmark = pytest.mark.requires("ddp")

SINGLE = CASES
PAIRS = [(c, BY_NAME[c.name.replace("allreduce", "distopt")]) for c in CASES
         if c.policy == "packed" and c.name.replace("allreduce", "distopt") in BY_NAME]


def check_matches_single_process(ctx, case: Case) -> None:
    train_against_single_process(ctx, load_implementation(ctx.impl_spec), case)


def check_distopt_equals_allreduce(ctx, allreduce: Case, distopt: Case) -> None:
    # Gradient sums agree bitwise at ws=2; norms summed from shards round differently.
    bitwise = allreduce.bitwise(ctx.world_size)
    train_two_configs(ctx, load_implementation(ctx.impl_spec), allreduce, distopt, bitwise)


@pytest.mark.parametrize("case", params(SINGLE))
def test_matches_single_process(ranks, impl, case):
    ranks.run(check_matches_single_process, case)


@pytest.mark.parametrize("allreduce, distopt", PAIRS, ids=[a.name.removeprefix("allreduce-") for a, _ in PAIRS])
def test_distributed_optimizer_equals_allreduce(ranks, impl, allreduce, distopt):
    ranks.run(check_distopt_equals_allreduce, allreduce, distopt)
