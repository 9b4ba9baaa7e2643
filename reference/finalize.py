"""``finalize_model_grads``: finish every chunk's grad sync, then per-token normalisation."""

from __future__ import annotations

from typing import Sequence

import torch
import torch.distributed as dist

from .ddp import DistributedDataParallel


def finalize_model_grads(models: Sequence[DistributedDataParallel], num_tokens: torch.Tensor | None = None) -> None:
    """Wait for all grad collectives; with ``num_tokens``, sum it over dp and divide grads by it.

    ``num_tokens`` is this rank's token count; it is all-reduced in place, and
    grads are scaled by ``1 / max(total, 1)``.
    """
    for model in models:
        model.finish_grad_sync()
    if num_tokens is not None:
        dist.all_reduce(num_tokens, group=models[0].group)
        factor = 1.0 / max(float(num_tokens.item()), 1.0)
        for model in models:
            model.scale_gradients(factor)
