"""Turning parameter descriptions into real ``nn.Parameter`` objects for an implementation."""

from __future__ import annotations

from typing import Sequence

import torch

from reference.layout import LayoutConfig, ParamSpec


def make_params(
    specs: Sequence[ParamSpec], device: str | torch.device = "meta", seed: int = 0
) -> list[tuple[str, torch.nn.Parameter]]:
    """Named params in ``specs`` order; on real devices filled with seeded values."""
    gen = torch.Generator().manual_seed(seed)
    named = []
    for spec in specs:
        if torch.device(device).type == "meta":
            data = torch.empty(spec.shape, dtype=spec.dtype, device="meta")
        else:
            data = torch.randn(spec.shape, generator=gen).to(spec.dtype).to(device)
        param = torch.nn.Parameter(data, requires_grad=spec.requires_grad)
        if spec.shared_embedding:
            param.shared_embedding = True
        if spec.expert_parallel:
            param.allreduce = False  # upstream's expert-parallel marker
        named.append((spec.name, param))
    return named


def plan_specs(impl, specs: Sequence[ParamSpec], config: LayoutConfig):
    """Plan ``specs`` with the implementation under test, on meta tensors."""
    return list(impl.plan(make_params(specs), config))
