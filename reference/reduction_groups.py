"""The process groups a buffer's gradients are reduced over.

With one distributed-optimizer instance (the usual case) that is the
data-parallel group (or, for expert buffers, the expert-data-parallel group)
for everything. With ``N`` instances (upstream's
``num_distributed_optimizer_instances``) each instance is ``size / N``
consecutive ranks of that group: a bucket is reduce-scattered within the
instance, into the shard the rank owns there, and that shard is then
all-reduced with the ranks at the same place in every other instance.
Forcing an all-reduce reduces the whole bucket over the whole group.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.distributed as dist

from .process_groups import new_group

_made: dict[tuple[tuple[int, ...], int], "ReduceGroups"] = {}


@dataclass(frozen=True)
class ReduceGroups:
    whole: dist.ProcessGroup
    """Every rank holding a replica of these grads (a forced all-reduce reduces over it)."""
    shard: dist.ProcessGroup
    """The ranks a bucket is reduce-scattered and sharded over: the whole group, or one instance."""
    across: dist.ProcessGroup | None
    """The ranks at this rank's place in every instance (its shard is all-reduced over them); None for one."""


def reduce_groups(group: dist.ProcessGroup, instances: int) -> ReduceGroups:
    """The groups for ``instances`` distributed-optimizer instances over ``group``; made once per rank set.

    Only this rank's two groups are made, by their own members
    (``use_local_synchronization``), so ranks of other data-parallel groups need not take part.
    """
    if instances == 1:
        return ReduceGroups(group, group, None)
    ranks = tuple(dist.get_process_group_ranks(group))
    key = (ranks, instances)
    if key not in _made:
        size = len(ranks) // instances
        me = ranks.index(dist.get_rank())
        block = list(ranks[me // size * size:(me // size + 1) * size])
        place = list(ranks[me % size::size])
        _made[key] = ReduceGroups(group, new_group(block, use_local_synchronization=True),
                                  new_group(place, use_local_synchronization=True))
    return _made[key]
