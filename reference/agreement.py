"""Cross-rank agreement on a side channel, so one rank's problem fails every rank instead of hanging them.

The agreement runs on a separate gloo group: if the gradient group is left
with a collective that only some ranks issued, the side channel still works.
"""

from __future__ import annotations

import datetime

import torch
import torch.distributed as dist

from .process_groups import new_group

DEFAULT_TIMEOUT = datetime.timedelta(minutes=5)
_control_groups: dict[tuple[int, ...], dist.ProcessGroup] = {}


def control_group(group: dist.ProcessGroup, timeout: datetime.timedelta = DEFAULT_TIMEOUT) -> dist.ProcessGroup:
    """A gloo group over the same ranks as ``group``, made once per rank set (creation is collective)."""
    ranks = tuple(dist.get_process_group_ranks(group))
    if ranks not in _control_groups:
        _control_groups[ranks] = new_group(list(ranks), backend="gloo", timeout=timeout)
    return _control_groups[ranks]


def gather_problems(problems: list[str], group: dist.ProcessGroup) -> list[str]:
    """Every rank's problems, on every rank; costs one tiny all-reduce when there are none."""
    flag = torch.tensor([len(problems)], dtype=torch.int64)
    dist.all_reduce(flag, group=group)
    if flag.item() == 0:
        return []
    gathered: list[list[str] | None] = [None] * dist.get_world_size(group)
    dist.all_gather_object(gathered, problems, group=group)
    return [p for rank_problems in gathered for p in (rank_problems or [])]


def differences_from_rank0(value: dict, group: dist.ProcessGroup) -> list[str]:
    """Fields where some rank's ``value`` differs from rank 0's, described per rank."""
    gathered: list[dict | None] = [None] * dist.get_world_size(group)
    dist.all_gather_object(gathered, value, group=group)
    base, diffs = gathered[0], []
    for rank, other in enumerate(gathered[1:], start=1):
        for key in sorted(set(base) | set(other)):
            if base.get(key) != other.get(key):
                diffs.append(f"{key}: rank {rank} has {_short(other.get(key))}, rank 0 has {_short(base.get(key))}")
    return diffs


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."
