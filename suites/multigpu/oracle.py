"""The single-process oracle: the whole model, trained on every rank's batches at once.

Its gradient is data parallelism's by definition: each rank's microbatch
grads (computed in the model's dtype, as a rank computes them) added up in
fp32, summed over the ranks and divided by the world size (or by every
rank's tokens, for a per-token loss). It also keeps, element by element, the
sum of the added grads' magnitudes: how far a correct reduction may round
away from the exact sum is bounded by it (``bounds.Arithmetic``).

With experts spread over an expert-parallel group, an expert computes the
tokens of every rank of the group in one pass, and its rounding depends on
that batch; so the oracle runs each group's ranks at once, the experts on
the tokens an all-to-all would bring them, in the same order, and each rank
with its own copy of the dense params (``expert_parallel_forward``): the
arithmetic is the ranks', only the reduction is the oracle's.

Its optimizer steps fp32 master params, as mixed precision does, and writes
them back in the model's dtype. ``update`` steps it with the grads and the
norm the implementation produced: the update is then checked on its own,
given those inputs, while the grads and the norm are checked against
``gradient``; ``follow`` starts each step from the implementation's params,
so every step is judged from the same start
(``training.train_against_single_process``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from torch.func import functional_call

from . import moe, quantized
from .cases import Case
from .models import held_quantized, loss_fn, make_model


def single_process_model(case: Case, device) -> torch.nn.Module:
    """The same model as the ranks', holding every expert."""
    model = moe.oracle_model(case.model_shape) if case.moe else make_model(case.tied, shape=case.model_shape)
    return model.to(case.dtype).to(device)


@dataclass(frozen=True)
class Gradient:
    grads: dict[str, torch.Tensor]
    """The reduced gradient of every param, flat, fp32."""
    magnitude: dict[str, torch.Tensor]
    """The same sum over |each added grad|: what rounding is bounded by."""


