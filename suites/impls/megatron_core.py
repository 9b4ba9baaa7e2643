"""Adapter for megatron-core (the optional peer, ``--impl megatron``): 0.16.1 and 0.19.2.

pip resolves 0.16.1 on Python 3.11 and the newest on 3.12 (``tox -e
megatron-019`` installs 0.19.2 on 3.11). Every level runs upstream's own code;
``suites/impls/megatron_cpu.py`` holds the runtime patches each version needs
on a CPU, each named by the line it works around.

``layout``, ``buffer``
    upstream's ``_ParamAndGradBuffer``, built per (expert parallel, param
    dtype, grad dtype) as upstream's DDP builds them
    (``suites/impls/megatron_buffers.py``), with a fake group that answers
    ``size()`` and ``rank()``, so any dp can be planned in one process.
``ddp``, ``expert``
    upstream's ``DistributedDataParallel`` on the given (gloo or NCCL) group;
    expert params (``allreduce = False``) are reduced over ``expert_group``
    (``suites/impls/megatron_groups.py`` makes the rest of upstream's groups).
``optimizer``
    upstream's ``get_megatron_optimizer``: a ``DistributedOptimizer`` (or,
    for the packed policy, its fp32/bf16 optimizer) around the torch
    optimizer the suite asks for (torch's, also where Transformer Engine or
    Apex is installed: ``suites/impls/megatron_fused.py``), with upstream's
    L2 clipping and zero counting; upstream's ``finalize_model_grads`` with
    ``num_tokens``.

Upstream's newer knobs (``protocol.KNOBS``) are mapped where the installed
version has them (the others are rows of its table ``lacks``), and passed on
under the same names: each field ``knobs_used`` finds turned to its DDP
config (``_ddp_config``), ``force_all_reduce`` to its ``finish_grad_sync``,
``grad_norm_skip_threshold`` to its optimizer config.

Real differences, recorded rather than hidden (docs/peers.md):

* before 0.19 upstream groups params by dtype inline in its DDP wrapper, so
  the layout adapter groups them itself there and the grouping checks skip
  (``fixtures/expectations/megatron.toml``); from 0.19 upstream's own
  grouping is used and checked;
* it fills its shard cache only inside ``start_grad_sync`` and
  ``start_param_sync``, which issue collectives: no ``shards`` level;
* it validates with bare ``assert`` statements: no ``validation`` level;
* no ``shard-aligned`` policy, bucket groups by its own rule (not
  ``buckets_per_group``).

The last three are ``LACKS``; the knobs the installed version lacks join them.
"""

from __future__ import annotations

import dataclasses
import inspect
import math

import torch

from reference.layout import LayoutConfig

from . import megatron_buffers, megatron_cpu, megatron_fused
from .forwarding import ForwardingDDP
from .megatron_buffers import MegatronBuffer
from .megatron_groups import process_groups
from .protocol import KNOBS, NamedParams, knobs_used
from .support import Declared, Lack, no_checkpoint, quiet as _quiet, refuse_unsupported, unmapped, why_not

POLICY_FLAGS = {  # policy -> (use_distributed_optimizer, pad_buckets_for_high_nccl_busbw)
    "packed": (False, False),
    "padded": (True, False),
    "high-busbw": (True, True),
}
LACKS = (
    Lack("shards", "megatron-core fills its shard cache only inside start_grad_sync and start_param_sync, "
                   "which issue collectives"),
    Lack("validation", "megatron-core validates with bare assert statements"),
    no_checkpoint("megatron-core"),
    Lack("policy", "megatron-core has no {value!r} padding policy",
         when=lambda policy: policy not in POLICY_FLAGS),
    Lack("buckets_per_group", "megatron-core forms bucket groups by its own rule, not buckets_per_group",
         when=lambda n: n != 1),
    Lack("transport=gloo+cuda", "a bucket group's grad sync coalesces its collectives (_coalescing_manager, "
                                "param_and_grad_buffer.py:433 in 0.16.1, :702 in 0.19.2), and gloo's coalesced "
                                "all-reduce refuses CUDA tensors (ProcessGroupGloo::allreduce_coalesced: "
                                "unsupported device type cuda)"),
)


