"""Bucket groups: buckets whose gradient collectives launch together, once all their grads are in.

With overlap on, the group launches its (coalesced, asynchronous) all-reduce
or reduce-scatter from the backward hook of its last param, while backward
goes on producing the other buckets' grads. ``finish`` launches whatever is
left and waits. A group of one rank has nothing to exchange: its grads are
scaled and no collective is issued (an AVG over one rank is the identity,
and NCCL before 2.29.7 leaves trailing elements of one unwritten,
NVIDIA/nccl#1950).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from .buffer import Bucket, ParamAndGradBuffer
from .collectives import reduce_scatter


class GradSyncError(RuntimeError):
    """A gradient synchronization problem, reported the same way on every rank."""


@dataclass(frozen=True)
class Member:
    buffer: ParamAndGradBuffer
    bucket: Bucket


class BucketGroup:
    def __init__(
        self,
        index: int,
        members: list[Member],
        group: dist.ProcessGroup,
        scaling_factor: float,
        average_in_collective: bool,
        reduce_scatter: bool,
        check_for_nan: bool,
    ) -> None:
        self.index = index
        self.members = members
        self.group = group
        self.rank = group.rank()
        self.scaling_factor = scaling_factor
        self.op = dist.ReduceOp.AVG if average_in_collective else dist.ReduceOp.SUM
        self.reduce_scatter = reduce_scatter
        self.check_for_nan = check_for_nan
        self.param_names = {name for m in members for name in m.bucket.param_names}
        self.ready: set[str] = set()
        self.handle = None
        self.launched = False
        self.problems: list[str] = []

    def register_grad_ready(self, name: str, launch: bool) -> None:
        """Mark ``name``'s grad as in; launch the collectives when it completes the group."""
        if name in self.ready:
            raise GradSyncError(
                f"param {name!r}: gradient registered twice in one step (bucket group {self.index}), "
                "but should be once; accumulate microbatches inside no_sync() and call "
                "zero_grad_buffer() between steps"
            )
        self.ready.add(name)
        if launch and len(self.ready) == len(self.param_names):
            self.start()

    def missing(self) -> list[str]:
        return sorted(self.param_names - self.ready)

    def start(self) -> None:
        """Scale, then launch every bucket's collective asynchronously (coalesced when several)."""
        if self.launched:
            return
        self.launched = True
        if self.check_for_nan:
            self._check_finite()
        if self.scaling_factor != 1.0:
            for m in self.members:
                m.bucket.grad_data.mul_(self.scaling_factor)
        if self.group.size() == 1:
            return
        if len(self.members) == 1:  # nothing to coalesce: skip the manager's launch cost
            self.handle = self._launch(self.members[0])
            return
        with dist._coalescing_manager(group=self.group, async_ops=True) as manager:
            for m in self.members:
                self._launch(m)
        self.handle = manager

    def _launch(self, m: Member):
        if self.reduce_scatter:
            shard = m.buffer.grad_shards(m.bucket.index)[self.rank]
            return reduce_scatter(shard, m.bucket.grad_data, op=self.op, group=self.group, async_op=True)
        return dist.all_reduce(m.bucket.grad_data, op=self.op, group=self.group, async_op=True)

    def wait(self) -> None:
        if self.handle is not None:
            self.handle.wait()
            self.handle = None

    def reset(self) -> None:
        self.ready.clear()
        self.handle = None
        self.launched = False
        self.problems = []

    def _check_finite(self) -> None:
        for m in self.members:
            if torch.isfinite(m.bucket.grad_data).all():
                continue
            for name in m.bucket.param_names:
                grad = m.buffer.params[name].main_grad
                if not torch.isfinite(grad).all():
                    kind = "NaN" if torch.isnan(grad).any() else "Inf"
                    self.problems.append(
                        f"{kind} in the gradient of {name!r} (bucket {m.bucket.index}) on rank {self.rank}"
                    )
