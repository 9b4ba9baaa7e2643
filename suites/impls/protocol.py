"""What an implementation under test must provide: the one place that says so.

An implementation is any object with the attributes of ``Implementation``.
It says what it does not support in one table, ``lacks`` (levels it does
not provide, upstream knobs it does not map, configurations it cannot
express, each with the reason: ``suites/impls/support.py``); a test that
needs any of them is skipped with that reason, never passed.

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
    ``wrap(module, config, group, agreement_group=None, expert_group=None)`` returns a ``DDPHandle`` that reduces
    gradients like torch's DistributedDataParallel, over the group it is
    handed (the suites hand it a recording group, ``ranks.recording``: what
    it communicates there is observed; over any other group it cannot be).
    What a handle may add is below (``WholeParams``, ``DeclaresLayouts``,
    ``MayBeUnreadable``).
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
``checkpoint``
    the optimizer offers ``state_dict()`` and ``load_state_dict()``
    (``Checkpoints``): what one saves after a step, a fresh instance over a
    fresh model loads, and trains on bit for bit like the run that never
    stopped. Without the ``optimizer`` level the suite's own stepping
    optimizer saves the params and its state.

``config`` is a ``reference.layout.LayoutConfig`` (layout levels) or a
``reference.config.DDPConfig`` (ddp level): plain value objects that every
implementation maps onto its own knobs.

Knobs
-----
Upstream's newer knobs (``KNOBS``) are optional: a row of ``lacks`` for each
one an implementation does not map (``support.unmapped`` writes them from
the ones it maps, so an adapter written before a knob existed is never
handed a configuration it would silently ignore). Three of them are not
``DDPConfig`` fields: ``force_all_reduce`` is ``finish_grad_sync(
force_all_reduce=True)`` of the ddp handle, ``grad_norm_skip_threshold`` and
``chained_optimizers`` keywords of ``make_optimizer``.

Optional members
----------------
What an implementation or a handle may add is a protocol of its own below,
checked with ``isinstance``: ``SharesExpectations``, ``ReportsLines``,
``ResetsProcessState`` (implementations), ``WholeParams``,
``DeclaresLayouts``, ``MayBeUnreadable``, ``MayNotAccumulate`` (ddp handles), ``HasNoSync``,
``FinishesGradSync``, ``ZeroesGradBuffer`` (the wrapper an adapter forwards to).
"""

from __future__ import annotations

from typing import Callable, ContextManager, Iterable, Literal, Mapping, Protocol, Sequence, runtime_checkable

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
    "checkpoint": "the optimizer saves its masters and state (state_dict) and a fresh instance over a fresh model "
                  "loads them (load_state_dict) and trains on as if never stopped",
}
KNOBS: dict[str, str] = {
    "num_distributed_optimizer_instances": "replicas of the distributed optimizer, each sharding over dp / N ranks",
    "reduce_scatter_with_fp32_accumulation": "a reduce-scatter that sums bf16 chunks in fp32",
    "param_name_patterns_for_fp32_local_accumulation": "fp32 main_grad for params matching name patterns",
    "force_all_reduce": "finish_grad_sync(force_all_reduce=True): all-reduce even under the distributed optimizer",
    "grad_norm_skip_threshold": "make_optimizer(..., grad_norm_skip_threshold=): skip a step whose grad norm "
                                "exceeds it",
    "fp8_param_gather": "params the model marks quantized (param.fp8_recipe: fp8 per tensor, mxfp8) held so and "
                        "all-gathered so after a distributed optimizer's step",
    "reuse_grad_buf_for_mxfp8_param_ag": "MXFP8 params gathered in bf16 through their grad buffer's memory",
    "chained_optimizers": "make_optimizer(..., chained_optimizers=('dense', 'expert') or the reverse): the dense and "
                          "the expert buffers each under an optimizer of its own, stepped and zeroed in that order "
                          "under one grad norm (upstream's ChainedOptimizer)",
}
WRITTEN_AGAINST: frozenset[str] = frozenset({
    "policy", "bucket_size", "disable_bucketing", "overlap_grad_reduce", "overlap_param_gather",
    "average_in_collective", "grad_reduce_in_fp32", "calculate_per_token_loss", "check_for_nan_in_grad",
    "buckets_per_group", "check_across_ranks"})
"""The ``DDPConfig`` fields, other than ``KNOBS``, that every adapter was written against: each maps it, or lacks it
by a row of its own (wrap.py's ``NOT_TOLD`` for a factory). Every field is in one of the two
(tests/suites/impls/test_support.py holds it): a new one is a knob, which the adapters built on ``unmapped(...)``
lack at once, or one of these, which each adapter must be gone through for (docs/extending.md (a) step 1)."""
_DEFAULTS = DDPConfig()
MasterSeeding = Literal["dequantized", "high-precision-init"]


def knobs_used(config: LayoutConfig | DDPConfig) -> list[str]:
    """The ``KNOBS`` a configuration sets away from their defaults."""
    return [k for k in KNOBS if hasattr(config, k) and getattr(config, k) != getattr(_DEFAULTS, k)]


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


@runtime_checkable
class HoldsQuantizedParams(Protocol):
    """A handle whose model holds quantized params (``fp8_param_gather``): the suites read their storage."""

    def quantized_storage(self) -> dict[str, object]:
        """``{name: storage}`` of every quantized param: per-tensor FP8 with ``data`` (uint8, the param's shape)
        and ``scale_inv`` (a float32 scalar); MXFP8 with ``rowwise`` and, for a 2-D param, ``colwise`` (else
        None), each with ``data`` (uint8, ``(rows, length)``) and ``scales`` (uint8 E8M0 codes, one a block of 32
        along the length)."""