UNHONOURED = tuple(Lack(knob, "megatron-core holds quantized params only as Transformer Engine tensors: "
                              "fp8_utils.py is_float8tensor and is_mxfp8tensor (:122-136 in 0.19.2) are False "
                              "without TE, whose quantized tensors need CUDA; the adapter does not stand the "
                              "suite's emulated params in for them (docs/peers.md)")
                   for knob in ("fp8_param_gather", "reuse_grad_buf_for_mxfp8_param_ag"))
"""Knobs the installed megatron-core has that the path the adapter wraps cannot honour here, a ``Lack`` row each
(a field only another path reads, as Megatron-FSDP's, belongs here too); every other knob it has is passed on."""


class MegatronDDP(ForwardingDDP):
    """Upstream's DistributedDataParallel, with its expert buffers after the dense ones."""

    def __init__(self, raw, names: dict, groups, device: torch.device) -> None:
        buffers = [MegatronBuffer(b, names, False) for b in raw.buffers]
        buffers += [MegatronBuffer(b, names, True) for b in raw.expert_parallel_buffers]
        super().__init__(raw, raw.module, buffers)
        self.groups, self.device = groups, device

    def finish_grad_sync(self, force_all_reduce: bool = False) -> None:
        self.raw.finish_grad_sync(force_all_reduce=force_all_reduce)


class MegatronOptimizer:
    """``get_megatron_optimizer`` around the torch optimizer the suite asks for.

    Its config clips by the L2 norm only; an inf-norm clip runs upstream's
    own ``get_grad_norm_fp32(norm_type=inf)`` and ``clip_grad_by_total_norm_fp32``
    between the steps of upstream's ``step`` (prepare, clip, step with the
    ready grads), as its ``step`` does for L2.

    Upstream's ``step`` answers ``ok=False`` both when it found non-finite
    grads (with no norm) and when ``grad_norm_skip_threshold`` skipped the
    update (with the norm above it): the first raises here, the second is the
    skip asked for.
    """

    def __init__(self, ddp: MegatronDDP, make_optimizer, max_grad_norm: float | None, norm_type: float,
                 skip_threshold: float | None = None) -> None:
        from megatron.core.optimizer import get_megatron_optimizer

        self.ddp, self.max_grad_norm, self.norm_type = ddp, max_grad_norm, norm_type
        self.skip_threshold = skip_threshold
        l2_clip = max_grad_norm if norm_type == 2.0 else None
        config = optimizer_config(make_optimizer, l2_clip, ddp, skip_threshold)
        with megatron_fused.kept_out(), megatron_cpu.running(ddp.device), _quiet():
            self.raw = get_megatron_optimizer(config, [ddp.raw], use_gloo_process_groups=False,
                                              pg_collection=ddp.groups)

    def step(self) -> float | None:
        """Upstream's step; the grad norm (before clipping) when clipping or skipping by it."""
        with megatron_cpu.running(self.ddp.device):
            if self.max_grad_norm is not None and self.norm_type != 2.0:
                ok, norm = self._step_clipping_by(self.norm_type)
            else:
                ok, norm, _ = self.raw.step()
        skipped = self.skip_threshold is not None and norm is not None and norm > self.skip_threshold
        if not ok and not skipped:
            raise RuntimeError("megatron-core's optimizer skipped the step (it found non-finite grads)")
        return None if self.max_grad_norm is None and self.skip_threshold is None else float(norm)

    def _step_clipping_by(self, norm_type: float) -> tuple[bool, float]:
        from megatron.core.optimizer.clip_grads import clip_grad_by_total_norm_fp32, get_grad_norm_fp32

        self.raw.prepare_grads()
        parts = self.raw.chained_optimizers
        grads = [g for opt in parts for g in _grads_for_norm(opt)]
        # A max over every rank counts each element's value once, however it is replicated.
        norm = get_grad_norm_fp32(grads, norm_type=norm_type, grad_stats_parallel_group=self.ddp.groups.dp)
        clip_grad_by_total_norm_fp32([p for opt in parts for p in opt.get_parameters()], self.max_grad_norm, norm)
        return self.raw.step_with_ready_grads(), norm

    def zero_grad(self) -> None:
        self.ddp.raw.zero_grad_buffer()
        self.raw.zero_grad()

    def count_zeros(self) -> int:
        """Upstream's count over its main grads, which it fills from the reduced grads first."""
        with megatron_cpu.running(self.ddp.device):
            self.raw.prepare_grads()
            return int(self.raw.count_zeros())


