"""DDP configuration: upstream Megatron's knobs, with the padding flags named as one policy."""

from __future__ import annotations

import dataclasses
import fnmatch
from dataclasses import dataclass

from .layout import LayoutConfig, default_bucket_size, distributed_policy_names, get_policy


@dataclass(frozen=True)
class DDPConfig:
    """How the reference DDP buckets, reduces and shards gradients.

    ``policy`` replaces upstream's two flags: ``packed`` is plain all-reduce
    DDP; ``padded`` is ``use_distributed_optimizer``; ``high-busbw`` adds
    ``pad_buckets_for_high_nccl_busbw``; ``shard-aligned`` is this project's
    stricter variant. ``bucket_size`` (elements) defaults to upstream's
    ``max(40M, 1M * dp)``; with ``overlap_grad_reduce`` off, or
    ``disable_bucketing``, each buffer is one bucket, as upstream.
    """

    policy: str = "packed"
    bucket_size: int | None = None
    disable_bucketing: bool = False
    overlap_grad_reduce: bool = False
    overlap_param_gather: bool = False
    average_in_collective: bool = False
    grad_reduce_in_fp32: bool = False
    calculate_per_token_loss: bool = False
    check_for_nan_in_grad: bool = False
    buckets_per_group: int = 1
    num_distributed_optimizer_instances: int = 1
    reduce_scatter_with_fp32_accumulation: bool = False
    param_name_patterns_for_fp32_local_accumulation: tuple[str, ...] = ()
    fp8_param_gather: bool = False
    """Params the model marks quantized (``param.fp8_recipe``) are held in FP8 or MXFP8 and gathered so."""
    reuse_grad_buf_for_mxfp8_param_ag: bool = False
    """MXFP8 params are gathered in bf16 through their grad buffer's memory instead of a param buffer."""
    # Agree across ranks at every finish_grad_sync, so a problem seen by one
    # rank only (missing grad, NaN) raises everywhere instead of hanging peers.
    check_across_ranks: bool = True

    def __post_init__(self) -> None:
        get_policy(self.policy)
        if self.bucket_size is not None and (not isinstance(self.bucket_size, int) or self.bucket_size <= 0):
            raise ValueError(
                f"bucket_size: got {self.bucket_size!r}, but should be a positive number of elements "
                "or None for upstream's default"
            )
        if not isinstance(self.buckets_per_group, int) or self.buckets_per_group < 1:
            raise ValueError(f"buckets_per_group: got {self.buckets_per_group!r}, but should be an integer >= 1")
        if self.average_in_collective and self.calculate_per_token_loss:
            raise ValueError(
                "average_in_collective: got True with calculate_per_token_loss, but should be False: "
                "per-token losses are summed over ranks and divided by the token count"
            )
        if self.overlap_param_gather and not self.distributed_optimizer:
            raise ValueError(
                f"overlap_param_gather: got True with policy {self.policy!r}, but should only be set "
                f"with a distributed-optimizer policy ({distributed_policy_names()})"
            )
        self._check_upstream_knobs()

    def _check_quantized_params(self) -> None:
        if self.reuse_grad_buf_for_mxfp8_param_ag and not self.fp8_param_gather:
            raise ValueError("reuse_grad_buf_for_mxfp8_param_ag: got True without fp8_param_gather, but should be set "
                             "only with it: only params held in MXFP8 gather through the grad buffer (upstream asserts "
                             "the same)")
        if self.fp8_param_gather and not self.distributed_optimizer:
            raise ValueError(f"fp8_param_gather: got True with policy {self.policy!r}, but should be set only with a "
                             f"distributed-optimizer policy ({distributed_policy_names()}): only it gathers params")
        if self.fp8_param_gather and self.buckets_per_group != 1:
            raise ValueError(f"buckets_per_group: got {self.buckets_per_group} with fp8_param_gather, but should be 1: "
                             "buckets of quantized params are grouped by upstream's rule (each its own group, the "
                             "last holding the other buffers' buckets)")

    def _check_upstream_knobs(self) -> None:
        self._check_quantized_params()
        instances = self.num_distributed_optimizer_instances
        if not isinstance(instances, int) or isinstance(instances, bool) or instances < 1:
            raise ValueError(f"num_distributed_optimizer_instances: got {instances!r}, but should be an integer >= 1")
        if instances > 1 and not self.distributed_optimizer:
            raise ValueError(
                f"num_distributed_optimizer_instances: got {instances} with policy {self.policy!r}, but should be 1 "
                f"unless the policy shards for a distributed optimizer ({distributed_policy_names()})"
            )
        if self.reduce_scatter_with_fp32_accumulation:
            if not self.distributed_optimizer:
                raise ValueError(
                    f"reduce_scatter_with_fp32_accumulation: got True with policy {self.policy!r}, but should only be "
                    f"set with a distributed-optimizer policy ({distributed_policy_names()}): only they reduce-scatter"
                )
            if self.average_in_collective or instances > 1:
                raise ValueError(
                    "reduce_scatter_with_fp32_accumulation: got True with "
                    + ("average_in_collective" if self.average_in_collective else
                       f"num_distributed_optimizer_instances={instances}")
                    + ", but should be used with neither: it sums (SUM only) within one group"
                )
        patterns = self.param_name_patterns_for_fp32_local_accumulation
        if not isinstance(patterns, tuple) or not all(isinstance(p, str) and p for p in patterns):
            raise ValueError(f"param_name_patterns_for_fp32_local_accumulation: got {patterns!r}, but should be a "
                             "tuple of non-empty fnmatch patterns (or 'all')")
        if patterns and self.grad_reduce_in_fp32:
            raise ValueError(
                f"param_name_patterns_for_fp32_local_accumulation: got {patterns!r} with grad_reduce_in_fp32, but "
                "should be empty then: every main_grad is already fp32"
            )

    @property
    def distributed_optimizer(self) -> bool:
        return get_policy(self.policy).distributed_optimizer

    def layout_config(self, dp: int, expert_dp: int | None = None) -> LayoutConfig:
        """The planner request this configuration makes at data-parallel size ``dp``.

        Buffers are planned (padded, sharded) for one distributed-optimizer
        instance: ``dp / N`` ranks, ``expert_dp / N`` for expert buffers.
        Upstream's default bucket size follows the whole ``dp``, for expert
        buffers too.
        """
        instances = self.num_distributed_optimizer_instances
        for name, size in (("data-parallel", dp), ("expert-data-parallel", expert_dp or dp)):
            if size % instances:
                raise ValueError(
                    f"num_distributed_optimizer_instances: got {instances} for a {name} size of {size}, but should "
                    f"divide it (each instance shards over {name} size / instances ranks)"
                )
        if self.disable_bucketing or not self.overlap_grad_reduce:
            bucket_size = None
        else:
            bucket_size = self.bucket_size or default_bucket_size(dp)
        return LayoutConfig(dp=dp // instances, policy=self.policy, bucket_size=bucket_size,
                            grad_reduce_in_fp32=self.grad_reduce_in_fp32,
                            expert_dp=None if expert_dp is None else expert_dp // instances,
                            fp8_param_gather=self.fp8_param_gather,
                            reuse_grad_buf_for_mxfp8_param_ag=self.reuse_grad_buf_for_mxfp8_param_ag)

    def accumulates_in_fp32(self, name: str) -> bool:
        """Whether param ``name`` accumulates its microbatch grads in an fp32 ``main_grad`` of its own."""
        return any(p == "all" or fnmatch.fnmatchcase(name, p)
                   for p in self.param_name_patterns_for_fp32_local_accumulation)

    def gradient_scaling_factor(self, dp: int, expert_dp: int | None = None) -> float:
        """Applied before the collective; ``expert_dp`` for expert grads, reduced over expert_dp ranks.

        Per-token losses are summed: 1. SUM: 1/dp, experts too. AVG over the
        reducing group: 1 for dense grads, ``expert_dp / dp`` for expert grads,
        so that both end up as their group's sum times 1/dp (docs/rules.md).
        """
        if self.calculate_per_token_loss:
            return 1.0
        if self.average_in_collective:
            return 1.0 if expert_dp is None else expert_dp / dp
        return 1.0 / dp

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)
