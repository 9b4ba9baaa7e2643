"""Adapter for megatron-core's ``_ParamAndGradBuffer`` (the optional ``megatron`` extra).

megatron-core 0.16.1 (what pip resolves on Python 3.11) computes the layout
inside ``_ParamAndGradBuffer.__init__`` and allocates on
``torch.cuda.current_device()``. On a machine without CUDA we build it with
``current_device`` patched to the device we want ("meta" for planning, so
nothing is allocated) and its per-stage logging helper patched out; a fake
group that answers ``size()`` and ``rank()`` stands in for the data-parallel
group, so any dp can be planned in one process.

Real differences from the reference, recorded rather than hidden:

* upstream groups params by dtype in its DDP wrapper, not in the buffer; this
  adapter groups them the same way ((param dtype, grad dtype) in first-seen
  order), so the dtype-grouping test would test the adapter and is skipped in
  ``fixtures/expectations/megatron.toml``;
* it fills its shard cache only inside ``start_grad_sync`` and
  ``start_param_sync``, which issue collectives, so this adapter does not
  claim the ``shards`` level here;
* it validates with bare ``assert`` statements, so it does not claim the
  ``validation`` level;
* there is no ``shard-aligned`` policy upstream, and bucket groups are
  formed by upstream's own rule (one bucket each), not ``buckets_per_group``.

At the ``ddp`` level the adapter builds upstream's own
``DistributedDataParallel`` on the given (gloo or NCCL) group, with singleton
groups for tensor/pipeline/expert parallelism. Its distributed optimizer needs
far more set-up (optimizer config, Apex/TE fallbacks), so the ``optimizer``
level is not claimed: the suite steps a plain torch optimizer on
``main_grad`` for packed configurations and skips the rest with the reason.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import logging
from types import SimpleNamespace
from typing import Iterator
from unittest import mock

import torch

from reference.layout import LayoutConfig, LayoutRecord

from .forwarding import ForwardingDDP
from .protocol import NamedParams

POLICY_FLAGS = {  # policy -> (use_distributed_optimizer, pad_buckets_for_high_nccl_busbw)
    "packed": (False, False),
    "padded": (True, False),
    "high-busbw": (True, True),
}


class FakeGroup:
    """Answers the two questions megatron's buffer asks of its process group."""

    def __init__(self, size: int, rank: int = 0) -> None:
        self._size, self._rank = size, rank

    def size(self) -> int:
        return self._size

    def rank(self) -> int:
        return self._rank


class MegatronBuffer:
    """A built ``_ParamAndGradBuffer`` with the names the suites use."""

    def owned_range(self, bucket_id: int, rank: int) -> tuple[int, int]:
        """Upstream reduce-scatters bucket ``b`` into ``shard_buffer(b, dp)[rank]``: the rank-th slice."""
        start, end = self.layout.bucket_indices[bucket_id]
        shard = (end - start) // self.raw.data_parallel_world_size
        return start + rank * shard, start + (rank + 1) * shard

    def __init__(self, buffer, names: dict) -> None:
        self.raw = buffer
        self.grad_data = buffer.grad_data
        self.param_data = buffer.param_data
        self.buckets = buffer.buckets
        self.params = {names[p]: p for p in buffer.params}
        self.layout = LayoutRecord(
            param_dtype=buffer.param_dtype,
            grad_dtype=buffer.grad_dtype,
            numel=buffer.numel,
            numel_unpadded=buffer.numel_unpadded,
            bucket_indices=tuple(tuple(b) for b in buffer.bucket_indices),
            per_bucket_numel_unpadded=tuple(b.numel_unpadded for b in buffer.buckets),
            param_index_map={names[p]: tuple(v) for p, v in buffer.param_index_map.items()},
        )