def _grads_for_norm(optimizer) -> list[torch.Tensor]:
    """The grads upstream takes a norm over (``get_main_grads_for_grad_norm`` was renamed in 0.19)."""
    renamed = getattr(optimizer, "get_grads_for_grad_norm", None)
    return renamed() if renamed else optimizer.get_main_grads_for_grad_norm()


def optimizer_config(make_optimizer, max_grad_norm: float | None, ddp: MegatronDDP,
                     skip_threshold: float | None = None):
    """Upstream's OptimizerConfig for the torch optimizer ``make_optimizer`` builds (SGD or Adam)."""
    from megatron.core.optimizer import OptimizerConfig

    probe = make_optimizer([torch.nn.Parameter(torch.zeros(1))])
    d = probe.defaults
    dtypes = {p.dtype for p in ddp.module.parameters()}
    common = dict(lr=d["lr"], weight_decay=d.get("weight_decay", 0.0), clip_grad=max_grad_norm or 0.0,
                  log_num_zeros_in_grad=True, bf16=torch.bfloat16 in dtypes,
                  params_dtype=torch.bfloat16 if torch.bfloat16 in dtypes else torch.float32,
                  use_distributed_optimizer=ddp.raw.ddp_config.use_distributed_optimizer)
    if skip_threshold is not None:
        common["grad_norm_skip_threshold"] = skip_threshold
    if type(probe) is torch.optim.SGD:
        return OptimizerConfig(optimizer="sgd", sgd_momentum=d["momentum"], **common)
    if type(probe) is torch.optim.Adam:
        beta1, beta2 = d["betas"]
        return OptimizerConfig(optimizer="adam", adam_beta1=beta1, adam_beta2=beta2, adam_eps=d["eps"],
                               decoupled_weight_decay=False, **common)
    raise ValueError(f"optimizer: got {type(probe).__name__}, but megatron-core's factory is driven here "
                     "only for torch.optim.SGD and torch.optim.Adam")


