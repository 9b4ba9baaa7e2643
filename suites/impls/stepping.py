"""Stepping any implementation: its own optimizer level, or a torch optimizer fed from ``main_grad``.

Without the ``optimizer`` level the suites (and the benchmarks) still train
an implementation, for packed fp32 configurations only: there every rank
holds the full reduced gradient in ``param.main_grad``.
"""

from __future__ import annotations

import copy
from typing import Callable

import torch

from .support import provides

MakeTorchOptimizer = Callable[[list[torch.Tensor]], torch.optim.Optimizer]


class MainGradOptimizer:
    """A torch optimizer stepped on ``main_grad``; no clipping, no zero counts."""

    def __init__(self, model: torch.nn.Module, make_optimizer: MakeTorchOptimizer) -> None:
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.opt = make_optimizer(self.params)

    def step(self) -> None:
        for p in self.params:
            p.grad = p.main_grad
        self.opt.step()
        for p in self.params:
            p.grad = None

    def state_dict(self) -> dict:
        """The params it steps (their own masters) and the torch optimizer's state."""
        return {"params": [p.detach().clone() for p in self.params],
                "optimizer": copy.deepcopy(self.opt.state_dict())}

    def load_state_dict(self, state: dict) -> None:
        with torch.no_grad():
            for param, saved in zip(self.params, state["params"], strict=True):
                param.copy_(saved)
        self.opt.load_state_dict(state["optimizer"])


def optimizer_for(impl, ddp, model: torch.nn.Module, make_optimizer: MakeTorchOptimizer,
                  max_grad_norm: float | None = None, norm_type: float = 2.0, **options):
    """``impl``'s optimizer over ``ddp``, or a ``MainGradOptimizer`` when it has no optimizer level.

    ``options``: keywords of the optimizer knobs a case turns (``grad_norm_skip_threshold``), passed on
    only when given, so an implementation that maps none of them is called as before.
    """
    if provides(impl, "optimizer"):
        return impl.make_optimizer(ddp, make_optimizer, max_grad_norm, norm_type, **options)
    return MainGradOptimizer(model, make_optimizer)
