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

Quantized params (``fp8_param_gather``) are stepped as fp32 masters like any
other, then staged for the gather (``stage``): per-tensor FP8 masters are
quantized into the FP8 bytes of the rank's shard with the scale of the whole
param's amax, agreed over the ranks that hold its shards; MXFP8 masters are
copied, in bf16, into the param view. Where that view is the grad memory
(the reuse) and params are gathered overlapped with the forward, the staging
waits for ``zero_grad`` (upstream stages in ``prepare_model_params_for_param_sync``,
after zeroing): ``zero_grad`` zeroes, stages and starts the gather. A forced
gather (``sync_params``: evaluation, a checkpoint) stages the masters again
first, whatever the buffer holds by then.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

import torch.distributed as dist

from .bucket_group import GradSyncError
from .buffer import ParamAndGradBuffer
from .clip import clip_by_total_norm, count_zeros, grad_norm
from .ddp import DistributedDataParallel
from .quantize import TENSOR, Fp8Tensor, to_e4m3_bytes

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
    buffer: ParamAndGradBuffer | None = None
    bucket: int | None = None
    param_names: list[str] = field(default_factory=list)
    """The params of ``param_spans``, in their order."""
    param_offsets: list[int] = field(default_factory=list)
    """Where each span starts in its flattened param."""

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
                 grad_norm_skip_threshold: float | None = None,
                 buffers: list[ParamAndGradBuffer] | None = None, seed_from_init: bool = True) -> None:
        """``buffers``: the buffers whose params this optimizer owns (all the DDP's by default; two optimizers, dense
        and expert, each own theirs). ``seed_from_init``: seed a quantized param's master from the value it had
        before quantization where the model kept it (``param.high_precision_init_val``, upstream's
        ``preserve_high_precision_init_val``), which avoids the quantization's error at initialization; the
        kept value is dropped once read (upstream's ``clear_high_precision_init_val``)."""
        if grad_norm_skip_threshold is not None and not grad_norm_skip_threshold > 0:
            raise ValueError(f"grad_norm_skip_threshold: got {grad_norm_skip_threshold!r}, but should be a positive "
                             "number (or None: never skip)")
        self.ddp = ddp
        self.distributed = ddp.config.distributed_optimizer
        self.max_grad_norm = max_grad_norm
        self.norm_type = norm_type
        self.skip_threshold = grad_norm_skip_threshold
        self.skipped = False  # whether the last step was skipped for its grad norm
        self.buffers = list(ddp.buffers if buffers is None else buffers)
        self.seed_from_init = seed_from_init
        self._stage_in_zero_grad = False  # the step's staging waits for zero_grad (the reuse, gathers overlapped)
        self.slots = self._shard_slots() if self.distributed else self._param_slots()
        for buf in self.buffers:
            for param in buf.params.values():
                if hasattr(param, "high_precision_init_val"):
                    del param.high_precision_init_val
        self.device = ddp.buffers[0].grad_data.device
        self.optimizer = make_optimizer([s.main for s in self.slots])

    def _param_slots(self) -> list[Slot]:
        slots = []
        for buf in self.buffers:
            first_replica = self.ddp.rank_in(buf) == 0
            for param in buf.params.values():
                model = param.data
                main = model if model.dtype == torch.float32 else model.float()
                slots.append(Slot(main, param.main_grad, model, [(0, param.numel())], first_replica))
        return slots

    def _shard_slots(self) -> list[Slot]:
        slots = []
        for buf in self.buffers:
            rank = self.ddp.rank_in(buf)
            for bucket in buf.buckets:
                lo, hi = buf.owned_range(bucket.index, rank)
                held = sorted((max(start, lo) - lo, min(end, hi) - lo, name, max(start, lo) - start)
                              for name, (start, end, b) in buf.layout.param_index_map.items()
                              if b == bucket.index and max(start, lo) < min(end, hi))
                local = [(a, b, self.ddp.local_fp32_grads[name].main_grad.reshape(-1)[first:first + b - a])
                         for a, b, name, first in held if name in self.ddp.local_fp32_grads]
                shard = buf.param_shards(bucket.index)[rank]
                if buf.layout.recipe is not None:  # masters from the values the params hold (their storage is bytes)
                    main = torch.zeros(hi - lo, dtype=torch.float32, device=shard.device)
                    for a, b, name, first in held:
                        main[a:b] = self._seed(buf.params[name]).reshape(-1)[first:first + b - a]
                else:
                    main = shard if shard.dtype == torch.float32 else shard.float()
                slots.append(Slot(main, buf.grad_shards(bucket.index)[rank], shard, [(a, b) for a, b, _, _ in held],
                                  self.ddp.counts_here(buf), local, buf, bucket.index, [n for _, _, n, _ in held],
                                  [first for _, _, _, first in held]))
        return slots

    def _seed(self, param: torch.Tensor) -> torch.Tensor:
        """A quantized param's fp32 master: its value before quantization where the model kept one and this
        optimizer seeds from it (``seed_from_init``), else the values the param holds."""
        init = getattr(param, "high_precision_init_val", None)
        if init is not None and self.seed_from_init:
            return init.detach().to(param.device, torch.float32)
        return param.detach().float()

    def step(self) -> float | None:
        """One update; returns the grad norm (before clipping) when clipping or skipping by it, else None."""
        return step_together([self])

    def load_main_grads(self) -> None:
        """The fp32 main grads, which the norm reads and clipping scales (as upstream)."""
        if not self.ddp.grad_sync_finished:
            raise GradSyncError(
                "optimizer step before gradients are finished: got step() with grad sync "
                "outstanding, but should call finish_grad_sync() or finalize_model_grads() first"
            )
        for slot in self.slots:
            slot.main.grad = slot.main_grad()

    def finish_step(self, norm: float | None, skipped: bool) -> None:
        """The rest of a step, given the grad norm and the skip decision (this optimizer's, or its chain's): clip,
        update, release the grads, stage and gather the params."""
        if self.max_grad_norm is not None:
            clip_by_total_norm([s.main.grad for s in self.slots], self.max_grad_norm, norm)
        self.skipped = skipped
        if not skipped:
            self.optimizer.step()
        for slot in self.slots:
            slot.main.grad = None
        for buf in self.buffers:
            if buf.lifecycle is not None:
                buf.lifecycle.read()  # the grads are spent: their memory may take the params
        if skipped:
            return
        if self.distributed and self.ddp.config.overlap_param_gather and any(b.lifecycle for b in self.buffers):
            self._stage_in_zero_grad = True  # upstream stages after zeroing, before the forward's gathers
            return
        self.stage()
        if self.distributed:
            self.ddp.start_param_sync(self.buffers)
            if not self.ddp.config.overlap_param_gather:
                self.ddp.finish_param_sync()

    def stage(self) -> None:
        """The masters into what the params are gathered from (or are, without a distributed optimizer): copied in
        the params' dtype, or quantized into per-tensor FP8 bytes with each param's agreed scale."""
        fp8 = [slot for slot in self.slots if slot.buffer is not None and slot.buffer.layout.recipe == TENSOR]
        if fp8:
            self._stage_fp8(fp8)
        for slot in self.slots:
            if slot.buffer is not None and slot.buffer.layout.recipe == TENSOR:
                continue
            if slot.buffer is not None and slot.buffer.lifecycle is not None:
                slot.buffer.lifecycle.stage(slot.bucket)
            if slot.main is not slot.model:
                slot.model.copy_(slot.main)

    def _stage_fp8(self, slots: list[Slot]) -> None:
        """Per-tensor FP8: each param's amax over every rank's shard of it (one MAX all-reduce a buffer), its scale
        set on every rank, its elements of this rank's shard quantized into the shard's bytes."""
        for buf in dict.fromkeys(slot.buffer for slot in slots):
            names = {name: i for i, name in enumerate(buf.layout.param_index_map)}
            amax = torch.zeros(len(names), dtype=torch.float32, device=self.device)
            for slot in (s for s in slots if s.buffer is buf):
                for (a, b), name in zip(slot.param_spans, slot.param_names):
                    amax[names[name]] = torch.maximum(amax[names[name]], slot.main[a:b].abs().max())
            group = self.ddp.group_of(buf)
            if group.size() > 1:
                dist.all_reduce(amax, op=dist.ReduceOp.MAX, group=group)
            scales = {}
            for name, value in zip(names, amax.tolist()):
                scales[name] = Fp8Tensor.scale_of(value)
                buf.params[name].fp8.scale_inv = torch.reciprocal(scales[name])
            for slot in (s for s in slots if s.buffer is buf):
                for (a, b), name in zip(slot.param_spans, slot.param_names):
                    slot.model[a:b] = to_e4m3_bytes(slot.main[a:b] * scales[name])

    def master_shards(self) -> list[tuple[str, int, torch.Tensor]]:
        """(param name, first element in the flattened param, fp32 values) of every master piece this rank steps."""
        if not self.distributed:
            names = [name for buf in self.buffers for name in buf.params]
            return [(name, 0, slot.main.reshape(-1)) for name, slot in zip(names, self.slots)]
        return [(name, first, slot.main[a:b]) for slot in self.slots
                for (a, b), name, first in zip(slot.param_spans, slot.param_names, slot.param_offsets)]

    def sync_params(self) -> None:
        """A forced param gather (evaluation, a checkpoint): whatever is in flight finishes, then the masters are
        staged again, gathered and consumed at once; the buffer may hold grads or zeros by now, never the masters."""
        self.ddp.finish_param_sync()
        self._stage_in_zero_grad = False
        self.stage()
        if self.distributed:
            self.ddp.start_param_sync(self.buffers, force_sync=True)

    def state_dict(self) -> dict:
        """What a checkpoint saves of this rank: the fp32 masters it steps (its shards, under a distributed
        optimizer) and the torch optimizer's state."""
        return {"masters": [slot.main.detach().clone() for slot in self.slots],
                "optimizer": copy.deepcopy(self.optimizer.state_dict())}

    def load_state_dict(self, state: dict) -> None:
        """Load a checkpoint saved by an optimizer over the same layout, then gather the params from the masters
        (``sync_params``), as a resumed run does before its first forward."""
        masters = state["masters"]
        shapes = [tuple(slot.main.shape) for slot in self.slots]
        if [tuple(m.shape) for m in masters] != shapes:
            raise ValueError(f"masters: got {len(masters)} of shapes {[tuple(m.shape) for m in masters]}, but should "
                             f"be {len(shapes)} of shapes {shapes} (a checkpoint of the same layout and rank)")
        with torch.no_grad():
            for slot, master in zip(self.slots, masters):
                slot.main.copy_(master)
        self.optimizer.load_state_dict(state["optimizer"])
        self.sync_params()

    def skips(self, norm: float | None) -> bool:
        """Whether a step whose grad norm, taken before clipping, is ``norm`` is skipped."""
        return self.skip_threshold is not None and norm > self.skip_threshold

    def zero_grad(self) -> None:
        """Zero this optimizer's grad buffers; where the step's staging waited for it, stage and start their gathers
        after."""
        self.ddp.zero_grad_buffer(self.buffers)
        if self._stage_in_zero_grad:
            self._stage_in_zero_grad = False
            self.stage()
            self.ddp.start_param_sync(self.buffers)

    def grads_for_norm(self) -> Sequence[torch.Tensor]:
        """This rank's share of the param elements of the main grads (padding never part of a norm or a zero
        count)."""
        return [g for s in self.slots if s.counted
                for g in s.param_grads(s.main.grad if s.main.grad is not None else s.main_grad())]

    def count_zeros(self) -> int:
        """Zero gradient elements over the whole model (each counted once, padding excluded)."""
        return count_zeros(self.grads_for_norm(), self.ddp.group, self.device)


