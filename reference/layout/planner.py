"""The pure layout planner: where every param and bucket sits, without allocating.

It works from parameter descriptions alone, so it plans meta-tensor models and
models far too large for this machine. The rules are upstream Megatron's
(docs/rules.md); allocation lives in ``reference.buffer``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Iterable, Mapping, Sequence

import torch

from ..quantize import MX, RECIPES
from .policies import PaddingPolicy, get_policy, pad

DEFAULT_MIN_BUCKET_SIZE = 40_000_000  # elements, upstream's default floor
DEFAULT_BUCKET_SIZE_PER_RANK = 1_000_000  # elements per dp rank


def default_bucket_size(dp: int) -> int:
    """Upstream's default bucket size in elements: ``max(40M, 1M * dp)``."""
    return max(DEFAULT_MIN_BUCKET_SIZE, DEFAULT_BUCKET_SIZE_PER_RANK * dp)


@dataclass(frozen=True)
class ParamSpec:
    """What the planner needs to know of one parameter.

    ``expert_parallel``: an MoE expert's param, held by one expert-parallel
    slice and reduced over the expert-data-parallel group. Upstream marks
    these with ``param.allreduce = False``; ``from_parameter`` reads that.
    """

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype = torch.float32
    shared_embedding: bool = False
    requires_grad: bool = True
    expert_parallel: bool = False
    quantized: str | None = None
    """The recipe (``reference.quantize``: fp8, mxfp8) a param is held in under ``fp8_param_gather``, as Transformer
    Engine's quantized params are; ``from_parameter`` reads ``param.fp8_recipe``. None: held in ``dtype``."""

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @classmethod
    def from_parameter(cls, name: str, param: torch.Tensor) -> "ParamSpec":
        return cls(
            name=name,
            shape=tuple(param.shape),
            dtype=param.dtype,
            shared_embedding=bool(getattr(param, "shared_embedding", False)),
            requires_grad=param.requires_grad,
            expert_parallel=is_expert_parallel(param),
            quantized=getattr(param, "fp8_recipe", None),
        )


def is_expert_parallel(param: torch.Tensor) -> bool:
    """Upstream's marker: expert params carry ``allreduce = False`` (dense ones have no such attribute)."""
    return getattr(param, "allreduce", True) is False


@dataclass(frozen=True)
class LayoutConfig:
    """How to plan: data-parallel size, padding policy, bucket size in elements.

    ``bucket_size=None`` means one bucket per buffer (upstream's meaning at the
    buffer level); use ``default_bucket_size(dp)`` for upstream's default.
    ``expert_dp`` is the expert-data-parallel size, ``dp / ep``, that expert
    buffers are planned (padded, sharded) for; None means ``dp`` (ep = 1).
    ``fp8_param_gather``: quantized params (``ParamSpec.quantized``) are held
    quantized, in a buffer of their own whose params are bytes (uint8);
    ``reuse_grad_buf_for_mxfp8_param_ag``: an MXFP8 buffer under a
    distributed optimizer gathers its params in bf16 through its own grad
    memory instead of a param buffer (upstream's ``shared_buffer``).
    """

    dp: int = 1
    policy: str = "packed"
    bucket_size: int | None = None
    grad_reduce_in_fp32: bool = False
    expert_dp: int | None = None
    fp8_param_gather: bool = False
    reuse_grad_buf_for_mxfp8_param_ag: bool = False

    def __post_init__(self) -> None:
        if not _is_count(self.dp):
            raise ValueError(f"dp: got {self.dp!r}, but should be an integer >= 1")
        if self.expert_dp is not None and (not _is_count(self.expert_dp) or self.dp % self.expert_dp):
            raise ValueError(
                f"expert_dp: got {self.expert_dp!r}, but should be a divisor of dp={self.dp} "
                "(dp = expert-parallel size * expert-data-parallel size), or None for dp"
            )
        if self.bucket_size is not None and (
            not isinstance(self.bucket_size, int)
            or isinstance(self.bucket_size, bool)
            or self.bucket_size <= 0
        ):
            raise ValueError(
                f"bucket_size: got {self.bucket_size!r}, but should be a positive number of "
                "elements, or None for one bucket per buffer"
            )
        get_policy(self.policy)
        if self.reuse_grad_buf_for_mxfp8_param_ag and not self.fp8_param_gather:
            raise ValueError("reuse_grad_buf_for_mxfp8_param_ag: got True without fp8_param_gather, but should be "
                             "set only with it: only params held in MXFP8 gather through the grad buffer (upstream "
                             "asserts the same)")

    @property
    def padding(self) -> PaddingPolicy:
        return get_policy(self.policy)

    @property
    def expert_dp_size(self) -> int:
        return self.dp if self.expert_dp is None else self.expert_dp


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


