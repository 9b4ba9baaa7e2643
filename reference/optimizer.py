"""Optimizers over fp32 main params: plain (every rank steps everything) or distributed (own shards).

Both keep a list of slots (fp32 main tensor, where its grad comes from, where
the result goes). The plain optimizer has one slot per param; the distributed
optimizer one per bucket: the rank's shard of it, which ignores param
boundaries. A standard torch optimizer steps the main tensors; element-wise
optimizers (SGD, Adam) give the same bits however the elements are grouped.

Norms and zero counts count every distinct param element exactly once across
the world: a slot is *counted* on one rank only (the shard's owner in the
first distributed-optimizer instance; for a replicated param, the first rank
of the group it is replicated over, so an expert counts once however many
expert-data-parallel replicas it has), and the counts are summed over the
data-parallel group.

``grad_norm_skip_threshold`` (upstream's, for the optimizer): when the
global grad norm, taken before clipping, exceeds it, the step is skipped:
nothing is updated and no param is gathered. Clipping scales the fp32 main
grads, as upstream's mixed-precision optimizer does: a bf16 grad is copied to
fp32 first, never clipped in bf16 (an fp32 grad is its own main grad, and stays
clipped in its buffer).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from .bucket_group import GradSyncError
from .clip import clip_by_total_norm, count_zeros, grad_norm
from .ddp import DistributedDataParallel

MakeOptimizer = Callable[[list[torch.Tensor]], torch.optim.Optimizer]


@dataclass
class Slot:
    main: torch.Tensor  # fp32 tensor the torch optimizer steps
    grad: torch.Tensor  # reduced grad (a view into the grad buffer)
    model: torch.Tensor  # where updated values go (param data or the rank's param shard)
    param_spans: list[tuple[int, int]]  # [start, end) of param elements in ``grad`` (no padding)
    counted: bool  # whether this rank counts the slot in norms and zero counts
    fp32_grads: list[tuple[int, int, torch.Tensor]] = field(default_factory=list)
    """[start, end) of ``grad`` whose params accumulate in an fp32 main_grad of their own, and those elements of it."""

    def main_grad(self) -> torch.Tensor:
        """The fp32 grad the optimizer steps with: ``grad`` (itself where it is fp32), with the elements of params
        accumulating in fp32 read from their own main_grad, as upstream copies each param's main_grad."""
        if self.grad.dtype == torch.float32 and not self.fp32_grads:
            return self.grad
        out = self.grad.float().clone() if self.grad.dtype == torch.float32 else self.grad.float()
        for start, end, values in self.fp32_grads:
            out.reshape(-1)[start:end] = values
        return out

    def param_grads(self, grad: torch.Tensor) -> list[torch.Tensor]:
        """The elements of ``grad`` (this slot's, or its main grad) that belong to params, padding left out."""
        flat = grad.reshape(-1)
        return [flat[a:b] for a, b in self.param_spans]


class ReferenceOptimizer:
    """Steps a torch optimizer over fp32 main params, with optional global-norm clipping."""

    def __init__(self, ddp: DistributedDataParallel, make_optimizer: MakeOptimizer,
                 max_grad_norm: float | None = None, norm_type: float = 2.0,
                 grad_norm_skip_threshold: float | None = None) -> None:
        if grad_norm_skip_threshold is not None and not grad_norm_skip_threshold > 0:
            raise ValueError(f"grad_norm_skip_threshold: got {grad_norm_skip_threshold!r}, but should be a positive "
                             "number (or None: never skip)")
        self.ddp = ddp
        self.distributed = ddp.config.distributed_optimizer
        self.max_grad_norm = max_grad_norm
        self.norm_type = norm_type
        self.skip_threshold = grad_norm_skip_threshold
        self.skipped = False  # whether the last step was skipped for its grad norm
        self.slots = self._shard_slots() if self.distributed else self._param_slots()
        self.device = ddp.buffers[0].grad_data.device
        self.optimizer = make_optimizer([s.main for s in self.slots])

    def _param_slots(self) -> list[Slot]:
        slots = []
        for buf in self.ddp.buffers:
            first_replica = self.ddp.rank_in(buf) == 0
            for param in buf.params.values():
                model = param.data
                main = model if model.dtype == torch.float32 else model.float()
                slots.append(Slot(main, param.main_grad, model, [(0, param.numel())], first_replica))
        return slots

    def _shard_slots(self) -> list[Slot]:
        slots = []
        for buf in self.ddp.buffers:
            rank = self.ddp.rank_in(buf)
            for bucket in buf.buckets:
                lo, hi = buf.owned_range(bucket.index, rank)
                spans = [
                    (max(start, lo) - lo, min(end, hi) - lo)
                    for start, end, b in buf.layout.param_index_map.values()
                    if b == bucket.index and max(start, lo) < min(end, hi)
                ]
                local = [(max(start, lo) - lo, min(end, hi) - lo,
                          self.ddp.local_fp32_grads[name].main_grad.reshape(-1)[max(start, lo) - start:min(end, hi) - start])
                         for name, (start, end, b) in buf.layout.param_index_map.items()
                         if b == bucket.index and max(start, lo) < min(end, hi) and name in self.ddp.local_fp32_grads]
                shard = buf.param_shards(bucket.index)[rank]
                main = shard if shard.dtype == torch.float32 else shard.float()
                slots.append(Slot(main, buf.grad_shards(bucket.index)[rank], shard, sorted(spans),
                                  self.ddp.counts_here(buf), local))
        return slots

    def step(self) -> float | None:
        """One update; returns the grad norm (before clipping) when clipping or skipping by it, else None."""
        if not self.ddp.grad_sync_finished:
            raise GradSyncError(
                "optimizer step before gradients are finished: got step() with grad sync "
                "outstanding, but should call finish_grad_sync() or finalize_model_grads() first"
            )
        for slot in self.slots:  # fp32 main grads, which the norm reads and clipping scales (as upstream)
            slot.main.grad = slot.main_grad()
        norm = None
        if self.max_grad_norm is not None or self.skip_threshold is not None:
            norm = grad_norm(self.grads_for_norm(), self.norm_type, self.ddp.group, self.device)
        if self.max_grad_norm is not None:
            clip_by_total_norm([s.main.grad for s in self.slots], self.max_grad_norm, norm)
        self.skipped = self.skips(norm)
        if not self.skipped:
            self.optimizer.step()
        for slot in self.slots:
            slot.main.grad = None
        if self.skipped:
            return norm
        for slot in self.slots:
            if slot.main is not slot.model:
                slot.model.copy_(slot.main)
        if self.distributed:
            self.ddp.start_param_sync()
            if not self.ddp.config.overlap_param_gather:
                self.ddp.finish_param_sync()
        return norm

    def skips(self, norm: float | None) -> bool:
        """Whether a step whose grad norm, taken before clipping, is ``norm`` is skipped."""
        return self.skip_threshold is not None and norm > self.skip_threshold

    def zero_grad(self) -> None:
        self.ddp.zero_grad_buffer()

    def grads_for_norm(self) -> Sequence[torch.Tensor]:
        """This rank's share of the param elements of the main grads (padding never part of a norm or a zero
        count)."""
        return [g for s in self.slots if s.counted
                for g in s.param_grads(s.main.grad if s.main.grad is not None else s.main_grad())]

    def count_zeros(self) -> int:
        """Zero gradient elements over the whole model (each counted once, padding excluded)."""
        return count_zeros(self.grads_for_norm(), self.ddp.group, self.device)
