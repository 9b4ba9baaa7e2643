"""Distributed gradient norm, clipping and zero counting (upstream semantics, any device).

Each rank passes its share of the gradient elements, such that every distinct
element is passed by exactly one rank (shared params once, padding never),
and the group to reduce over; ``group=None`` reduces nothing. ``device`` is
where the reduction happens: a rank whose share is empty still takes part.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.distributed as dist

CLIP_EPS = 1e-6


def grad_norm(grads: Sequence[torch.Tensor], norm_type: float, group: dist.ProcessGroup | None,
              device: torch.device) -> float:
    """Global ``norm_type`` norm of ``grads`` (inf: max |g|), reduced over ``group``."""
    if norm_type <= 0:
        raise ValueError(f"norm_type: got {norm_type!r}, but should be a positive number or inf")
    if math.isinf(norm_type):
        local = max((g.abs().max().float() for g in grads if g.numel()), default=torch.tensor(0.0))
        total = torch.tensor([float(local)], dtype=torch.float32, device=device)
        if group is not None:
            dist.all_reduce(total, op=dist.ReduceOp.MAX, group=group)
        return total.item()
    total = torch.zeros(1, dtype=torch.float32, device=device)
    for g in grads:
        total += torch.linalg.vector_norm(g.float(), norm_type) ** norm_type
    if group is not None:
        dist.all_reduce(total, group=group)
    return total.item() ** (1.0 / norm_type)


def clip_coefficient(max_norm: float, total_norm: float) -> float:
    return max_norm / (total_norm + CLIP_EPS)


def clip_by_total_norm(grads: Sequence[torch.Tensor], max_norm: float, total_norm: float) -> None:
    """Scale ``grads`` in place by ``max_norm / (total_norm + 1e-6)`` when that is below 1."""
    coeff = clip_coefficient(max_norm, total_norm)
    if coeff < 1.0:
        for g in grads:
            g.mul_(coeff)


def count_zeros(grads: Sequence[torch.Tensor], group: dist.ProcessGroup | None, device: torch.device) -> int:
    total = torch.zeros(1, dtype=torch.int64, device=device)
    for g in grads:
        total += (g == 0).sum()
    if group is not None:
        dist.all_reduce(total, group=group)
    return int(total.item())

