"""megatron-core's buffers for the ``layout`` and ``buffer`` levels, made as its DDP makes them.

A fake process group answers the two questions a buffer asks (``size()``,
``rank()``), so any dp is planned in one process, on "meta" tensors (nothing
allocated). Buffers come dense first, then expert, each in first-seen order of
its (param dtype, grad dtype), as DDP lists ``buffers`` and
``expert_parallel_buffers``.

Where upstream has its own grouping (``group_params_for_buffers``, 0.19 on),
the params are grouped by it and laid out by what its DDP calls:
``DistributedOptimizer.compute_full_param_layout`` under the distributed
optimizer, the buffer's own default otherwise. Before that (0.16.1) the
grouping is inline in DDP's ``__init__``, so it is done here as that code
does it, and the buffer lays itself out.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch

from reference.layout import LayoutConfig, LayoutRecord, is_expert_parallel

from .protocol import NamedParams


class FakeGroup:
    """Answers the two questions megatron's buffer asks of its process group."""

    def __init__(self, size: int, rank: int = 0) -> None:
        self._size, self._rank = size, rank

    def size(self) -> int:
        return self._size

    def rank(self) -> int:
        return self._rank


class MegatronBucket:
    """A built ``_ParamAndGradBucket`` with its params named; ``param_to_index`` is upstream's, by name."""

    def __init__(self, bucket, names: dict) -> None:
        self.raw = bucket
        self.offset = bucket.offset
        self.grad_data = bucket.grad_data
        self.param_data = bucket.param_data
        self.param_to_index = {names[p]: tuple(span) for p, span in bucket.param_to_index.items()}


class MegatronBuffer:
    """A built ``_ParamAndGradBuffer`` with the names the suites use."""

    def __init__(self, buffer, names: dict, expert: bool) -> None:
        self.raw = buffer
        self.grad_data = buffer.grad_data
        self.param_data = buffer.param_data
        self.buckets = [MegatronBucket(b, names) for b in buffer.buckets]
        self.params = {names[p]: p for p in buffer.params}
        self.layout = LayoutRecord(
            param_dtype=buffer.param_dtype,
            grad_dtype=buffer.grad_dtype,
            numel=buffer.numel,
            numel_unpadded=buffer.numel_unpadded,
            bucket_indices=tuple(tuple(b) for b in buffer.bucket_indices),
            per_bucket_numel_unpadded=tuple(b.numel_unpadded for b in buffer.buckets),
            param_index_map={names[p]: tuple(v) for p, v in buffer.param_index_map.items()},
            expert_parallel=expert,
        )

    def owned_range(self, bucket_id: int, rank: int) -> tuple[int, int]:
        """Upstream reduce-scatters bucket ``b`` into ``shard_buffer(b, dp)[rank]``: the rank-th slice."""
        start, end = self.layout.bucket_indices[bucket_id]
        shard = (end - start) // self.raw.data_parallel_world_size
        return start + rank * shard, start + (rank + 1) * shard


def build(pgb, ddp_config, named_params: NamedParams, config: LayoutConfig,
          device) -> list[MegatronBuffer]:
    """Upstream's buffers for ``named_params`` under ``ddp_config``, on ``device`` ("meta" to plan)."""
    names = {_on(param, device): name for name, param in named_params}
    make = _made_by_upstream if hasattr(pgb, "group_params_for_buffers") else _made_as_ddp_does
    made = make(pgb, ddp_config, names, config)
    return [MegatronBuffer(raw, names, expert) for expert, raw in sorted(made, key=lambda m: m[0])]


def _made_by_upstream(pgb, ddp_config, names: dict, config: LayoutConfig) -> list[tuple[bool, object]]:
    """0.19 on: upstream's groups, each laid out as its DDP lays it out; buffers take (param, name) pairs."""
    params = list(names)
    layouts = {}
    if ddp_config.use_distributed_optimizer:
        from megatron.core.optimizer.distrib_optimizer import DistributedOptimizer

        layouts = DistributedOptimizer.compute_full_param_layout(
            params, config.bucket_size, config.dp, ddp_config,
            expert_data_parallel_world_size=config.expert_dp_size,
        ).layouts
    made = []
    for key, (group, indices) in pgb.group_params_for_buffers(params, ddp_config.grad_reduce_in_fp32).items():
        dp = _fake_dp_group(key.is_expert_parallel, config)
        made.append((key.is_expert_parallel, pgb._ParamAndGradBuffer(
            ddp_config, key.param_dtype, key.grad_dtype, [(p, names[p]) for p in group], dp,
            config.bucket_size, names, 1.0 / config.dp, indices, False, _fake_collection(dp),
            param_layout=layouts.get(key),
        )))
    return made


def _made_as_ddp_does(pgb, ddp_config, names: dict, config: LayoutConfig) -> list[tuple[bool, object]]:
    """Before 0.19: grouped by (expert parallel, param dtype, grad dtype) as DDP's ``__init__`` does."""
    groups: dict[tuple, list] = {}
    for param in names:
        grad_dtype = torch.float32 if config.grad_reduce_in_fp32 else param.dtype
        groups.setdefault((is_expert_parallel(param), param.dtype, grad_dtype), []).append(param)
    made = []
    for (expert, param_dtype, grad_dtype), group in groups.items():
        dp = _fake_dp_group(expert, config)
        made.append((expert, pgb._ParamAndGradBuffer(
            ddp_config, param_dtype, grad_dtype, group, data_parallel_group=dp,
            bucket_size=config.bucket_size, param_to_name=names, gradient_scaling_factor=1.0 / config.dp,
            param_indices=list(range(len(group))), nccl_ub=False, pg_collection=_fake_collection(dp),
        )))
    return made


def _fake_dp_group(expert: bool, config: LayoutConfig) -> FakeGroup:
    return FakeGroup(config.expert_dp_size if expert else config.dp)


def _fake_collection(dp: FakeGroup) -> SimpleNamespace:
    """The two groups a buffer reads from its collection: tensor parallel (1) and data parallel."""
    return SimpleNamespace(tp=FakeGroup(1), dp_cp=dp)


def _on(param: torch.nn.Parameter, device) -> torch.nn.Parameter:
    """``param``, or to plan on "meta" a meta copy keeping its attributes (expert, shared embedding)."""
    if device != "meta" or param.device.type == "meta":
        return param
    copy = torch.nn.Parameter(torch.empty_like(param, device="meta"), requires_grad=param.requires_grad)
    copy.__dict__.update(vars(param))
    return copy
