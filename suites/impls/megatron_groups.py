"""The process groups megatron-core's DDP and optimizer read from their ``ProcessGroupCollection``.

Data parallelism is the group the suites hand in, expert data parallelism the
expert group; tensor, pipeline and context parallelism are singletons. The
expert-parallel group follows from every rank's expert group. With ``N``
distributed-optimizer instances the intra-instance groups (``intra_dp_cp``,
``intra_expt_dp``, ``intra_dist_opt``) and the inter-instance group
(``inter_dist_opt``) are the reference's (``reference.reduction_groups``): ``size / N``
consecutive ranks, and the ranks at the same place in every instance, which
is how upstream's ``parallel_state`` lays them out for pure data parallelism.
Upstream derives its one inter-instance group from the expert-data-parallel
ranks and uses it for dense and expert params alike (``parallel_state.py:2457-2467``
in 0.19.2); so does this.
"""

from __future__ import annotations

import torch.distributed as dist

from reference.reduction_groups import reduce_groups
from reference.process_groups import new_group

_made: dict[tuple, tuple] = {}


def process_groups(group, expert_group, instances: int = 1):
    """Upstream's group collection for data-parallel ``group``, ``expert_group`` and ``instances``.

    The singletons and the expert-parallel groups are made by every rank
    (``new_group`` is collective), so each rank's expert group is gathered
    first and the groups are made in one order; the instance groups by their
    members only.
    """
    from megatron.core.process_groups_config import ProcessGroupCollection

    singleton, ep = _singleton_and_expert_parallel(group, expert_group)
    dense, expert = reduce_groups(group, instances), reduce_groups(expert_group, instances)
    across = {} if expert.across is None else {"inter_dist_opt": expert.across}
    return ProcessGroupCollection(
        tp=singleton, pp=singleton, cp=singleton, expt_tp=singleton, mp=singleton, ep=ep, tp_ep_pp=ep,
        embd=None, pos_embd=None, dp=group, dp_cp=group, intra_dp_cp=dense.shard, expt_dp=expert_group,
        intra_expt_dp=expert.shard, intra_dist_opt=dense.shard, **across,
    )


def _singleton_and_expert_parallel(group, expert_group) -> tuple:
    ranks = tuple(dist.get_process_group_ranks(group))
    expert_ranks = tuple(dist.get_process_group_ranks(expert_group))
    everyone: list = [None] * len(ranks)
    dist.all_gather_object(everyone, expert_ranks, group=group)
    key = (ranks, tuple(everyone))
    if key not in _made:
        me = dist.get_rank()
        singleton = _own(me, [[r] for r in ranks])
        # A rank's place in its expert-DP group is its expert-data-parallel index; the ranks sharing
        # that index hold the other experts: the expert-parallel group.
        ep_groups = sorted({tuple(sorted(r for r, e in zip(ranks, everyone) if e.index(r) == i))
                            for i in range(len(expert_ranks))})
        _made[key] = singleton, _own(me, [list(g) for g in ep_groups])
    return _made[key]


def _own(me: int, member_lists: list[list[int]]):
    """Create every group (collective), return the one holding ``me``."""
    mine = None
    for members in member_lists:
        made = new_group(members)
        if me in members:
            mine = made
    return mine
