"""What an implementation under test must provide: the one place that says so.

An implementation is any object with the attributes of ``Implementation``.
It declares the capability levels it provides; a test that needs a level the
implementation lacks is skipped with the reason, never passed.

Levels
------
``layout``
    ``plan(named_params, config)`` returns one ``LayoutRecord`` per buffer,
    without needing real storage (the params may be meta tensors).
``buffer``
    ``build(named_params, config, device)`` allocates and returns one
    ``BufferHandle`` per buffer: ``param.main_grad`` views, re-pointed
    ``param.data`` under the distributed optimizer, bucket views.
``shards``
    the handles also give cached per-rank shard views (``grad_shards``,
    ``param_shards``) and ownership ranges (``owned_range``).
``validation``
    bad configurations and inputs raise ``ValueError`` naming the field.

``config`` is a ``reference.layout.LayoutConfig``: a plain value object
(dp, policy name, bucket size in elements, grad_reduce_in_fp32) that every
implementation maps onto its own knobs.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Protocol, Sequence, runtime_checkable

import torch

from reference.layout import LayoutConfig

CAPABILITIES: dict[str, str] = {
    "layout": "plans buffer layouts (offsets, buckets, accounting)",
    "buffer": "allocates buffers with main_grad, param and bucket views",
    "shards": "cached per-rank shard views and ownership ranges",
    "validation": "rejects bad input with a ValueError naming the field",
}

NamedParams = Iterable[tuple[str, torch.nn.Parameter]]


class LayoutRecord(Protocol):
    """One buffer's layout, with upstream Megatron's meanings (FACTS section 1)."""

    param_dtype: torch.dtype
    grad_dtype: torch.dtype
    numel: int
    numel_unpadded: int
    bucket_indices: Sequence[tuple[int, int]]
    per_bucket_numel_unpadded: Sequence[int]
    param_index_map: Mapping[str, tuple[int, int, int]]  # name -> (start, end, bucket)


class BucketView(Protocol):
    offset: int
    grad_data: torch.Tensor
    param_data: torch.Tensor | None


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


@runtime_checkable
class Implementation(Protocol):
    name: str
    version: str
    capabilities: frozenset[str]
    # Why it cannot run here (e.g. not installed), or None when it can.
    unavailable: str | None

    def unsupported(self, config: LayoutConfig) -> str | None:
        """Why this configuration cannot be expressed, or None when it can."""

    def plan(self, named_params: NamedParams, config: LayoutConfig) -> Sequence[LayoutRecord]: ...

    def build(
        self, named_params: NamedParams, config: LayoutConfig, device: torch.device | str = "cpu"
    ) -> Sequence[BufferHandle]: ...