class GlobalBatch:
    def __init__(self, case: Case, ctx, in_param_dtype: bool = False, from_init: bool = False) -> None:
        """``in_param_dtype``: step each param in its own dtype, no fp32 master (as an implementation that
        declares ``StepsInParamDtype`` does). ``from_init``: seed a quantized param's master from its value before
        quantization (``protocol.SeedsMasters``), not from the values it then holds."""
        self.case, self.ctx = case, ctx
        self.model = single_process_model(case, ctx.device)
        self.params = dict(self.model.named_parameters())
        init = {name: p.detach().float().clone() for name, p in self.params.items()}
        with torch.no_grad():  # a quantized param is made from its values
            for name in filter(self.quantizes, self.params):
                self.params[name].copy_(self.held(self.params[name].float()))
        self.masters = {name: p if in_param_dtype else
                        init[name] if from_init and self.quantizes(name) else p.detach().float().clone()
                        for name, p in self.params.items()}
        self.opt = case.make_torch_optimizer(list(self.masters.values()))

    def gradient(self, step: int, total_tokens: int, computing=contextlib.nullcontext) -> Gradient:
        """Every rank's microbatches, each rank's (or expert replica's) grads added up first, then summed over the
        ranks and scaled; the model computed within ``computing()`` (the implementation's own functions, where it
        has them: ``protocol.ComputesWith``)."""
        case = self.case
        grads = {n: torch.zeros(p.numel(), dtype=torch.float32, device=p.device) for n, p in self.params.items()}
        magnitude = {n: torch.zeros_like(g) for n, g in grads.items()}
        for ranks in self._groups():
            mine = [{n: torch.zeros_like(g) for n, g in grads.items()} for _ in ranks]
            for micro in range(case.microbatches):
                batches = [[t.to(self.ctx.device) for t in case.batch(step, micro, rank)]
                           for rank in ranks]
                with computing():
                    per_rank = self._backward(batches)
                for i, named in enumerate(per_rank):
                    for name, grad in named.items():
                        grad = grad.reshape(-1).float()
                        mine[i][name] += grad
                        magnitude[name] += grad.abs()
            for held in mine:
                for name in grads:
                    grads[name] += held[name]
        scale = 1.0 / (total_tokens if case.num_tokens else self.ctx.world_size)
        if case.num_tokens and total_tokens == 0:
            scale = 1.0  # finalize divides by max(tokens, 1)
        return Gradient({n: g * scale for n, g in grads.items()}, {n: m * scale for n, m in magnitude.items()})

    def _groups(self) -> list[list[int]]:
        """The ranks whose forward passes share their experts' passes: each expert-parallel group; every rank on
        its own without experts."""
        topology = self.case.moe
        if topology is None:
            return [[rank] for rank in range(self.ctx.world_size)]
        return [topology.ep_ranks(first) for first in range(0, topology.world, topology.ep)]

    def _backward(self, batches: list[list[torch.Tensor]]) -> list[dict[str, torch.Tensor]]:
        """Each rank's grads of one microbatch (an expert's under the group's first rank: it holds them once)."""
        reduction = "sum" if self.case.num_tokens else "mean"
        if self.case.moe is None:
            (tokens, labels), = batches
            loss_fn(self.model(tokens), labels, reduction).backward()
            named = {n: p.grad for n, p in self.params.items()}
            for p in self.params.values():
                p.grad = None
            return [named]
        dense = [{n: p.detach().clone().requires_grad_() for n, p in self.params.items() if not n.startswith("experts.")}
                 for _ in batches]
        experts = {n: p for n, p in self.params.items() if n.startswith("experts.")}
        logits = expert_parallel_forward(self.model, dense, [tokens for tokens, _ in batches])
        loss = sum(loss_fn(out, labels, reduction) for out, (_, labels) in zip(logits, batches))
        leaves = [leaf for copy in dense for leaf in copy.values()] + list(experts.values())
        got = iter(torch.autograd.grad(loss, leaves, allow_unused=True))
        per_rank = [{n: next(got) for n in copy} for copy in dense]
        per_rank[0].update({n: next(got) for n in experts})
        return [{n: g for n, g in named.items() if g is not None} for named in per_rank]

    def update(self, grads: dict[str, torch.Tensor], norm: float | None) -> dict[str, torch.Tensor]:
        """One optimizer step with ``grads`` and the grad ``norm`` (before clipping) the implementation produced;
        returns the masters as they were before it."""
        case = self.case
        before = {name: master.detach().clone() for name, master in self.masters.items()}
        if case.skip_above is not None and norm is not None and norm > case.skip_above:
            return before
        for name, master in self.masters.items():
            master.grad = grads[name].reshape(master.shape).to(master.device, master.dtype, copy=True)
        if case.clip is not None and norm is not None:
            torch.nn.utils.clip_grads_with_norm_(list(self.masters.values()), case.clip, torch.tensor(norm))
        self.opt.step()
        with torch.no_grad():
            for name, master in self.masters.items():
                master.grad = None
                if master is not self.params[name]:
                    self.params[name].copy_(self.held(master) if self.quantizes(name) else master)
        return before

    def quantizes(self, name: str) -> bool:
        """Whether the case holds this param quantized: the linear weights, the experts' too."""
        return self.case.quantized is not None and held_quantized(name, self.case.model_shape)

    def held(self, master: torch.Tensor) -> torch.Tensor:
        """The values a param quantized from ``master`` computes with, by the suite's quantizer (``quantized.py``):
        per-tensor FP8 scaled by the amax of the whole param; MXFP8 from the master rounded to bf16, as gathered."""
        return self._held(master, float(master.abs().max()))

    def _held(self, master: torch.Tensor, amax: float) -> torch.Tensor:
        rows = master.detach().float().cpu().reshape(master.shape[0], -1)
        if self.case.quantized == "fp8":
            values = quantized.per_tensor_values(rows.reshape(-1).tolist(), amax)
        else:
            values = quantized.mx_values(rows.to(torch.bfloat16).float().tolist())
        return torch.tensor(values, dtype=torch.float32, device=master.device).reshape(master.shape)

    def held_range(self, master: torch.Tensor, bound: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The least and the most a quantized param may hold where its master may lie ``bound`` from ``master``:
        quantizing rounds to the nearest of few values, so a master within the bound may round to either neighbour;
        and the scale follows the amax of the whole param (FP8) or of each 32-element block (MXFP8), where a value
        that crosses a power of two changes every neighbour's quantum, and below one an E4M3 code saturates at
        1.75 x 2^8 of the scale. So the candidates are the master itself and every magnitude shrunk and grown by
        the bound together (the least and the most each amax can be), each element with its own value moved both
        ways."""
        magnitude, sign = master.detach().float().abs(), torch.sign(master.detach().float())
        shrunk, grown = (magnitude - bound).clamp(min=0), magnitude + bound
        amaxes = {float(shrunk.max()), float(magnitude.max()), float(grown.max())}
        if self.case.quantized == "fp8":
            held = [self._held(master + side * bound, amax) for side in (-1, 0, 1) for amax in amaxes]
        else:  # each block's amax comes from the values themselves
            held = [self._held(sign * values, 0.0) for values in (shrunk, magnitude, grown)]
        stacked = torch.stack(held)
        return stacked.amin(dim=0), stacked.amax(dim=0)

    def follow(self, params: dict[str, torch.Tensor]) -> None:
        """Start the next step from the implementation's params, so that its grads are compared from the same
        params; an fp32 param's master follows too (they are the same values), a bf16 param's fp32 master keeps its
        own bits."""
        with torch.no_grad():
            for name, param in self.params.items():
                param.copy_(params[name].reshape(param.shape))
                if param.dtype == self.masters[name].dtype and self.masters[name] is not param:
                    self.masters[name].copy_(param)


def expert_parallel_forward(model: moe.TinyMoE, dense: list[dict[str, torch.Tensor]],
                            tokens: list[torch.Tensor]) -> list[torch.Tensor]:
    """The forward passes of one expert-parallel group's ranks at once, as ``moe.TinyMoE`` runs them on the ranks:
    rank ``i`` with the dense params ``dense[i]``, each expert on the tokens of every rank routed to it, stacked as
    the all-to-all stacks them. Returns each rank's logits."""
    ep, local, hidden = len(tokens), moe.NUM_EXPERTS // len(tokens), model.hidden

    def part(name: str, module: torch.nn.Module, i: int, *args) -> torch.Tensor:
        return functional_call(module, {k.removeprefix(f"{name}."): v for k, v in dense[i].items()
                                        if k.startswith(f"{name}.")}, args)

    embedded, orders, outgoing = [], [], []
    for i, t in enumerate(tokens):
        h = part("embed", model.embed, i, t)
        x = h.reshape(-1, hidden)
        order = torch.argsort(torch.arange(x.shape[0], device=x.device) % moe.NUM_EXPERTS, stable=True)
        embedded.append(h)
        orders.append(order)
        outgoing.append(x[order].chunk(ep))  # chunk d goes to the rank holding experts [d * local, (d + 1) * local)
    results = []
    for d in range(ep):
        chunks = torch.cat([outgoing[i][d] for i in range(ep)]).reshape(ep, local, -1, hidden)
        out = torch.stack([model.experts[d * local + k](chunks[:, k]) for k in range(local)], dim=1)
        results.append(out.reshape(-1, hidden).chunk(ep))  # chunk i goes back to rank i
    logits = []
    for i in range(ep):
        back = torch.cat([results[d][i] for d in range(ep)])
        routed = torch.empty_like(back).index_copy(0, orders[i], back)
        h = part("norm", model.norm, i, embedded[i] + routed.reshape(embedded[i].shape))
        logits.append(part("head", model.head, i, h))
    return logits
