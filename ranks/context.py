"""What a check function gets on every rank.

One dataclass for both launch modes, so a check written once runs unchanged
under torchrun (in the pytest process) and under plain pytest (in a pool worker).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import torch
    from torch.distributed import ProcessGroup


@dataclass(frozen=True)
class Transport:
    """How the ranks talk: their process group's backend and where its tensors live (``joining.tensors_on``)."""

    backend: str
    tensors: str

    def __str__(self) -> str:
        return f"{self.backend}+{self.tensors}"


TRANSPORTS = ("gloo+cpu", "gloo+cuda", "nccl+cuda")


@dataclass(frozen=True, repr=False)
class RankContext:
    """This rank's place in the job; ``group`` is for the collectives under test."""

    rank: int
    world_size: int
    backend: str
    """``"gloo"`` or ``"nccl"``."""
    device: torch.device
    """``cpu``, or ``cuda:LOCAL_RANK`` under nccl."""
    group: ProcessGroup
    """The group the checks use (the default WORLD group)."""
    control_group: ProcessGroup
    """A separate gloo group (CPU tensors, same short timeout) for bookkeeping beside the group under
    test, e.g. gathering results to compare. The harness agrees on outcomes over a private group of
    its own, so a check that uses this one cannot get in the way of that agreement."""
    impl_spec: str
    """The ``--impl`` string: ``suites.impls.load_implementation(ctx.impl_spec)``."""
    timeout: timedelta
    """How long a collective on ``group`` waits for the other ranks before it fails."""

    @property
    def transport(self) -> Transport:
        return Transport(self.backend, self.device.type)

    def sync(self) -> None:
        """Wait for queued device work, so that a timer measures the work, not its launch."""
        if self.device.type == "cuda":
            import torch

            torch.cuda.synchronize(self.device)

    def agree(self, value):
        """Rank 0's ``value`` (a bool or a small int) on every rank, over the control group: a decision every rank
        must take alike (stop sampling now, the warm-up has settled)."""
        if self.world_size == 1:
            return value
        import torch
        import torch.distributed as dist

        decided = torch.tensor([int(value)], dtype=torch.int64)
        dist.broadcast(decided, src=dist.get_global_rank(self.control_group, 0), group=self.control_group)
        return type(value)(decided.item())

    def __repr__(self) -> str:  # short: assertion messages quote it
        return (
            f"RankContext(rank {self.rank} of {self.world_size}, {self.backend}, {self.device}, "
            f"impl {self.impl_spec!r})"
        )


def requires_peers(ctx: RankContext, count: int = 2) -> None:
    """Skip (on this rank, hence the test) unless the job has at least ``count`` ranks."""
    if ctx.world_size < count:
        pytest.skip(f"needs at least {count} ranks, got world size {ctx.world_size}")
