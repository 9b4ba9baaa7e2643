"""A tiny mixture-of-experts model whose distributed gradients are exactly defined.

A dense trunk (embedding, norm, head) wraps ``NUM_EXPERTS`` expert MLPs. The
routing is fixed: the token at flat position ``j`` of a rank's batch goes to
expert ``j % NUM_EXPERTS``, so every rank sends the same number of tokens to
every expert. Experts are split over the expert-parallel (ep) group, as MoE
layers do: an all-to-all sends each token to the rank holding its expert and
a second one brings the outputs back. Expert params carry upstream's marker,
``allreduce = False``; an expert's replicas across the expert-data-parallel
(edp) group are reduced with each other, never with other experts.

The same class with every expert local and no ep group is the single-process
oracle: trained on the global batch (every rank's batch) with the global mean
loss, its gradients are what the distributed model must produce.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from reference.process_groups import new_group

from .models import BASE_SHAPE, Shape, mark_quantized

NUM_EXPERTS = 4
EXPERT_SCALES = (0.5, 1.0, 2.0, 4.0)
"""Each expert's init, scaled: their weights' amaxes differ by factors of 2 to 8, so a quantizer that mixes one
expert's amax into another's is off in most of its elements, not in the few nearest the bound."""


@dataclass(frozen=True)
class Topology:
    """``world = ep * edp`` ranks; ep varies fastest (Megatron's default rank order)."""

    ep: int
    edp: int

    def __post_init__(self) -> None:
        if self.ep < 1 or self.edp < 1 or NUM_EXPERTS % self.ep:
            raise ValueError(f"topology: got ep={self.ep}, edp={self.edp}, but should be positive with "
                             f"ep dividing {NUM_EXPERTS} experts")

    @property
    def world(self) -> int:
        return self.ep * self.edp

    @property
    def local_experts(self) -> int:
        return NUM_EXPERTS // self.ep

    def ep_rank(self, rank: int) -> int:
        return rank % self.ep

    def experts_of(self, rank: int) -> list[int]:
        """Global ids of the experts ``rank`` holds."""
        first = self.ep_rank(rank) * self.local_experts
        return list(range(first, first + self.local_experts))

    def ep_ranks(self, rank: int) -> list[int]:
        """The ranks ``rank`` exchanges tokens with: same edp index, every ep index."""
        base = rank - self.ep_rank(rank)
        return list(range(base, base + self.ep))

    def edp_ranks(self, rank: int) -> list[int]:
        """The ranks holding the same experts as ``rank``: same ep index, every edp index."""
        return list(range(self.ep_rank(rank), self.world, self.ep))

    def global_name(self, name: str, rank: int) -> str:
        """``experts.<local>.…`` on ``rank`` is ``experts.<global>.…`` in the oracle; dense names are shared."""
        parts = name.split(".")
        if parts[0] != "experts":
            return name
        parts[1] = str(self.experts_of(rank)[int(parts[1])])
        return ".".join(parts)


_groups: dict[tuple, tuple] = {}


def groups(topology: Topology, rank: int) -> tuple[dist.ProcessGroup, dist.ProcessGroup]:
    """This rank's (ep group, edp group); every rank creates every group once (``new_group`` is collective)."""
    key = (topology, rank)
    if key not in _groups:
        mine = {}
        for kind, ranks_of in (("ep", topology.ep_ranks), ("edp", topology.edp_ranks)):
            for members in sorted({tuple(ranks_of(r)) for r in range(topology.world)}):
                group = new_group(list(members))
                if rank in members:
                    mine[kind] = group
        _groups[key] = (mine["ep"], mine["edp"])
    return _groups[key]


class _AllToAll(torch.autograd.Function):
    """Equal-split all-to-all; its gradient is the same exchange run backwards."""

    @staticmethod
    def forward(ctx, tensor: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        ctx.group = group
        out = torch.empty_like(tensor)
        dist.all_to_all_single(out, tensor.contiguous(), group=group)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        out = torch.empty_like(grad)
        dist.all_to_all_single(out, grad.contiguous(), group=ctx.group)
        return out, None


class Expert(torch.nn.Module):
    def __init__(self, shape: Shape) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(shape.hidden, shape.ffn)
        self.fc2 = torch.nn.Linear(shape.ffn, shape.hidden)
        for param in self.parameters():
            param.allreduce = False  # upstream's expert-parallel marker

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class TinyMoE(torch.nn.Module):
    """Embedding, one MoE block (residual), a norm and an output head; ``experts`` are global ids held here."""

    def __init__(self, experts: list[int], ep_group: dist.ProcessGroup | None, seed: int = 1234,
                 quantized: str | None = None, shape: Shape = BASE_SHAPE, keep_init: bool = False,
                 dtype: torch.dtype = torch.float32) -> None:
        """``quantized``: hold the experts' linear weights (and the head, where the shape says so) in that recipe
        (``param.fp8_recipe``); ``keep_init``: as ``models.make_model``."""
        super().__init__()
        torch.manual_seed(seed)
        self.hidden = shape.hidden
        self.embed = torch.nn.Embedding(shape.vocab, shape.hidden)
        self.norm = torch.nn.LayerNorm(shape.hidden)
        self.head = torch.nn.Linear(shape.hidden, shape.vocab, bias=False)
        local = []
        for expert in experts:
            torch.manual_seed(seed + 1 + expert)  # the same init wherever the expert lives
            local.append(Expert(shape))
            with torch.no_grad():  # a scale of its own: an amax taken across experts is far from each one's
                for param in local[-1].parameters():
                    param.mul_(EXPERT_SCALES[expert])
        self.experts = torch.nn.ModuleList(local)
        self.to(dtype)  # before marking: a kept init value is in the params' dtype
        mark_quantized(self.named_parameters(), quantized, shape, keep_init)
        self.ep_group = ep_group
        self.ep = 1 if ep_group is None else dist.get_world_size(ep_group)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens)
        x = h.reshape(-1, self.hidden)
        # Sort tokens by expert (position j -> expert j % NUM_EXPERTS): contiguous per ep rank.
        order = torch.argsort(torch.arange(x.shape[0], device=x.device) % NUM_EXPERTS, stable=True)
        routed = self._exchange(x[order])
        # Received: one chunk per ep peer, each holding this rank's local experts' tokens in order.
        chunks = routed.reshape(self.ep, len(self.experts), -1, self.hidden)
        out = torch.stack([expert(chunks[:, k]) for k, expert in enumerate(self.experts)], dim=1)
        back = self._exchange(out.reshape(-1, self.hidden))
        moe = torch.empty_like(back).index_copy(0, order, back)
        h = self.norm(h + moe.reshape(h.shape))
        return self.head(h)

    def _exchange(self, tokens: torch.Tensor) -> torch.Tensor:
        if self.ep == 1:
            return tokens
        return _AllToAll.apply(tokens, self.ep_group)


def oracle_model(shape: Shape = BASE_SHAPE) -> TinyMoE:
    return TinyMoE(list(range(NUM_EXPERTS)), None, shape=shape)
