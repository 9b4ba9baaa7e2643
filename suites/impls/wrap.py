"""``--impl wrap:package.module:factory``: test a torch-DDP-like wrapper without writing an adapter.

The factory builds the wrapper: ``factory(module, process_group) -> wrapped``,
where ``wrapped(*inputs)`` runs the module's forward and, once backward has
returned, every trainable param's reduced (averaged over the group) gradient
is in ``param.grad``. The ``ddp``-level checks then run on it (see
docs/testing-your-implementation.md). Optional attributes of the factory
say more:

``grads_in = "main_grad"``
    the reduced grads land in ``param.main_grad`` instead of ``param.grad``;
``finish = "name"``
    the wrapper's method to call after backward to wait for its reductions
    (default: ``finish_grad_sync`` if the wrapper has one, else nothing);
``unsupported(config) -> str | None``
    why a ``DDPConfig`` is beyond the wrapper (checks needing it are skipped
    with that reason), on top of what a factory that takes no configuration
    cannot express anyway (``UNSUPPORTED_KNOBS``).

Gradient accumulation checks call ``wrapped.no_sync()``.
"""

from __future__ import annotations

import importlib
import sys

import torch

from reference.config import DDPConfig
from reference.layout import LayoutConfig, ParamSpec, plan_layout

from .forwarding import GradsInParamsDDP

PREFIX = "wrap:"

# A factory receives no configuration: the knobs the suite would have to pass are out of reach.
UNSUPPORTED_KNOBS = {
    "policy": (lambda c: c.policy != "packed",
               "a wrapper built from (module, group) reduces full grads: no padded policy, no distributed optimizer"),
    "grad_reduce_in_fp32": (lambda c: c.grad_reduce_in_fp32, "the factory takes no grad_reduce_in_fp32 knob"),
    "overlap_grad_reduce=False": (lambda c: not c.overlap_grad_reduce,
                                  "the wrapper decides itself when it launches; it cannot be told to wait"),
    "average_in_collective": (lambda c: getattr(c, "average_in_collective", False),
                              "the factory takes no average_in_collective knob"),
    "calculate_per_token_loss": (lambda c: getattr(c, "calculate_per_token_loss", False),
                                 "the factory takes no per-token loss knob"),
    "buckets_per_group": (lambda c: getattr(c, "buckets_per_group", 1) != 1,
                          "the factory takes no buckets_per_group knob"),
    "check_for_nan_in_grad": (lambda c: getattr(c, "check_for_nan_in_grad", False),
                              "the factory takes no NaN-check knob"),
}


class WrappedFactory:
    """An implementation at the ``ddp`` level, made from a user's factory."""

    capabilities = frozenset({"ddp"})
    unavailable = None

    def __init__(self, spec: str) -> None:
        path = spec.removeprefix(PREFIX)
        module_name, sep, attribute = path.partition(":")
        if not sep or not module_name or not attribute:
            raise ValueError(f"--impl: got {spec!r}, but should be wrap:package.module:factory")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ValueError(f"--impl: got {spec!r}, but {module_name!r} cannot be imported ({exc})") from exc
        factory = getattr(module, attribute, None)
        if not callable(factory):
            raise ValueError(f"--impl: got {spec!r}, but {module_name}.{attribute} is {factory!r}, "
                             "not a callable factory(module, process_group)")
        self.factory = factory
        self.name = spec
        self.version = str(getattr(module, "__version__", None)
                           or getattr(sys.modules.get(module_name.partition(".")[0]), "__version__", "unversioned"))
        self.grads_in = getattr(factory, "grads_in", "grad")
        if self.grads_in not in ("grad", "main_grad"):
            raise ValueError(f"{module_name}.{attribute}.grads_in: got {self.grads_in!r}, "
                             "but should be 'grad' or 'main_grad'")

    def unsupported(self, config: LayoutConfig | DDPConfig) -> str | None:
        for knob, (used, why) in UNSUPPORTED_KNOBS.items():
            if used(config):
                return f"{knob}: {why}"
        own = getattr(self.factory, "unsupported", None)
        return own(config) if callable(own) else None

    def wrap(self, module, config: DDPConfig, group, agreement_group=None, expert_group=None):
        reason = self.unsupported(config)
        if reason:
            raise ValueError(f"config: {reason}")
        wrapped = self.factory(module, group)
        finish = getattr(self.factory, "finish", None)
        return FactoryDDP(wrapped, module, packed_records(module), self.grads_in, finish)


class FactoryDDP(GradsInParamsDDP):
    """The user's wrapper; its reduced grads are read from the params after ``finish``."""

    def __init__(self, raw, module, records, source: str, finish: str | None) -> None:
        super().__init__(raw, module, records, source)
        self.finish = finish

    def wait_for_reductions(self) -> None:
        if self.finish is None:
            super().wait_for_reductions()
        else:
            getattr(self.raw, self.finish)()


def packed_records(module: torch.nn.Module):
    """Where the suites look for each param's grad: one packed record per dtype, params in reverse order.

    Only the comparison needs offsets here; they say nothing of how the wrapper buckets.
    """
    specs = [ParamSpec.from_parameter(n, p) for n, p in module.named_parameters() if p.requires_grad]
    specs = [ParamSpec(s.name, s.shape, s.dtype) for s in specs]  # one plain buffer per dtype
    return plan_layout(specs, LayoutConfig()).buffers
