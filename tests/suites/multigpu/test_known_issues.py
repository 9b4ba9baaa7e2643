"""Known faults below the implementations are marked exactly where a case meets them."""

import pytest

from suites.multigpu.cases import BY_NAME, EXPERT_CASES
from suites.multigpu.known_issues import avg_over_one_rank

AVG = BY_NAME["allreduce-avg-in-collective"]
EXPERT_AVG = {c.name: c for c in EXPERT_CASES}


@pytest.mark.parametrize("case, world_size, backend, version, hit", [
    (AVG, 1, "nccl", (2, 27, 3), True),           # one rank, old NCCL
    (AVG, 1, "nccl", (2, 29, 7), False),          # fixed
    (AVG, 2, "nccl", (2, 27, 3), False),          # two ranks: no one-rank group
    (AVG, 1, "gloo", None, False),                # gloo averages correctly
    (BY_NAME["allreduce-microbatches"], 1, "nccl", (2, 27, 3), False),  # SUM is not affected
    (EXPERT_AVG["moe-ep2-edp1-allreduce-avg-in-collective"], 2, "nccl", (2, 21, 5), True),  # edp = 1
    (EXPERT_AVG["moe-ep1-edp2-allreduce-avg-in-collective"], 2, "nccl", (2, 21, 5), False),
    (AVG, 1, "nccl", None, True),                 # unknown version: assume the worst
])
def test_avg_over_a_one_rank_group_on_old_nccl_is_marked(case, world_size, backend, version, hit):
    reason = avg_over_one_rank(case, world_size, backend, version)
    assert (reason is not None) == hit, reason
    if hit:
        assert "NVIDIA/nccl#1950" in reason