@dataclass(frozen=True, kw_only=True)
class LayoutRecord:
    """One buffer's layout as any implementation reports it, with upstream Megatron's meanings.

    The one record type of the project: the reference's planner returns its
    subclass ``BufferLayout``, and adapters for other implementations fill
    this in from what those implementations computed.
    ``param_index_map`` maps a param name to ``(start, end, bucket_id)`` in
    elements; ``numel_unpadded`` counts everything but end-of-bucket padding
    (so it includes the 64-element gaps between params), as upstream does.
    ``expert_parallel``: the buffer holds expert params only (dense ones never
    share a buffer with them), padded and sharded for the expert-DP size.
    """

    param_dtype: torch.dtype
    grad_dtype: torch.dtype
    numel: int
    numel_unpadded: int
    bucket_indices: tuple[tuple[int, int], ...]
    per_bucket_numel_unpadded: tuple[int, ...]
    param_index_map: Mapping[str, tuple[int, int, int]]
    expert_parallel: bool = False

    @property
    def num_buckets(self) -> int:
        return len(self.bucket_indices)

    def bucket_param_names(self, bucket_id: int) -> list[str]:
        """Names of the bucket's params in layout order (reverse of parameters())."""
        placed = [(s, n) for n, (s, _, b) in self.param_index_map.items() if b == bucket_id]
        return [n for _, n in sorted(placed)]