class MegatronCoreImplementation:
    name = "megatron"
    capabilities = frozenset({"layout", "buffer", "ddp"})

    def __init__(self) -> None:
        try:
            self.version = importlib.metadata.version("megatron-core")
            with _quiet():
                from megatron.core.distributed import param_and_grad_buffer as pgb
                from megatron.core.distributed.distributed_data_parallel_config import (
                    DistributedDataParallelConfig,
                )
        except Exception as exc:  # not installed, or broken against this torch
            self.version = "not installed"
            self.unavailable = (
                f"megatron-core cannot be imported ({type(exc).__name__}: {exc}); "
                "install it with `pip install -r requirements-megatron.txt -c constraints.txt`"
            )
            return
        self.unavailable = None
        self._pgb = pgb
        self._config_cls = DistributedDataParallelConfig

    def unsupported(self, config) -> str | None:
        if config.policy not in POLICY_FLAGS:
            return f"megatron-core has no {config.policy!r} padding policy"
        if getattr(config, "buckets_per_group", 1) != 1:
            return "megatron-core forms bucket groups by its own rule, not buckets_per_group"
        return None

    @property
    def collective_patch_points(self):
        """Upstream binds its reduce-scatter at import; all-reduce goes through torch.distributed."""
        return [(torch.distributed, "all_reduce"), (self._pgb, "dist_reduce_scatter_func")]

    def wrap(self, module, config, group, agreement_group=None, expert_group=None) -> ForwardingDDP:
        from megatron.core.distributed import DistributedDataParallel
        from megatron.core.transformer import TransformerConfig

        reason = self.unsupported(config)
        if reason:
            raise ValueError(f"config: {reason}")
        ddp_config = self._ddp_config(
            config,
            overlap_grad_reduce=config.overlap_grad_reduce,
            average_in_collective=config.average_in_collective,
        )
        transformer_config = TransformerConfig(
            num_layers=1, hidden_size=8, num_attention_heads=1,
            calculate_per_token_loss=config.calculate_per_token_loss,
        )
        device = next(module.parameters()).device
        names = {p: n for n, p in module.named_parameters()}
        with _on_device(self._pgb, device.index if device.type == "cuda" else device.type), _quiet():
            ddp = DistributedDataParallel(
                transformer_config, ddp_config, module,
                disable_bucketing=config.disable_bucketing, pg_collection=_process_groups(group),
            )
        return ForwardingDDP(ddp, ddp.module, [MegatronBuffer(b, names) for b in ddp.buffers])

    def plan(self, named_params: NamedParams, config: LayoutConfig):
        return [b.layout for b in self._buffers(named_params, config, "meta")]

    def build(self, named_params: NamedParams, config: LayoutConfig, device="cpu"):
        return self._buffers(named_params, config, device)

    def _ddp_config(self, config, **extra):
        """Upstream's config for our ``LayoutConfig`` or ``DDPConfig`` (policy -> two flags)."""
        distributed, high_busbw = POLICY_FLAGS[config.policy]
        return self._config_cls(
            use_distributed_optimizer=distributed,
            pad_buckets_for_high_nccl_busbw=high_busbw,
            grad_reduce_in_fp32=config.grad_reduce_in_fp32,
            bucket_size=config.bucket_size,
            **extra,
        )

    def _buffers(self, named_params: NamedParams, config: LayoutConfig, device) -> list:
        ddp_config = self._ddp_config(config)
        names, groups = {}, {}
        for name, param in named_params:
            if device == "meta" and param.device.type != "meta":
                param = torch.nn.Parameter(torch.empty_like(param, device="meta"))
            names[param] = name
            grad_dtype = torch.float32 if config.grad_reduce_in_fp32 else param.dtype
            groups.setdefault((param.dtype, grad_dtype), []).append(param)
        group = FakeGroup(config.dp)
        buffers = []
        with _on_device(self._pgb, device):
            for (param_dtype, grad_dtype), params in groups.items():
                raw = self._pgb._ParamAndGradBuffer(
                    ddp_config,
                    param_dtype,
                    grad_dtype,
                    params,
                    data_parallel_group=group,
                    bucket_size=config.bucket_size,
                    param_to_name=names,
                    gradient_scaling_factor=1.0 / config.dp,
                    param_indices=list(range(len(params))),
                    nccl_ub=False,
                    pg_collection=SimpleNamespace(tp=FakeGroup(1), dp_cp=group),
                )
                buffers.append(MegatronBuffer(raw, names))
        return buffers


_singletons: dict[tuple[int, ...], object] = {}


def _process_groups(group):
    """Upstream's group collection: ``group`` for data parallelism, singletons for the rest."""
    from megatron.core.process_groups_config import ProcessGroupCollection

    ranks = tuple(torch.distributed.get_process_group_ranks(group))
    if ranks not in _singletons:
        # new_group is collective: every rank creates every singleton, keeps its own.
        own = [torch.distributed.new_group([r]) for r in ranks]
        _singletons[ranks] = own[ranks.index(torch.distributed.get_rank())]
    me = _singletons[ranks]
    return ProcessGroupCollection(
        tp=me, pp=me, ep=me, cp=me, dp=group, dp_cp=group, intra_dp_cp=group,
        expt_dp=group, intra_expt_dp=group,
    )


@contextlib.contextmanager
def _on_device(pgb, device) -> Iterator[None]:
    """Make megatron allocate on ``device`` and skip its distributed logging."""
    with (
        mock.patch.object(torch.cuda, "current_device", lambda: device),
        mock.patch.object(pgb, "log_on_each_pipeline_stage", lambda *a, **k: None),
    ):
        yield


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """megatron warns at import that Apex/TE are missing; that is expected here."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            yield
        finally:
            logging.disable(logging.NOTSET)


implementation = MegatronCoreImplementation()
