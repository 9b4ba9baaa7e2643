"""What an implementation under test must provide: the one place that says so.

An implementation is any object with the attributes of ``Implementation``.
It declares the capability levels it provides; a test that needs a level the
implementation lacks is skipped with the reason, never passed.

Levels
------
``layout``
    ``plan(named_params, config)`` returns one ``reference.layout.LayoutRecord``
    per buffer (the one record type, with upstream Megatron's meanings; see
    docs/rules.md), without needing real storage (the params may be meta tensors).
``buffer``
    ``build(named_params, config, device)`` allocates and returns one
    ``BufferHandle`` per buffer: ``param.main_grad`` views, re-pointed
    ``param.data`` under the distributed optimizer, bucket views.
``shards``
    the handles also give cached per-rank shard views (``grad_shards``,
    ``param_shards``) and ownership ranges (``owned_range``).
``validation``
    bad configurations and inputs raise an error naming the field, the
    value and what would be valid; runtime misuse (a missing grad, a grad
    registered twice, a step before grads are finished, configurations that
    differ across ranks, NaN grads) raises on every rank, never hangs.
``ddp``
    ``wrap(module, config, group)`` returns a ``DDPHandle`` that reduces
    gradients like torch's DistributedDataParallel, over the group it is
    handed (the suites hand it a recording group, ``ranks.recording``: what
    it communicates there is observed; over any other group it cannot be).
    Optionally, for an implementation that partitions params, the handle's
    ``whole_params()`` (``{name: whole tensor}``, a collective called on
    every rank), which the suites then read params through.
``expert``
    params marked expert-parallel (``param.allreduce = False``) are planned
    in buffers of their own (``LayoutRecord.expert_parallel``) for
    ``LayoutConfig.expert_dp``, and ``wrap(..., expert_group=G)`` reduces and
    shards them over the expert-data-parallel group ``G``: an expert's grad is
    the sum over its replicas times 1/dp (docs/rules.md, section 2).
``optimizer``
    ``make_optimizer`` (fp32 main params; sharded under the distributed
    optimizer; clipping) and ``finalize_model_grads`` (with ``num_tokens``)
    complete a training step. Without this level the suite steps a plain
    torch optimizer on ``param.main_grad``, which covers only packed fp32
    configurations.

``config`` is a ``reference.layout.LayoutConfig`` (layout levels) or a
``reference.config.DDPConfig`` (ddp level): plain value objects that every
implementation maps onto its own knobs.

Knobs
-----
Upstream's newer knobs (``KNOBS``) are optional: an implementation lists
those it maps in ``knobs``, and a check that needs one it does not list is
skipped with that reason, so an adapter written before a knob existed is
never handed a configuration it would silently ignore. Two of them are not
``DDPConfig`` fields: ``force_all_reduce`` is ``finish_grad_sync(
force_all_reduce=True)`` of the ddp handle, ``grad_norm_skip_threshold`` a
keyword of ``make_optimizer``.
"""

from __future__ import annotations

from typing import Callable, ContextManager, Iterable, Mapping, Protocol, Sequence, runtime_checkable

import torch

from reference.config import DDPConfig
from reference.layout import LayoutConfig, LayoutRecord

CAPABILITIES: dict[str, str] = {
    "layout": "plans buffer layouts (offsets, buckets, accounting)",
    "buffer": "allocates buffers with main_grad, param and bucket views",
    "shards": "cached per-rank shard views and ownership ranges",
    "validation": "rejects bad input with an error naming the field, on every rank",
    "ddp": "wraps a module and synchronizes its gradients over a process group",
    "expert": "expert-parallel params (allreduce=False) in buffers of their own, reduced and sharded "
    "over the expert-data-parallel group with upstream's scaling",
    "optimizer": "fp32 main params, distributed optimizer, clipping, finalize with num_tokens",
}
KNOBS: dict[str, str] = {
    "num_distributed_optimizer_instances": "replicas of the distributed optimizer, each sharding over dp / N ranks",
    "reduce_scatter_with_fp32_accumulation": "a reduce-scatter that sums bf16 chunks in fp32",
    "param_name_patterns_for_fp32_local_accumulation": "fp32 main_grad for params matching name patterns",
    "force_all_reduce": "finish_grad_sync(force_all_reduce=True): all-reduce even under the distributed optimizer",
    "grad_norm_skip_threshold": "make_optimizer(..., grad_norm_skip_threshold=): skip a step whose grad norm "
                                "exceeds it",
}
_DEFAULTS = DDPConfig()


