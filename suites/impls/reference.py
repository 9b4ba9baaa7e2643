"""The reference implementation, seen through the suite protocol (no translation needed)."""

from __future__ import annotations

import reference
from reference.buffer import ParamAndGradBuffer, build_buffers
from reference.ddp import DistributedDataParallel
from reference.finalize import finalize_model_grads
from reference.layout import LayoutConfig, ParamSpec, plan_layout
from reference.optimizer import ChainedOptimizer, ReferenceOptimizer

from .protocol import NamedParams
from .support import Declared


class ReferenceImplementation(Declared):
    name = "reference"
    version = reference.__version__
    lacks = ()  # every level, every knob, every configuration
    master_seeding = "high-precision-init"  # where the model keeps it (ReferenceOptimizer's seed_from_init)
    unavailable = None
    optimizer_cls: type[ReferenceOptimizer] = ReferenceOptimizer
    chain_cls: type[ChainedOptimizer] = ChainedOptimizer

    def plan(self, named_params: NamedParams, config: LayoutConfig):
        return plan_layout((ParamSpec.from_parameter(n, p) for n, p in named_params), config).buffers

    def build(
        self, named_params: NamedParams, config: LayoutConfig, device="cpu"
    ) -> list[ParamAndGradBuffer]:
        return build_buffers(named_params, config, device)

    def wrap(self, module, config, group, agreement_group=None, expert_group=None) -> DistributedDataParallel:
        return DistributedDataParallel(module, config, group, agreement_group=agreement_group,
                                       expert_data_parallel_group=expert_group)

    def make_optimizer(self, ddp, make_optimizer, max_grad_norm=None, norm_type=2.0, grad_norm_skip_threshold=None,
                       chained_optimizers=()) -> ReferenceOptimizer | ChainedOptimizer:
        def part(buffers=None):
            return self.optimizer_cls(ddp, make_optimizer, max_grad_norm, norm_type, grad_norm_skip_threshold,
                                      buffers=buffers)
        return self.chain_cls(ddp, chained_optimizers, part) if chained_optimizers else part()

    def finalize_model_grads(self, models, num_tokens=None) -> None:
        finalize_model_grads(models, num_tokens)


implementation = ReferenceImplementation()
