"""The two sides the multi-rank checks train in step: the implementation under test (``UnderTest``) and torch's
own DistributedDataParallel (``TorchDDPOracle``), behind one interface (``Side``), so that one loop trains both;
and what each rank's side is built from (its local model, its share of the batch and of the tokens).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import pytest
import torch

from ranks.recording import recording
from suites.impls.protocol import Checkpoints, MayBeUnreadable, MayNotAccumulate, SyncsParams, WholeParams
from suites.impls.stepping import optimizer_for
from suites.impls.support import provides

from . import moe
from .cases import Case
from .models import loss_fn, make_model, tokens_in


def owned_grad_pairs(ddp, rank: int, expert_rank: int | None = None, everything: bool = False):
    """(name, our reduced grad elements, slice of the flattened param they belong to) for this rank.

    ``expert_rank``: this rank's index in the expert-data-parallel group, which
    expert buffers are sharded over (default: ``rank``). ``everything``: every
    element (a forced all-reduce reduces whole buckets), not only the owned shard.
    """
    for buf in ddp.buffers:
        distributed = buf.param_data is not None and not everything
        mine = expert_rank if buf.layout.expert_parallel and expert_rank is not None else rank
        for name, (start, end, bucket) in buf.layout.param_index_map.items():
            if not distributed:
                yield name, buf.grad_data[start:end], slice(0, end - start)
                continue
            lo, hi = buf.owned_range(bucket, mine)
            a, b = max(start, lo), min(end, hi)
            if a < b:
                yield name, buf.grad_data[a:b], slice(a - start, b - start)


def local_model(case: Case, ctx) -> torch.nn.Module:
    """This rank's model: the dense TinyLM, or its share of the mixture of experts."""
    kept = case.seeding == "high-precision"
    if case.moe is None:
        return make_model(case.tied, case.dtype, quantized=case.quantized, shape=case.model_shape,
                          keep_init=kept).to(ctx.device)
    ep_group, _ = moe.groups(case.moe, ctx.rank)
    return moe.TinyMoE(case.moe.experts_of(ctx.rank), ep_group, quantized=case.quantized, shape=case.model_shape,
                       keep_init=kept, dtype=case.dtype).to(ctx.device)


def requires_instances(ctx, case: Case) -> None:
    """Skip unless the ranks split evenly into the case's distributed-optimizer instances."""
    if ctx.world_size % case.instances:
        pytest.skip(f"{case.instances} distributed-optimizer instances need a world size they divide, "
                    f"got {ctx.world_size}")


class Side:
    """One model trained on this rank's batches, side by side with another: the same loop for both."""

    model: torch.nn.Module
    ddp: object
    """What the forward runs through and ``no_sync`` opens: the implementation's handle, or torch DDP."""

    def __init__(self, case: Case, ctx) -> None:
        self.case, self.ctx = case, ctx
        self.losses: list[torch.Tensor] = []

    def params(self) -> dict[str, torch.Tensor]:
        """Every param of this rank's model as a whole tensor, under the oracle's name."""
        return {self.global_name(name, self.ctx.rank): param for name, param in self.local_params().items()}

    def global_name(self, name: str, rank: int) -> str:
        """The oracle's name of the param ``rank`` holds as ``name`` (an expert's local index is another expert's on
        another rank)."""
        return self.case.moe.global_name(name, rank) if self.case.moe else name

    def local_params(self) -> dict[str, torch.Tensor]:
        return dict(self.model.named_parameters())

    def loss(self, logits: torch.Tensor, labels: torch.Tensor, global_tokens: int) -> torch.Tensor:
        """Summed over tokens with ``num_tokens`` (divided later by the global count), else the mean."""
        return loss_fn(logits, labels, "sum" if self.case.num_tokens else "mean")

    def backward(self, step: int, global_tokens: int) -> int:
        """All microbatches of ``step``; returns the local token count (losses kept in ``self.losses``)."""
        case, local = self.case, 0
        if case.microbatches > 1:
            requires_accumulation(self.ddp)
        self.losses = []
        for micro in range(case.microbatches):
            tokens, labels = case.batch(step, micro, self.ctx.rank)
            tokens, labels = tokens.to(self.ctx.device), labels.to(self.ctx.device)
            last = micro == case.microbatches - 1
            with contextlib.nullcontext() if last else self.ddp.no_sync():
                loss = self.loss(self.ddp(tokens), labels, global_tokens)
                loss.backward()
            self.losses.append(loss.detach())
            local += tokens_in(labels)
        return local

    def sync(self, local_tokens: int) -> None:
        """Finish the step's grad sync (``local_tokens``: this rank's share of a per-token loss)."""
        raise NotImplementedError

    def step(self) -> float | None:
        """The optimizer step; the grad norm when clipping or skipping by it."""
        raise NotImplementedError

    def zero_grad(self) -> None:
        raise NotImplementedError