@dataclass(frozen=True, kw_only=True)
class BufferLayout(LayoutRecord):
    """A layout the reference planned: the record plus what it was planned for.

    ``dp`` is the size of the group the buffer is reduced and sharded over:
    the data-parallel size, or the expert-data-parallel size for an expert buffer.
    """

    dp: int
    policy: str
    bucket_size: int | None
    params: tuple[ParamSpec, ...]
    recipe: str | None = None
    """The recipe its params are held in, for a buffer of quantized params (``param_dtype`` uint8); else None."""
    reuses_grad_buffer: bool = False
    """Its params are gathered in bf16 through its grad memory (MXFP8, a distributed optimizer, the reuse asked
    for): it keeps no param buffer."""

    @property
    def padding(self) -> PaddingPolicy:
        return get_policy(self.policy)

    @property
    def gather_dtype(self) -> torch.dtype | None:
        """What its params are all-gathered in after a distributed optimizer's step: FP8 bytes for per-tensor FP8,
        bf16 for MXFP8 (each rank quantizes the gathered values itself), else the params' dtype; None without a
        distributed optimizer (nothing is gathered)."""
        if not self.padding.distributed_optimizer:
            return None
        return torch.bfloat16 if self.recipe == MX else self.param_dtype

    def memory(self) -> BufferBytes:
        """The bytes its grad buffer and its param buffer (where the gather lands) take."""
        grads = self.numel * _itemsize(self.grad_dtype)
        if self.gather_dtype is None or self.reuses_grad_buffer:
            return BufferBytes(params=0, grads=grads)
        return BufferBytes(params=self.numel * _itemsize(self.gather_dtype), grads=grads)

    def param_view_elements(self) -> int:
        """Grad-buffer elements the bf16 param view of a buffer that reuses its grad memory covers: every one of a
        bf16 grad buffer, the first ceil(numel / 2) of an fp32 one (two bf16 values an element)."""
        per_element = _itemsize(self.grad_dtype) // _itemsize(torch.bfloat16)
        return -(-self.numel // per_element)

    def shard_size(self, bucket_id: int) -> int:
        """Elements each rank owns of this bucket under the distributed optimizer."""
        start, end = self.bucket_indices[bucket_id]
        return shard_numel(end - start, self.dp)

    def owned_range(self, bucket_id: int, rank: int) -> tuple[int, int]:
        """Buffer range ``[start, end)`` that ``rank`` owns of this bucket."""
        if not 0 <= rank < self.dp:
            raise ValueError(f"rank: got {rank!r}, but should be in [0, {self.dp})")
        start, _ = self.bucket_indices[bucket_id]
        size = self.shard_size(bucket_id)
        return start + rank * size, start + (rank + 1) * size


@dataclass(frozen=True)
class BufferBytes:
    params: int
    """The param buffer a distributed optimizer gathers into; 0 without one, or where it reuses the grad memory."""
    grads: int

    @property
    def total(self) -> int:
        return self.params + self.grads


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def shard_numel(numel: int, parts: int) -> int:
    """Size of one of ``parts`` equal shards of ``numel`` elements, or a clear error."""
    if parts < 1 or numel % parts:
        raise ValueError(
            f"shard count: got {parts} for a buffer of {numel} elements, but should be a "
            f"positive divisor of {numel} (pad the buffer with a distributed-optimizer policy)"
        )
    return numel // parts


@dataclass(frozen=True)
class ModelLayout:
    """Every buffer of a model: dense buffers, then expert buffers, each kind by first-seen dtype pair."""

    config: LayoutConfig
    buffers: tuple[BufferLayout, ...]

    @property
    def dense(self) -> tuple[BufferLayout, ...]:
        return tuple(b for b in self.buffers if not b.expert_parallel)

    @property
    def expert(self) -> tuple[BufferLayout, ...]:
        return tuple(b for b in self.buffers if b.expert_parallel)


def plan_layout(params: Iterable[ParamSpec], config: LayoutConfig) -> ModelLayout:
    """Plan every buffer for ``params`` (in ``model.parameters()`` order).

    Buffers are keyed by (param dtype, grad dtype, expert parallel), as
    upstream: dense params are planned for ``dp``, expert params apart from
    them for ``expert_dp``, so adding experts never moves a dense offset.
    """
    specs = _checked(params)
    recipe = _recipe(specs) if config.fp8_param_gather else None
    groups: dict[tuple[bool, torch.dtype, torch.dtype], list[ParamSpec]] = {}
    for expert in (False, True):
        for spec in specs:
            if spec.expert_parallel == expert:
                grad_dtype = torch.float32 if config.grad_reduce_in_fp32 else spec.dtype
                param_dtype = torch.uint8 if recipe and spec.quantized else spec.dtype
                groups.setdefault((expert, param_dtype, grad_dtype), []).append(spec)
    expert_config = replace(config, dp=config.expert_dp_size, expert_dp=None)
    buffers = tuple(
        plan_buffer(group, expert_config if expert else config, param_dtype, grad_dtype, expert,
                    recipe if param_dtype == torch.uint8 else None)
        for (expert, param_dtype, grad_dtype), group in groups.items()
    )
    return ModelLayout(config=config, buffers=buffers)


def _recipe(specs: Sequence[ParamSpec]) -> str | None:
    """The one recipe the model's quantized params are held in (upstream keeps one FP8 buffer a model chunk)."""
    recipes = sorted({s.quantized for s in specs if s.quantized})
    if len(recipes) > 1:
        raise ValueError(f"params: got params quantized as {' and '.join(recipes)}, but should all be held in one "
                         "recipe (one buffer of quantized params a model, as upstream's)")
    return recipes[0] if recipes else None


def plan_buffer(
    params: Sequence[ParamSpec],
    config: LayoutConfig,
    param_dtype: torch.dtype,
    grad_dtype: torch.dtype,
    expert_parallel: bool = False,
    recipe: str | None = None,
) -> BufferLayout:
    """Lay one dtype group out: reverse order, padded starts, closed and padded buckets."""
    policy = config.padding
    divisor = policy.bucket_divisor(config.dp)
    isolate_shared = policy.distributed_optimizer  # upstream isolates only then
    index_map: dict[str, tuple[int, int, int]] = {}
    bucket_indices: list[tuple[int, int]] = []
    unpadded: list[int] = []
    bucket_start = 0
    open_params = 0
    start = end = 0

    def close(param_end: int) -> int:
        nonlocal bucket_start, open_params
        unpadded.append(param_end - bucket_start)
        bucket_end = pad(param_end, divisor)
        bucket_indices.append((bucket_start, bucket_end))
        bucket_start, open_params = bucket_end, 0
        return bucket_end

    for spec in reversed(params):
        start = pad(start, policy.param_alignment)
        alone = isolate_shared and spec.shared_embedding
        if alone and open_params:
            start = close(start)
        end = start + spec.numel
        index_map[spec.name] = (start, end, len(bucket_indices))
        open_params += 1
        full = config.bucket_size is not None and end - bucket_start >= config.bucket_size
        start = close(end) if full or alone else end
    if open_params:
        close(end)
    return BufferLayout(
        param_dtype=param_dtype,
        grad_dtype=grad_dtype,
        numel=bucket_indices[-1][1],
        numel_unpadded=sum(unpadded),
        bucket_indices=tuple(bucket_indices),
        per_bucket_numel_unpadded=tuple(unpadded),
        param_index_map=index_map,
        expert_parallel=expert_parallel,
        dp=config.dp,
        policy=policy.name,
        bucket_size=config.bucket_size,
        params=tuple(params),
        recipe=recipe,
        reuses_grad_buffer=(recipe == MX and config.reuse_grad_buf_for_mxfp8_param_ag
                            and policy.distributed_optimizer),
    )


def _checked(params: Iterable[ParamSpec]) -> list[ParamSpec]:
    specs = list(params)
    if not specs:
        raise ValueError("params: got an empty list, but should hold at least one parameter")
    seen: set[str] = set()
    for spec in specs:
        if not spec.requires_grad:
            raise ValueError(
                f"params: got frozen parameter {spec.name!r} (requires_grad=False), but should "
                "hold only trainable parameters; leave frozen ones out of the buffer"
            )
        if spec.name in seen:
            raise ValueError(f"params: got the name {spec.name!r} twice, but names should be unique")
        if spec.quantized is not None and spec.quantized not in RECIPES:
            raise ValueError(f"params: {spec.name!r} is quantized as {spec.quantized!r}, but should be held in one "
                             f"of {', '.join(RECIPES)} (or None)")
        if any(d < 0 for d in spec.shape):
            raise ValueError(f"params: {spec.name!r} has shape {spec.shape}, but sizes should be >= 0")
        seen.add(spec.name)
    return specs
