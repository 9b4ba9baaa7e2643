"""Optimizers over fp32 main params: plain (every rank steps everything) or distributed (own shards).

Both keep a list of slots (fp32 main tensor, where its grad comes from, where
the result goes). The plain optimizer has one slot per param; the distributed
optimizer one per bucket: the rank's shard of it, which ignores param
boundaries. A standard torch optimizer steps the main tensors; element-wise
optimizers (SGD, Adam) give the same bits however the elements are grouped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch
import torch.distributed as dist

from .bucket_group import GradSyncError
from .clip import clip_by_total_norm, grad_norm
from .ddp import DistributedDataParallel

MakeOptimizer = Callable[[list[torch.Tensor]], torch.optim.Optimizer]


@dataclass
class Slot:
    main: torch.Tensor  # fp32 tensor the torch optimizer steps
    grad: torch.Tensor  # reduced grad (a view into the grad buffer)
    model: torch.Tensor  # where updated values go (param data or the rank's param shard)


class ReferenceOptimizer:
    """Steps a torch optimizer over fp32 main params, with optional global-norm clipping."""

    def __init__(self, ddp: DistributedDataParallel, make_optimizer: MakeOptimizer,
                 max_grad_norm: float | None = None, norm_type: float = 2.0) -> None:
        self.ddp = ddp
        self.distributed = ddp.config.distributed_optimizer
        self.max_grad_norm = max_grad_norm
        self.norm_type = norm_type
        self.slots = self._shard_slots() if self.distributed else self._param_slots()
        self.optimizer = make_optimizer([s.main for s in self.slots])

    def _param_slots(self) -> list[Slot]:
        slots = []
        for buf in self.ddp.buffers:
            for param in buf.params.values():
                model = param.data
                slots.append(Slot(model if model.dtype == torch.float32 else model.float(), param.main_grad, model))
        return slots

    def _shard_slots(self) -> list[Slot]:
        rank, slots = self.ddp.rank, []
        for buf in self.ddp.buffers:
            for bucket in buf.buckets:
                shard = buf.param_shards(bucket.index)[rank]
                main = shard if shard.dtype == torch.float32 else shard.float()
                slots.append(Slot(main, buf.grad_shards(bucket.index)[rank], shard))
        return slots

    @property
    def norm_group(self) -> dist.ProcessGroup | None:
        """Shards are summed over dp; full all-reduced grads are already the same everywhere."""
        return self.ddp.group if self.distributed else None

    def step(self) -> float | None:
        """One update; returns the grad norm when clipping (before clipping), else None."""
        if not self.ddp.grad_sync_finished:
            raise GradSyncError(
                "optimizer step before gradients are finished: got step() with grad sync "
                "outstanding, but should call finish_grad_sync() or finalize_model_grads() first"
            )
        grads = [s.grad for s in self.slots]
        norm = None
        if self.max_grad_norm is not None:
            norm = grad_norm(grads, self.norm_type, self.norm_group)
            clip_by_total_norm(grads, self.max_grad_norm, norm)
        for slot in self.slots:
            slot.main.grad = slot.grad if slot.grad.dtype == torch.float32 else slot.grad.float()
        self.optimizer.step()
        for slot in self.slots:
            slot.main.grad = None
            if slot.main is not slot.model:
                slot.model.copy_(slot.main)
        if self.distributed:
            self.ddp.start_param_sync()
            if not self.ddp.config.overlap_param_gather:
                self.ddp.finish_param_sync()
        return norm

    def zero_grad(self) -> None:
        self.ddp.zero_grad_buffer()

    def grads_for_norm(self) -> Sequence[torch.Tensor]:
        return [s.grad for s in self.slots]