class MegatronCoreImplementation(Declared):
    name = "megatron"
    lacks = LACKS + unmapped((), "megatron-core cannot be imported here")  # until it imports (__init__)
    skip_norm_types = frozenset({2.0})
    """Upstream decides a skip from the L2 norm its clipping computed."""

    def __init__(self) -> None:
        self.version = megatron_cpu.installed_version() or "not installed"
        try:
            megatron_cpu.provide_missing_kernels()
            with _quiet():
                from megatron.core.distributed import param_and_grad_buffer as pgb
                from megatron.core.distributed.distributed_data_parallel_config import (
                    DistributedDataParallelConfig,
                )
        except Exception as exc:  # not installed, or broken against this torch
            self.unavailable = (
                f"megatron-core cannot be imported ({type(exc).__name__}: {exc}); "
                "install it with `pip install -r requirements-megatron.txt -c constraints.txt`"
            )
            return
        self.unavailable = None
        self._pgb = pgb
        self._config_cls = DistributedDataParallelConfig
        self._reduce_scatter_at_import = pgb.dist_reduce_scatter_func
        self.lacks = (LACKS + UNHONOURED
                      + unmapped(upstream_knobs() | {row.what for row in UNHONOURED},
                                 f"megatron-core {self.version} has no such config field or finish_grad_sync argument"))

    def reset_process_state(self) -> None:
        """Undo an earlier DDP's rebinding of upstream's module-level reduce-scatter (docs/peers.md, F1):
        one check's DDPs must not decide how the next check's DDPs reduce."""
        if self.unavailable is None:
            self._pgb.dist_reduce_scatter_func = self._reduce_scatter_at_import

    def report_lines(self) -> list[str]:
        return [megatron_fused.report_line()]

    def wrap(self, module, config, group, agreement_group=None, expert_group=None) -> MegatronDDP:
        from megatron.core.distributed import DistributedDataParallel
        from megatron.core.transformer import TransformerConfig

        refuse_unsupported(self, config)
        passed = ("overlap_grad_reduce", "overlap_param_gather", "average_in_collective", "check_for_nan_in_grad")
        ddp_config = self._ddp_config(config, **{name: getattr(config, name) for name in passed})
        dtypes = {p.dtype for p in module.parameters()}
        transformer_config = TransformerConfig(
            num_layers=1, hidden_size=8, num_attention_heads=1,
            calculate_per_token_loss=config.calculate_per_token_loss,
            bf16=torch.bfloat16 in dtypes, params_dtype=next(iter(dtypes)) if len(dtypes) == 1 else torch.float32,
        )
        device = next(module.parameters()).device
        names = {p: n for n, p in module.named_parameters()}
        groups = process_groups(group, expert_group or group, config.num_distributed_optimizer_instances)
        with megatron_cpu.running(device), _quiet():
            ddp = DistributedDataParallel(
                transformer_config, ddp_config, module,
                disable_bucketing=config.disable_bucketing, pg_collection=groups,
            )
        if device.type == "cpu":
            megatron_cpu.stub_streams(ddp.bucket_groups + ddp.expert_parallel_bucket_groups)
        return MegatronDDP(ddp, names, groups, device)

    def make_optimizer(self, ddp, make_optimizer, max_grad_norm=None, norm_type=2.0,
                       grad_norm_skip_threshold=None) -> MegatronOptimizer:
        if norm_type not in (2.0, math.inf):
            raise ValueError(f"norm_type: got {norm_type}, but megatron-core's norms here are 2 and inf")
        if grad_norm_skip_threshold is not None:
            reason = why_not(self, "grad_norm_skip_threshold")
            if reason:
                raise ValueError(f"grad_norm_skip_threshold: got {grad_norm_skip_threshold}, but {reason}")
            if max_grad_norm is not None and norm_type not in self.skip_norm_types:
                raise ValueError(f"grad_norm_skip_threshold: got {grad_norm_skip_threshold} with norm_type "
                                 f"{norm_type}, but should be None then: upstream skips by its L2 norm")
        return MegatronOptimizer(ddp, make_optimizer, max_grad_norm, norm_type, grad_norm_skip_threshold)

    def finalize_model_grads(self, models, num_tokens=None) -> None:
        """Upstream's own: finish every chunk's sync, then divide by the all-reduced ``num_tokens``."""
        from megatron.core.distributed.finalize_model_grads import finalize_model_grads

        finalize_model_grads([m.raw for m in models], num_tokens=num_tokens, pg_collection=models[0].groups)

    def plan(self, named_params: NamedParams, config: LayoutConfig):
        return [b.layout for b in self._buffers(named_params, config, "meta")]

    def build(self, named_params: NamedParams, config: LayoutConfig, device="cpu"):
        return self._buffers(named_params, config, device)

    def _ddp_config(self, config, **extra):
        """Upstream's config for our ``LayoutConfig`` or ``DDPConfig`` (policy -> two flags), with every knob the
        configuration turns under its own name upstream (at every level: a layout knob shapes ``plan``'s buffers
        too); a knob also in ``extra`` is passed once."""
        distributed, high_busbw = POLICY_FLAGS[config.policy]
        turned = {knob: getattr(config, knob) for knob in knobs_used(config)}
        return self._config_cls(
            use_distributed_optimizer=distributed,
            pad_buckets_for_high_nccl_busbw=high_busbw,
            grad_reduce_in_fp32=config.grad_reduce_in_fp32,
            bucket_size=config.bucket_size,
            **{**turned, **extra},
        )

    def _buffers(self, named_params: NamedParams, config: LayoutConfig, device) -> list[MegatronBuffer]:
        with megatron_cpu.planning(self._pgb, device):
            return megatron_buffers.build(self._pgb, self._ddp_config(config), named_params, config, device)


def upstream_knobs() -> frozenset[str]:
    """The ``KNOBS`` the installed megatron-core has: fields of its DDP or optimizer config (the same
    names), or arguments of its DDP's ``finish_grad_sync`` (``force_all_reduce``)."""
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.optimizer import OptimizerConfig

    configs = (DistributedDataParallelConfig, OptimizerConfig)
    names = {f.name for config in configs for f in dataclasses.fields(config)}
    names |= set(inspect.signature(DistributedDataParallel.finish_grad_sync).parameters)
    return frozenset(k for k in KNOBS if k in names)


implementation = MegatronCoreImplementation()