@runtime_checkable
class ShardsMasters(Protocol):
    """An optimizer whose fp32 masters the suites can read, piece by piece (each rank steps some)."""

    def master_shards(self) -> list[tuple[str, int, torch.Tensor]]:
        """``(param name, index of its first element in the flattened param, fp32 values)`` of every piece of a
        master this rank steps."""


@runtime_checkable
class SyncsParams(Protocol):
    """An optimizer whose params can be gathered on demand (evaluation, a checkpoint), whatever the step left."""

    def sync_params(self) -> None: ...


@runtime_checkable
class Checkpoints(Protocol):
    """An optimizer that saves what training needs to go on (its fp32 masters, its state) and loads it into a fresh
    instance over the same model and configuration, which then holds the saved params."""

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...


@runtime_checkable
class SeedsMasters(Protocol):
    """An implementation that says where the fp32 masters of quantized params come from. ``"dequantized"``: the
    values the quantized params hold; ``"high-precision-init"``: the value each param had before it was quantized,
    where the model keeps one (``param.high_precision_init_val``, as Transformer Engine's
    ``preserve_high_precision_init_val``), else the dequantized values. One that says nothing (or None) is checked
    against either, and passes with either."""

    master_seeding: MasterSeeding | None


@runtime_checkable
class WholeParams(Protocol):
    """A handle whose implementation partitions params: the suites read params through it."""

    def whole_params(self) -> dict[str, torch.Tensor]:
        """``{name: whole tensor}``, gathered from the partitions: a collective, called on every rank."""


@runtime_checkable
class DeclaresLayouts(Protocol):
    """A handle whose claimed layout is not its buffers' (they may only say where grads are read from)."""

    declared_layouts: Sequence[LayoutRecord] | None
    """The layout the implementation claims, which the suites check against what it is seen to do; None
    when it claims none."""


@runtime_checkable
class MayBeUnreadable(Protocol):
    """A handle whose reduced grads the suites may be unable to read (each rank owning a shard they cannot
    locate from outside)."""

    unreadable: str | None
    """Why its reduced grads cannot be read, or None when they can."""


@runtime_checkable
class ClipsNormTypes(Protocol):
    """An implementation whose clipping takes some norm types only (without this, every one: L2 and inf)."""

    clip_norm_types: frozenset[float]


@runtime_checkable
class SkipsByNormTypes(Protocol):
    """An implementation whose step skipping (``grad_norm_skip_threshold``) reads some norm types only: beside
    clipping by another norm it cannot skip (megatron-core skips by its L2 norm)."""

    skip_norm_types: frozenset[float]


@runtime_checkable
class StepsInParamDtype(Protocol):
    """An implementation whose optimizer steps each param in its own dtype, with no fp32 main copy of a bf16
    param (FSDP2 without a mixed-precision policy); without this, bf16 params are stepped through fp32 main
    params, as upstream's mixed-precision optimizer does. The suites' oracle then steps as it does."""

    steps_in_param_dtype: bool


@runtime_checkable
class ComputesWith(Protocol):
    """A handle that runs the model with substitutes of its own for torch's functions (ZeRO-3's linear), whose
    rounding differs from torch's: an oracle computes the model within ``computing()`` to round as the ranks do."""

    def computing(self) -> ContextManager[None]: ...


@runtime_checkable
class MayNotAccumulate(Protocol):
    """A handle that may have no way to keep microbatches' grads local (a wrapper without ``no_sync``)."""

    cannot_accumulate: str | None
    """Why it cannot, or None when it can: every check with microbatches skips with it."""


@runtime_checkable
class HasNoSync(Protocol):
    """A wrapper that can accumulate grads over microbatches without reducing them."""

    def no_sync(self) -> ContextManager[None]: ...


@runtime_checkable
class FinishesGradSync(Protocol):
    """A wrapper that must be told to wait for its reductions once backward has returned."""

    def finish_grad_sync(self) -> None: ...


@runtime_checkable
class ZeroesGradBuffer(Protocol):
    """A wrapper that zeroes the reduced grads it owns itself."""

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
    """What ``--impl`` loads: an adapter module's ``implementation`` (``implementation = MyPeer()`` at its end), or
    the attribute ``module:attribute`` names (``suites.impls.load_implementation``)."""

    name: str
    version: str
    lacks: Sequence
    """What it does not support: ``suites.impls.support.Lack`` rows, each with the reason. Its levels
    (``capabilities``, which ``support.Declared`` derives) are the ones no row names."""
    unavailable: str | None
    """Why it cannot run here (e.g. not installed), or None when it can."""

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


@runtime_checkable
class SharesExpectations(Protocol):
    """An implementation whose expectation list is another's (``fixtures/expectations/<expectations>.toml``,
    for peers that share one) rather than its own name's."""

    expectations: str


@runtime_checkable
class ReportsLines(Protocol):
    """An implementation with more to say in the pytest header."""

    def report_lines(self) -> list[str]:
        """What it found installed around it that changes how it runs (e.g. which optimizer classes it
        uses)."""


@runtime_checkable
class ResetsProcessState(Protocol):
    """An implementation whose earlier instances change module-level state and never restore it."""

    def reset_process_state(self) -> None:
        """Undo that state: the multigpu suite calls it before every check, so each starts as in a fresh
        process."""
