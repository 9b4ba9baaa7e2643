"""Allocation: one param and grad buffer per planned layout, with views into it.

The planner decides offsets; this module only allocates storage and points
``param.main_grad`` (and, under the distributed optimizer, ``param.data``),
the buckets and the per-rank shards at it. Shard views are built lazily and
cached, because re-slicing every bucket on every step is pure CPU overhead.

A buffer of quantized params (``layout.recipe``, under ``fp8_param_gather``)
keeps each param's quantized storage on the param (``param.fp8``: its bytes
and scales, ``reference.quantize``) and its values, dequantized, as the
tensor the model computes with (Transformer Engine computes from the bytes;
a CPU has no FP8 GEMM). Its param buffer is what the distributed optimizer
gathers into: the FP8 bytes themselves for per-tensor FP8 (``param.fp8.data``
is a view of it), bf16 values for MXFP8, which every rank quantizes itself
(``consume``). With ``reuses_grad_buffer`` that bf16 param view is the grad
buffer's own memory, and ``lifecycle`` (``reference.param_gather``) keeps the
order of its two lives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

import torch

from .layout import BufferLayout, LayoutConfig, ParamSpec, distributed_policy_names, plan_layout, shard_numel
from .param_gather import Lifecycle
from .quantize import MX, TENSOR, Fp8Tensor, Mxfp8Tensor


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
        self.grad_data = torch.zeros(layout.numel, dtype=layout.grad_dtype, device=self.device)
        self.param_data = self._param_buffer()
        self.lifecycle = Lifecycle.of(self.describe(), layout.num_buckets) if layout.reuses_grad_buffer else None
        for name, (start, end, _) in layout.param_index_map.items():
            param = self.params[name]
            if layout.recipe is not None:
                self._quantize(param, start, end)
            elif self.param_data is not None:
                view = self.param_data[start:end].view(param.shape)
                view.copy_(param.data)
                param.data = view
            param.main_grad = self.grad_data[start:end].view(param.shape)
        self.buckets = [self._bucket(i) for i in range(layout.num_buckets)]
        self._grad_shards: list[list[torch.Tensor] | None] = [None] * layout.num_buckets
        self._param_shards: list[list[torch.Tensor] | None] = [None] * layout.num_buckets

    def _param_buffer(self) -> torch.Tensor | None:
        """Where a distributed optimizer's param all-gather lands (``layout.gather_dtype``): a buffer of its own, or,
        reusing the grad memory, its first bytes viewed as bf16 (half of an fp32 grad buffer); None without a
        distributed optimizer."""
        dtype = self.layout.gather_dtype
        if dtype is None:
            return None
        if self.layout.reuses_grad_buffer:
            return self.grad_data[: self.layout.param_view_elements()].view(torch.bfloat16)
        return torch.zeros(self.layout.numel, dtype=dtype, device=self.device)

    def _quantize(self, param: torch.nn.Parameter, start: int, end: int) -> None:
        """Hold a param quantized (``param.fp8``), its values dequantized; per-tensor FP8 bytes live in the param
        buffer."""
        values = param.data.float()
        if self.layout.recipe == TENSOR:
            param.fp8 = Fp8Tensor.quantize(values, float(values.abs().max()))
            if self.param_data is not None:
                view = self.param_data[start:end].view(param.shape)
                view.copy_(param.fp8.data)
                param.fp8.data = view
        else:
            param.fp8 = Mxfp8Tensor.quantize(values)
        param.data.copy_(self.dequantized(param))

    @staticmethod
    def dequantized(param: torch.nn.Parameter) -> torch.Tensor:
        """The values a quantized param holds, as the model computes with them (MXFP8: its row-wise copy)."""
        return param.fp8.dequantize().to(param.dtype).view(param.shape)

    def consume(self, bucket_id: int) -> None:
        """After a bucket's params were gathered: its quantized params take the gathered values (MXFP8: each rank
        quantizes the bf16 values; per-tensor FP8: the bytes are the param's already), then, where the gather went
        through the grad memory, that bucket's param bytes, and only those, are zeroed for backward's grads."""
        if self.layout.recipe is None:
            return
        bucket = self.buckets[bucket_id]
        for name in bucket.param_names:
            param = self.params[name]
            if self.layout.recipe == MX:
                start, end = bucket.param_to_index[name]
                param.fp8 = Mxfp8Tensor.quantize(bucket.param_data[start:end].view(param.shape))
            param.data.copy_(self.dequantized(param))
        if self.lifecycle is not None:
            self.lifecycle.consume(bucket_id)
            bucket.param_data.zero_()

    def describe(self) -> str:
        kind = "expert" if self.layout.expert_parallel else "dense"
        held = f"{self.layout.recipe} params" if self.layout.recipe else f"{self.layout.param_dtype} params"
        return f"the {kind} buffer of {held}, {self.layout.grad_dtype} grads"

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
        if self.lifecycle is not None:
            self.lifecycle.zero()
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