def step_together(parts: Sequence[ReferenceOptimizer]) -> float | None:
    """A step of optimizers over disjoint buffers as of one: one grad norm over all their grads (the first part's
    clip and skip settings), one skip decision, then each part's update, staging and gather, in order."""
    for part in parts:
        part.load_main_grads()
    first, norm = parts[0], None
    if first.max_grad_norm is not None or first.skip_threshold is not None:
        grads = [g for part in parts for g in part.grads_for_norm()]
        norm = grad_norm(grads, first.norm_type, first.ddp.group, first.device)
    skipped = first.skips(norm)
    for part in parts:
        part.finish_step(norm, skipped)
    return norm


KINDS = ("dense", "expert")


class ChainedOptimizer:
    """Optimizers over the dense and the expert buffers, each its own (upstream's ChainedOptimizer under expert
    parallelism), stepped as one: one grad norm over all their grads, so clipping and skipping are the single
    optimizer's; each then updates, stages, gathers and zeroes only its own buffers, in the chain's order."""

    def __init__(self, ddp: DistributedDataParallel, order: Sequence[str],
                 part: Callable[[list[ParamAndGradBuffer]], ReferenceOptimizer]) -> None:
        """``order``: the kinds (``KINDS``, each once) in the order the parts step and zero; ``part`` builds the
        optimizer over a kind's buffers."""
        if sorted(order) != sorted(KINDS):
            raise ValueError(f"chained_optimizers: got {tuple(order)!r}, but should name {' and '.join(KINDS)} once "
                             "each, in the order they step")
        by_kind = {kind: [b for b in ddp.buffers if b.layout.expert_parallel == (kind == "expert")] for kind in KINDS}
        empty = [kind for kind in KINDS if not by_kind[kind]]
        if empty:
            raise ValueError(f"chained_optimizers: got a model with no {empty[0]} buffer, but should have both kinds "
                             "(a chain of one optimizer is the optimizer)")
        self.parts = [part(by_kind[kind]) for kind in order]
        self.ddp = ddp

    @property
    def skipped(self) -> bool:
        return self.parts[0].skipped

    def step(self) -> float | None:
        return step_together(self.parts)

    def zero_grad(self) -> None:
        for part in self.parts:
            part.zero_grad()

    def sync_params(self) -> None:
        for part in self.parts:
            part.sync_params()

    def count_zeros(self) -> int:
        grads = [g for part in self.parts for g in part.grads_for_norm()]
        return count_zeros(grads, self.ddp.group, self.parts[0].device)

    def master_shards(self) -> list[tuple[str, int, torch.Tensor]]:
        return [piece for part in self.parts for piece in part.master_shards()]

    def state_dict(self) -> dict:
        return {"parts": [part.state_dict() for part in self.parts]}

    def load_state_dict(self, state: dict) -> None:
        saved = state["parts"]
        if len(saved) != len(self.parts):
            raise ValueError(f"parts: got {len(saved)}, but should be {len(self.parts)} (a checkpoint of the same "
                             "chain)")
        for part, part_state in zip(self.parts, saved):
            part.load_state_dict(part_state)