def knobs_used(config: LayoutConfig | DDPConfig) -> list[str]:
    """The ``KNOBS`` a configuration sets away from their defaults."""
    return [k for k in KNOBS if hasattr(config, k) and getattr(config, k) != getattr(_DEFAULTS, k)]


def undeclared_knobs(impl, used) -> str | None:
    """Why ``impl`` cannot be handed knobs ``used``: the ones it does not list in ``knobs``."""
    missing = [k for k in used if k not in getattr(impl, "knobs", ())]
    if not missing:
        return None
    return (f"{impl.name} {impl.version} does not map {', '.join(missing)} "
            f"({'; '.join(KNOBS[k] for k in missing)}); "
            "an implementation lists the upstream knobs it maps in `knobs`")


LEVEL_METHODS: dict[str, tuple[str, ...]] = {
    "layout": ("plan",),
    "buffer": ("build",),
    "ddp": ("wrap",),
    "optimizer": ("make_optimizer", "finalize_model_grads"),
}

NamedParams = Iterable[tuple[str, torch.nn.Parameter]]


class BucketView(Protocol):
    offset: int
    grad_data: torch.Tensor
    param_data: torch.Tensor | None
    param_to_index: Mapping[str, tuple[int, int]]
    """Each param's ``[start, end)`` within the bucket, start padding included (upstream's name)."""


class BufferHandle(Protocol):
    """An allocated buffer; shard methods are needed only at the ``shards`` level."""

    layout: LayoutRecord
    grad_data: torch.Tensor
    param_data: torch.Tensor | None
    params: Mapping[str, torch.nn.Parameter]
    buckets: Sequence[BucketView]

    def grad_shards(self, bucket_id: int) -> Sequence[torch.Tensor]: ...

    def param_shards(self, bucket_id: int) -> Sequence[torch.Tensor]: ...

    def owned_range(self, bucket_id: int, rank: int) -> tuple[int, int]: ...


class DDPHandle(Protocol):
    """A wrapped module whose backward fills ``main_grad`` views and reduces them."""

    module: torch.nn.Module
    buffers: Sequence[BufferHandle]

    def __call__(self, *args, **kwargs): ...

    def no_sync(self) -> ContextManager[None]: ...

    def finish_grad_sync(self) -> None:
        """Wait for the reductions; with the ``force_all_reduce`` knob, also ``finish_grad_sync(force_all_reduce=True)``."""

    def zero_grad_buffer(self) -> None: ...


class OptimizerHandle(Protocol):
    def step(self) -> float | None:
        """Update params from the reduced grads; the grad norm when clipping."""

    def zero_grad(self) -> None: ...

    def count_zeros(self) -> int:
        """Zero gradient elements over the whole model, each once, padding excluded."""


MakeTorchOptimizer = Callable[[list[torch.Tensor]], torch.optim.Optimizer]


@runtime_checkable
class Implementation(Protocol):
    name: str
    version: str
    capabilities: frozenset[str]
    # Why it cannot run here (e.g. not installed), or None when it can.
    unavailable: str | None
    # Optional, not declared here so older adapters still satisfy the protocol:
    # ``knobs: frozenset[str]``, the upstream knobs (KNOBS) it maps;
    # ``report_lines() -> list[str]``, what the pytest header should say about what it found installed
    # around it that changes how it runs (e.g. which optimizer classes it uses);
    # ``reset_process_state()``, undoing module-level state that its earlier instances changed and never
    # restored: the multigpu suite calls it before every check, so each check starts as in a fresh process.

    def unsupported(self, config: LayoutConfig | DDPConfig) -> str | None:
        """Why this configuration cannot be expressed, or None when it can."""

    def plan(self, named_params: NamedParams, config: LayoutConfig) -> Sequence[LayoutRecord]: ...

    def build(
        self, named_params: NamedParams, config: LayoutConfig, device: torch.device | str = "cpu"
    ) -> Sequence[BufferHandle]: ...

    # ddp and optimizer levels
    def wrap(self, module: torch.nn.Module, config: DDPConfig, group, agreement_group=None,
             expert_group=None) -> DDPHandle: ...

    def make_optimizer(
        self, ddp: DDPHandle, make_optimizer: MakeTorchOptimizer, max_grad_norm: float | None = None,
        norm_type: float = 2.0,
    ) -> OptimizerHandle: ...

    def finalize_model_grads(self, models: Sequence[DDPHandle], num_tokens: torch.Tensor | None = None) -> None: ...