class UnderTest(Side):
    """The implementation under test, handed recorders over the groups under test: what it communicates is
    observed."""

    def __init__(self, case: Case, ctx, impl) -> None:
        super().__init__(case, ctx)
        self.impl = impl
        requires_instances(ctx, case)
        self.model = local_model(case, ctx)
        self.recorders = [recording(ctx.group)]
        extra = {}
        if case.moe:
            self.recorders.append(recording(moe.groups(case.moe, ctx.rank)[1]))
            extra["expert_group"] = self.recorders[1]
        self.ddp = impl.wrap(self.model, case.ddp_config(), self.recorders[0], ctx.control_group, **extra)
        self.full_step = provides(impl, "optimizer")
        self.opt = optimizer_for(impl, self.ddp, self.model, case.make_torch_optimizer, case.clip,
                                 case.norm_type, **case.optimizer_options())
        self.zero_grad()  # a training loop zeroes before its first step too (Megatron-LM's train_step does)

    def local_params(self) -> dict[str, torch.Tensor]:
        """An implementation that partitions params gathers them (``WholeParams``), which is a collective:
        call ``params()`` on every rank, outside the comparisons that may fail on one rank only."""
        return self.ddp.whole_params() if isinstance(self.ddp, WholeParams) else super().local_params()

    def reduced_grads(self):
        """(oracle's name, reduced grad elements this rank owns, their slice of the flattened param)."""
        if isinstance(self.ddp, MayBeUnreadable) and self.ddp.unreadable:
            pytest.skip(self.ddp.unreadable)  # the same on every rank, before any of them compares
        topology, rank, instances = self.case.moe, self.ctx.rank, self.case.instances
        # A rank's shard is its place within its instance: consecutive size / instances ranks of the group.
        shard_rank = rank % (self.ctx.world_size // instances)
        expert_rank = topology.edp_ranks(rank).index(rank) % (topology.edp // instances) if topology else None
        pairs = owned_grad_pairs(self.ddp, shard_rank, expert_rank, self.case.force_all_reduce)
        config, params = self.case.ddp_config(), dict(self.model.named_parameters())
        for name, got, where in pairs:
            own = getattr(params.get(name), "main_grad", None)
            if config.accumulates_in_fp32(name) and own is not None and own.dtype == torch.float32:
                got = own.reshape(-1)[where]  # what the optimizer steps with: the sync copies the reduced values back
            yield (topology.global_name(name, rank) if topology else name), got, where

    def sync(self, local_tokens: int) -> None:
        if self.case.force_all_reduce:
            self.ddp.finish_grad_sync(force_all_reduce=True)
            return
        if not self.full_step:
            self.ddp.finish_grad_sync()
            return
        num_tokens = None
        if self.case.num_tokens:
            num_tokens = torch.tensor(local_tokens, dtype=torch.int64, device=self.ctx.device)
        self.impl.finalize_model_grads([self.ddp], num_tokens)

    def step(self) -> float | None:
        return self.opt.step()

    def _forward(self, tokens: torch.Tensor, what: str) -> Forward:
        with torch.no_grad():
            return Forward(what, tokens, self.ddp(tokens.to(self.ctx.device)))

    def evaluate(self, step: int) -> Forward:
        """An evaluation between steps: a forced param gather where the optimizer offers one (``SyncsParams``),
        then a forward under no_grad on a batch no step trains on."""
        if isinstance(self.opt, SyncsParams):
            self.opt.sync_params()
        return self._forward(evaluation_tokens(self.case, step, self.ctx.rank), "the evaluation forward")

    def zero_grad(self) -> None:
        """Between steps: the optimizer level zeroes through its optimizer (which may hold grads too)."""
        if self.full_step:
            self.opt.zero_grad()
        else:
            self.ddp.zero_grad_buffer()

    def finish_step(self, step: int) -> list[Forward]:
        """What a training loop does after the optimizer's step, at the case's moment (``cases.MOMENTS``): an
        evaluation before or after zeroing the grads, then the next forward, which brings overlapped param gathers
        in (with the reuse, zero_grad stages the params those gathers send, so it comes first). Returns the
        forwards run, to be compared: none without overlapped gathers or an evaluation."""
        forwards = [self.evaluate(step)] if self.case.moment == "eval" else []
        self.zero_grad()
        if self.case.moment == "eval-after-zero":
            forwards.append(self.evaluate(step))
        if self.case.overlap_param_gather:
            forwards.append(self._forward(self.case.batch(step, 0, self.ctx.rank)[0], "the forward after the step"))
        return forwards

    def resumed(self) -> "UnderTest":
        """A fresh instance of the implementation over a fresh model (its initial params), loaded from this one's
        checkpoint (``Checkpoints``): a run stopped after this step and resumed."""
        if not isinstance(self.opt, Checkpoints):
            pytest.skip("the optimizer offers no state_dict / load_state_dict (protocol.Checkpoints): no checkpoint "
                        "to save and load")
        state = self.opt.state_dict()
        fresh = UnderTest(self.case, self.ctx, self.impl)
        fresh.opt.load_state_dict(state)
        return fresh


def requires_accumulation(ddp) -> None:
    """Skip, the same on every rank, where the handle cannot keep microbatches' grads local
    (``protocol.MayNotAccumulate``)."""
    if isinstance(ddp, MayNotAccumulate) and ddp.cannot_accumulate:
        pytest.skip(ddp.cannot_accumulate)


@dataclass(frozen=True)
class Forward:
    """A forward run between steps, under no_grad, to be compared with the oracle's on the same tokens."""

    what: str
    tokens: torch.Tensor
    logits: torch.Tensor


def evaluation_tokens(case: Case, step: int, rank: int) -> torch.Tensor:
    """An evaluation batch: one no step trains on (the microbatch after the step's last)."""
    return case.batch(step, case.microbatches, rank)[0]


class TorchDDPOracle(Side):
    """torch's own DistributedDataParallel on the group under test, with the same init and per-rank data."""

    def __init__(self, case: Case, ctx) -> None:
        super().__init__(case, ctx)
        self.model = make_model(case.tied, case.dtype, shape=case.model_shape).to(ctx.device)
        device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
        self.ddp = torch.nn.parallel.DistributedDataParallel(
            self.model, device_ids=device_ids, process_group=ctx.group, bucket_cap_mb=0.001
        )
        self.opt = case.make_torch_optimizer(list(self.model.parameters()))
        self.zero_grad()

    def loss(self, logits: torch.Tensor, labels: torch.Tensor, global_tokens: int) -> torch.Tensor:
        """torch DDP averages over ranks: with ``num_tokens``, rescaled so that it yields sum(loss) / all
        tokens."""
        if not self.case.num_tokens:
            return super().loss(logits, labels, global_tokens)
        return loss_fn(logits, labels, "sum") * self.ctx.world_size / global_tokens

    def sync(self, local_tokens: int) -> None:
        """torch DDP reduces within backward."""

    def step(self) -> float | None:
        return oracle_step(self.case, self.model, self.opt)

    def zero_grad(self) -> None:
        self.opt.zero_grad(set_to_none=True)


def oracle_step(case: Case, model: torch.nn.Module, opt) -> float | None:
    """The torch side's step: clip by the case's norm, skip when the norm passes the skip threshold; the norm
    (before clipping) when either is set."""
    if case.clip is None and case.skip_above is None:
        opt.step()
        return None
    norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), case.clip or math.inf, norm_type=case.norm_type))
    if case.skip_above is None or norm <= case.skip_above:
        opt.step()
    return norm


def global_token_count(case: Case, step: int, world_size: int) -> int:
    return sum(
        tokens_in(case.batch(step, m, r)[1])
        for r in range(world_size)
        for m in range(case.microbatches)
    )
