"""Bucket groups: buckets whose gradient collectives launch together, once all their grads are in.

With overlap on, the group launches its (coalesced, asynchronous) all-reduce
or reduce-scatter from the backward hook of its last param, while backward
goes on producing the other buckets' grads. ``finish`` launches whatever is
left and waits. What it launches (docs/rules.md, sections 2 and 6):

- all-reduce of each bucket (no distributed optimizer, or a forced
  all-reduce, which reduces over every replica);
- reduce-scatter of each bucket into the rank's cached shard view, within
  its distributed-optimizer instance, then, with several instances, an
  all-reduce of that shard across the instances (after the reduce-scatter);
- with fp32 accumulation, the reduce-scatter is an all-to-all of the buckets'
  chunks summed over the ranks in fp32, in rank order, and rounded once.

A group of one rank has nothing to exchange: its grads are scaled and no
collective is issued (an AVG over one rank is the identity, and NCCL before
2.29.7 leaves trailing elements of one unwritten, NVIDIA/nccl#1950). gloo
coalesces all-reduces of CPU tensors only (``allreduce_coalesced`` refuses
CUDA tensors: "Invalid backend"), so over gloo with CUDA tensors, or on a
torch without its coalescing manager, each bucket's collective is launched
on its own and the group waits for all.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from compat import private_torch

from .buffer import Bucket, ParamAndGradBuffer
from .collectives import reduce_scatter
from .reduction_groups import ReduceGroups


class GradSyncError(RuntimeError):
    """A gradient synchronization problem, reported the same way on every rank."""


def coalesces(group: dist.ProcessGroup, device: torch.device) -> bool:
    """Whether ``group`` can launch several collectives on ``device`` tensors as one: not gloo on CUDA, and not
    where torch has no coalescing manager."""
    if private_torch.coalescing_manager() is None:
        return False
    return not (device.type == "cuda" and dist.get_backend(group) == "gloo")


@dataclass(frozen=True)
class AllOf:
    """Several asynchronous collectives waited for as one."""

    works: list

    def wait(self) -> None:
        for work in self.works:
            work.wait()


@dataclass(frozen=True)
class Member:
    buffer: ParamAndGradBuffer
    bucket: Bucket


@dataclass(frozen=True)
class LocalFp32Grad:
    """A param that accumulates microbatches in an fp32 ``main_grad`` of its own, beside its buffer view."""

    main_grad: torch.Tensor
    in_buffer: torch.Tensor


class Fp32AccumulatingReduceScatter:
    """The handle of an all-to-all of a bucket's chunks; ``wait`` sums them over the ranks in fp32, into the shard."""

    def __init__(self, work, received: torch.Tensor, shard: torch.Tensor, ranks: int) -> None:
        self.work, self.received, self.shard, self.ranks = work, received, shard, ranks

    def wait(self) -> None:
        self.work.wait()
        self.shard.copy_(torch.sum(self.received.view(self.ranks, -1), dim=0, dtype=torch.float32))


class BucketGroup:
    def __init__(
        self,
        index: int,
        members: list[Member],
        groups: ReduceGroups,
        scaling_factor: float,
        average_in_collective: bool,
        reduce_scatter: bool,
        check_for_nan: bool,
        fp32_accumulation: bool = False,
        local_fp32_grads: dict[str, LocalFp32Grad] | None = None,
    ) -> None:
        self.index = index
        self.members = members
        self.groups = groups
        self.rank = groups.shard.rank()
        self.scaling_factor = scaling_factor
        self.op = dist.ReduceOp.AVG if average_in_collective else dist.ReduceOp.SUM
        self.reduce_scatter = reduce_scatter
        self.check_for_nan = check_for_nan
        self.fp32_accumulation = fp32_accumulation
        self.param_names = {name for m in members for name in m.bucket.param_names}
        self.local_fp32_grads = {n: g for n, g in (local_fp32_grads or {}).items() if n in self.param_names}
        self.ready: set[str] = set()
        self.handles: list = []
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

    def start(self, force_all_reduce: bool = False) -> None:
        """Stage, check and scale the grads, then launch every bucket's collectives asynchronously (coalesced when
        several)."""
        if self.launched:
            return
        self.launched = True
        self.stage_local_grads()
        if self.check_for_nan:
            self._check_finite()
        self.scale()
        self.launch(force_all_reduce)

    def stage_local_grads(self) -> None:
        """Params accumulating in an fp32 main_grad of their own put it into the buffer, to be scaled and reduced."""
        for grad in self.local_fp32_grads.values():
            grad.in_buffer.copy_(grad.main_grad)

    def scale(self) -> None:
        if self.scaling_factor != 1.0:
            for m in self.members:
                m.bucket.grad_data.mul_(self.scaling_factor)

    def launch(self, force_all_reduce: bool = False) -> None:
        if force_all_reduce or not self.reduce_scatter:
            group = self.groups.whole if force_all_reduce else self.groups.shard
            self.handles = [self._each(group, lambda m: dist.all_reduce(
                m.bucket.grad_data, op=self.op, group=group, async_op=True))]
        elif self.fp32_accumulation:
            self.handles = [self._fp32_reduce_scatter(m) for m in self.members]
        else:
            self.handles = [self._each(self.groups.shard, lambda m: reduce_scatter(
                self._shard(m), m.bucket.grad_data, op=self.op, group=self.groups.shard, async_op=True))]
            if self.groups.across is not None:
                self._wait_handles()  # the shard must be reduced within the instance before it crosses
                self.handles = [self._each(self.groups.across, lambda m: dist.all_reduce(
                    self._shard(m), op=self.op, group=self.groups.across, async_op=True))]

    def _each(self, group: dist.ProcessGroup, launch):
        """``launch(member)`` for every member, coalesced when there are several and the group can coalesce
        them; one handle to wait on, None over one rank."""
        if group.size() == 1:
            return None
        if len(self.members) == 1:  # nothing to coalesce: skip the manager's launch cost
            return launch(self.members[0])
        if not coalesces(group, self.members[0].bucket.grad_data.device):
            return AllOf([launch(m) for m in self.members])
        with private_torch.coalescing_manager()(group=group, async_ops=True) as manager:
            for m in self.members:
                launch(m)
        return manager

    def _shard(self, m: Member) -> torch.Tensor:
        return m.buffer.grad_shards(m.bucket.index)[self.rank]

    def _fp32_reduce_scatter(self, m: Member):
        ranks = self.groups.shard.size()
        if ranks == 1:
            return None
        received = torch.empty_like(m.bucket.grad_data)
        work = dist.all_to_all_single(received, m.bucket.grad_data, group=self.groups.shard, async_op=True)
        return Fp32AccumulatingReduceScatter(work, received, self._shard(m), ranks)

    def _wait_handles(self) -> None:
        for handle in self.handles:
            if handle is not None:
                handle.wait()
        self.handles = []

    def wait(self) -> None:
        """Wait for the collectives; params accumulating in fp32 get their reduced grads back."""
        self._wait_handles()
        for grad in self.local_fp32_grads.values():
            grad.main_grad.copy_(grad.in_buffer)

    def reset(self) -> None:
        self.ready.clear()
        self.handles = []
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
