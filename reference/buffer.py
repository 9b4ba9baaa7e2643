"""Allocation: one param and grad buffer per planned layout, with views into it.

The planner decides offsets; this module only allocates storage and points
``param.main_grad`` (and, under the distributed optimizer, ``param.data``),
the buckets and the per-rank shards at it. Shard views are built lazily and
cached, because re-slicing every bucket on every step is pure CPU overhead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

import torch

from .layout import BufferLayout, LayoutConfig, ParamSpec, distributed_policy_names, plan_layout, shard_numel


def shard_buffer(buffer: torch.Tensor, parts: int) -> list[torch.Tensor]:
    """Split a 1-D buffer into ``parts`` equal contiguous views (no copies)."""
    size = shard_numel(buffer.numel(), parts)
    return [buffer[r * size : (r + 1) * size] for r in range(parts)]


@dataclass(frozen=True)
class Bucket:
    """A contiguous slice of the buffer whose grads are reduced together."""

    index: int
    offset: int
    param_names: tuple[str, ...]  # layout order
    param_to_index: Mapping[str, tuple[int, int]]
    """Each param's ``[start, end)`` within the bucket, padding included (upstream's ``param_to_index``)."""
    numel_unpadded: int
    grad_data: torch.Tensor
    param_data: torch.Tensor | None


class ParamAndGradBuffer:
    """Storage for one ``BufferLayout``: grads always, params under the distributed optimizer."""

    def __init__(
        self,
        layout: BufferLayout,
        params: Mapping[str, torch.nn.Parameter],
        device: torch.device | str = "cpu",
    ) -> None:
        self.layout = layout
        self.params = {name: params[name] for name in layout.param_index_map}
        self.device = torch.device(device)
        self.dp = layout.dp
        distributed = layout.padding.distributed_optimizer
        self.grad_data = torch.zeros(layout.numel, dtype=layout.grad_dtype, device=self.device)
        self.param_data = (
            torch.zeros(layout.numel, dtype=layout.param_dtype, device=self.device)
            if distributed
            else None
        )
        for name, (start, end, _) in layout.param_index_map.items():
            param = self.params[name]
            if self.param_data is not None:
                view = self.param_data[start:end].view(param.shape)
                view.copy_(param.data)
                param.data = view
            param.main_grad = self.grad_data[start:end].view(param.shape)
        self.buckets = [self._bucket(i) for i in range(layout.num_buckets)]
        self._grad_shards: list[list[torch.Tensor] | None] = [None] * layout.num_buckets
        self._param_shards: list[list[torch.Tensor] | None] = [None] * layout.num_buckets

    def _bucket(self, index: int) -> Bucket:
        start, end = self.layout.bucket_indices[index]
        names = tuple(self.layout.bucket_param_names(index))
        return Bucket(
            index=index,
            offset=start,
            param_names=names,
            param_to_index={n: (self.layout.param_index_map[n][0] - start, self.layout.param_index_map[n][1] - start)
                            for n in names},
            numel_unpadded=self.layout.per_bucket_numel_unpadded[index],
            grad_data=self.grad_data[start:end],
            param_data=None if self.param_data is None else self.param_data[start:end],
        )

    def grad_shards(self, bucket_id: int) -> list[torch.Tensor]:
        """Per-rank views of a bucket's grads; built once, then the same list."""
        shards = self._grad_shards[bucket_id]
        if shards is None:
            shards = self._grad_shards[bucket_id] = shard_buffer(
                self.buckets[bucket_id].grad_data, self.dp
            )
        return shards

    def param_shards(self, bucket_id: int) -> list[torch.Tensor]:
        """Per-rank views of a bucket's params (distributed optimizer only), cached."""
        data = self.buckets[bucket_id].param_data
        if data is None:
            raise ValueError(
                f"param_shards: policy {self.layout.policy!r} keeps no param buffer, but should "
                f"be a distributed-optimizer policy ({distributed_policy_names()})"
            )
        shards = self._param_shards[bucket_id]
        if shards is None:
            shards = self._param_shards[bucket_id] = shard_buffer(data, self.dp)
        return shards

    def owned_range(self, bucket_id: int, rank: int) -> tuple[int, int]:
        """Buffer range ``[start, end)`` that ``rank`` owns of a bucket."""
        return self.layout.owned_range(bucket_id, rank)

    def zero_grad(self) -> None:
        self.grad_data.zero_()


def build_buffers(
    named_params: Iterable[tuple[str, torch.nn.Parameter]],
    config: LayoutConfig,
    device: torch.device | str = "cpu",
    buffer_cls: type[ParamAndGradBuffer] = ParamAndGradBuffer,
) -> list[ParamAndGradBuffer]:
    """Plan and allocate every buffer for a model's named trainable parameters."""
    params = dict(named_params)
    layout = plan_layout((ParamSpec.from_parameter(n, p) for n, p in params.items()), config)
    return [buffer_cls(buf, params, device) for buf in layout.buffers]
