"""``--impl wrap:package.module:factory``: test a DDP wrapper without writing an adapter.

The factory builds the wrapper, ``factory(module, process_group) -> wrapped``,
where ``wrapped(*inputs)`` runs the module's forward and, once backward has
returned (and ``finish`` has run, below), every trainable param's reduced
(averaged over the group) gradient is in ``param.grad``. The ``ddp``-level
checks then run on it, and what it communicates through the group it is
handed is observed (docs/testing-your-implementation.md). A factory that
takes a third argument, ``factory(module, process_group, config)``, is told
the configuration (a ``reference.config.DDPConfig``) and runs the configured
cases too (overlap off, ``average_in_collective``, ...).

Optional attributes of the factory say more:

``grads_in = "main_grad"``
    the reduced grads land in ``param.main_grad`` (views into a buffer, as
    Megatron's) instead of ``param.grad``; the layout is then read from the
    views and checked;
``policy = "padded"``
    the padding policy it implements (``reference.layout.POLICIES``;
    default ``packed``): its collective sizes and its ``main_grad`` layout
    are checked against that policy's rules and the reference planner's
    layout (a factory told the configuration implements the configured one);
``bucket_size = N``
    elements per bucket, as the planner counts them: its reductions are
    checked against the planner's buckets, in size and launch order;
``finish = "name"``
    the wrapper's method to call after backward to wait for its reductions
    (default: ``finish_grad_sync`` if the wrapper has one, else nothing);
``unsupported(config) -> str | None``
    why a ``DDPConfig`` is beyond the wrapper (checks needing it are skipped
    with that reason), on top of what a factory that takes no configuration
    cannot express anyway (``NOT_TOLD``).

Gradient accumulation checks call ``wrapped.no_sync()``.
"""

from __future__ import annotations

import importlib
import inspect
import sys

import torch
import torch.distributed as dist

from reference.config import DDPConfig
from reference.layout import LayoutConfig, ParamSpec, get_policy, plan_layout

from .forwarding import GradsInParamsDDP
from .support import Declared, Lack, refuse_unsupported, unmapped

PREFIX = "wrap:"

LEVELS = tuple(Lack(level, "a factory gives the wrapper alone, at the ddp level (an adapter object, "
                          "suites/impls/protocol.py, reaches the others)")
               for level in ("layout", "buffer", "shards", "validation", "expert", "optimizer"))
KNOBS_NOT_TOLD = unmapped((), "a factory declares none of upstream's newer knobs")
# A factory that takes no configuration cannot be told these: checks that need them are skipped.
NOT_TOLD = (
    Lack("grad_reduce_in_fp32", "the factory takes no grad_reduce_in_fp32 knob"),
    Lack("overlap_grad_reduce=False", "the wrapper decides itself when it launches; it cannot be told to "
                                      "wait"),
    Lack("average_in_collective", "the factory takes no average_in_collective knob"),
    Lack("calculate_per_token_loss", "the factory takes no per-token loss knob"),
    Lack("buckets_per_group", "the factory takes no buckets_per_group knob", when=lambda n: n != 1),
    Lack("check_for_nan_in_grad", "the factory takes no NaN-check knob"),
)
DISTRIBUTED = ("cannot read: under a distributed-optimizer policy each rank of a factory's wrapper owns a shard of "
               "the reduced grads, which the suite cannot locate from outside (the layout and communication checks "
               "still run)")


class WrappedFactory(Declared):
    """An implementation at the ``ddp`` level, made from a user's factory."""

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
        where = f"{module_name}.{attribute}"
        self.grads_in = getattr(factory, "grads_in", "grad")
        if self.grads_in not in ("grad", "main_grad"):
            raise ValueError(f"{where}.grads_in: got {self.grads_in!r}, but should be 'grad' or 'main_grad'")
        self.takes_config = _takes_config(factory)
        self.policy = getattr(factory, "policy", None)
        if self.policy is not None:
            try:
                get_policy(self.policy)
            except ValueError as exc:
                raise ValueError(f"{where}.{exc}") from None
        self.bucket_size = getattr(factory, "bucket_size", None)
        if self.bucket_size is not None and (isinstance(self.bucket_size, bool) or
                                             not isinstance(self.bucket_size, int) or self.bucket_size <= 0):
            raise ValueError(f"{where}.bucket_size: got {self.bucket_size!r}, but should be a positive number of "
                             "elements")
        self.lacks = self.lacked()

    def lacked(self) -> tuple[Lack, ...]:
        """The levels and knobs beyond a factory; what a factory that takes no configuration cannot be told;
        then what the factory says itself (``factory.unsupported``)."""
        rows = LEVELS + KNOBS_NOT_TOLD
        if not self.takes_config:
            implemented = self.policy or "packed"
            told = Lack("policy", f"the factory implements {implemented!r} (factory.policy) and cannot be "
                                  "told {value!r}", when=lambda policy: policy != implemented)
            rows += (told, *NOT_TOLD)
        own = getattr(self.factory, "unsupported", None)
        return rows + ((Lack("factory.unsupported", own),) if callable(own) else ())

    def wrap(self, module, config: DDPConfig, group, agreement_group=None, expert_group=None):
        refuse_unsupported(self, config)
        raw = self.factory(module, group, config) if self.takes_config else self.factory(module, group)
        finish = getattr(self.factory, "finish", None)
        ddp = FactoryDDP(raw, module, packed_records(module), self.grads_in, finish)
        ddp.declared_layouts = self.declared_layouts(module, config, dist.get_world_size(group))
        ddp.unreadable = DISTRIBUTED if get_policy(config.policy).distributed_optimizer else None
        return ddp

    def declared_layouts(self, module: torch.nn.Module, config: DDPConfig, dp: int):
        """The layout the factory stands for, from the reference planner: the configured one (a factory told the
        configuration), or its declared policy and bucket size; None when it declares neither."""
        specs = [ParamSpec.from_parameter(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if self.takes_config:
            return plan_layout(specs, config.layout_config(dp)).buffers
        if self.policy is None and self.bucket_size is None:
            return None
        return plan_layout(specs, LayoutConfig(dp=dp, policy=self.policy or "packed",
                                               bucket_size=self.bucket_size)).buffers


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


def _takes_config(factory) -> bool:
    """Whether ``factory`` accepts ``(module, group, config)``."""
    try:
        inspect.signature(factory).bind(None, None, None)
    except TypeError:
        return False
    except ValueError:  # no signature to read (a builtin): called as (module, group)
        return False
    return True


def packed_records(module: torch.nn.Module):
    """Where the suites look for each param's grad: one packed record per dtype, params in reverse order.

    Only the comparison needs offsets here; they say nothing of how the wrapper buckets.
    """
    specs = [ParamSpec.from_parameter(n, p) for n, p in module.named_parameters() if p.requires_grad]
    specs = [ParamSpec(s.name, s.shape, s.dtype) for s in specs]  # one plain buffer per dtype
    return plan_layout(specs, LayoutConfig()).buffers
