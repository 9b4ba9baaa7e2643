"""Two configurations that must train the same model do: the distributed optimizer and plain all-reduce.

For each registered all-reduce case with a distributed-optimizer twin, the
implementation trains both and their params must agree after every step:
bitwise at world size 2 in fp32 (the grad sums agree bitwise there; norms
summed from shards round differently). Every case is also checked against
torch DDP (``test_vs_torch_ddp.py``) and every pair of axis values against
one process on the global batch (``test_compositions.py``).
"""

import pytest

from suites.impls import load_implementation

from .cases import BY_NAME, CASES, Case
from .training import train_two_configs

pytestmark = pytest.mark.requires("ddp")

PAIRS = [(c, BY_NAME[c.name.replace("allreduce", "distopt")]) for c in CASES
         if c.policy == "packed" and c.name.replace("allreduce", "distopt") in BY_NAME]


def check_distopt_equals_allreduce(ctx, allreduce: Case, distopt: Case) -> None:
    bitwise = allreduce.bitwise(ctx.world_size)
    train_two_configs(ctx, load_implementation(ctx.impl_spec), allreduce, distopt, bitwise)


@pytest.mark.parametrize("allreduce, distopt", PAIRS, ids=[a.name.removeprefix("allreduce-") for a, _ in PAIRS])
def test_distributed_optimizer_equals_allreduce(ranks, impl, allreduce, distopt):
    ranks.run(check_distopt_equals_allreduce, allreduce, distopt)
