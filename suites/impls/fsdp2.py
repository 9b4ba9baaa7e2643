"""Adapter for torch's fully sharded data parallelism, FSDP2 (``--impl fsdp2``).

``torch.distributed.fsdp.fully_shard`` (torch 2.13) runs on gloo on CPU. It
keeps no bucketed buffer: every param becomes a DTensor sharded on dim 0
(each rank holds ``ceil(rows / world)`` rows, the last ones fewer or none),
units of params are all-gathered before their forward and their grads
reduce-scattered after their backward. What the suites can ask of it:

``ddp``
    ``wrap`` applies ``fully_shard`` to each direct child module that owns
    params (one communication unit each, so reductions overlap backward) and
    then to the root. A child owning a tied (``shared_embedding``) param is
    left to the root, which also uses that param. ``no_sync`` is
    ``set_requires_gradient_sync(False)``. When the suites read a buffer's
    ``grad_data``, each param's full reduced grad is gathered from the shards
    (``grad.full_tensor()``), in layout order on every rank.
``optimizer``
    the torch optimizer steps the sharded DTensor params (every rank updates
    its own rows: a sharded optimizer); ``clip_grad_norm_`` computes the
    global norm over the shards; zero counts sum each rank's rows;
    per-token losses set the divide factor to 1 and ``finalize_model_grads``
    divides by the global token count. ``average_in_collective`` is FSDP2's
    default reduce-scatter with AVG; without it FSDP2 is told to SUM and
    divide (``set_force_sum_reduction_for_comms``).

What it does not support is ``LACKS`` (``lacked``), each with the reason: no
bucketed buffer (FSDP2's per-param dim-0 rule is checked by
tests/suites/impls/test_fsdp2.py), and the knobs it has no counterpart for.

``FSDP2Implementation`` takes the function that makes a unit and its table,
so ``suites/impls/replicate.py`` runs torch's ``replicate`` (built on
FSDP2's machinery) through this same adapter.
"""

from __future__ import annotations

import contextlib
import functools

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.tensor import DTensor

from reference.config import DDPConfig
from reference.reduction_groups import reduce_groups

from .forwarding import GradsInParamsDDP
from .support import Declared, Lack, no_checkpoint, refuse_unsupported, unmapped
from .wrap import packed_records


def lacked(peer: str, padding: str, reduces: str) -> tuple[Lack, ...]:
    """What an FSDP2-based wrapper does not support: ``padding`` and ``reduces`` say what it does instead."""
    no_buffer = f"{peer} {padding}: no bucketed buffer"
    return (
        Lack("layout", no_buffer),
        Lack("buffer", no_buffer),
        Lack("shards", no_buffer),
        Lack("expert", f"the adapter hands {peer} no expert-data-parallel group"),
        Lack("validation", f"{peer}'s own errors are not held to the level's named-field form"),
        no_checkpoint(peer),
        *unmapped((), f"{peer} has none of upstream's newer knobs"),
        Lack("policy", f"{peer} {padding}; it has no bucket padding policy",
             when=lambda policy: policy != "packed"),
        Lack("grad_reduce_in_fp32", f"{peer} keeps no fp32 main copy of bf16 params (its MixedPrecisionPolicy "
                                    "casts an fp32 model down for compute instead)"),
        Lack("overlap_grad_reduce=False", f"{peer} always {reduces}"),
        Lack("buckets_per_group", f"{peer} groups params by module (its units), not buckets",
             when=lambda n: n != 1),
        Lack("check_for_nan_in_grad", f"{peer} does not check grads for NaN"),
        Lack("overlap_param_gather", f"{peer} prefetches its all-gathers itself"),
    )


LACKS = lacked("FSDP2", "shards each param on dim 0 with its own padding",
               "reduce-scatters a unit's grads right after its backward")


def _full(tensor: torch.Tensor | None) -> torch.Tensor | None:
    return tensor.full_tensor() if isinstance(tensor, DTensor) else tensor


class FSDP2DDP(GradsInParamsDDP):
    """A ``fully_shard``-ed module under the suites' names."""

    def __init__(self, module: torch.nn.Module, records, group: dist.ProcessGroup) -> None:
        super().__init__(module, module, records, source="grad")
        self.group = group

    def no_sync(self):
        return _without_gradient_sync(self.raw)

    def reduced_grad(self, param):
        """The full gradient, gathered from every rank's shard: a collective, made in layout order."""
        return _full(param.grad)

    def whole_params(self) -> dict[str, torch.Tensor]:
        """Every param gathered from its shards (a collective per param, in module order)."""
        return {name: _full(param) for name, param in self.module.named_parameters()}

    def wait_for_reductions(self) -> None:
        """FSDP2's root waits for every reduce-scatter before backward returns."""


def _units(module: torch.nn.Module):
    """The children a forward calls, each a unit: a container's members, not the container (a ``ModuleList`` has no
    forward, so hooks on it never unshard its params)."""
    for child in module.children():
        if isinstance(child, (torch.nn.ModuleList, torch.nn.ModuleDict)):
            yield from _units(child)
        else:
            yield child


@contextlib.contextmanager
def _without_gradient_sync(module: FSDPModule):
    module.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        module.set_requires_gradient_sync(True)


class FSDP2Optimizer:
    """A torch optimizer over the sharded params, with FSDP2's own global-norm clipping."""

    def __init__(self, ddp: FSDP2DDP, make_optimizer, max_grad_norm: float | None, norm_type: float) -> None:
        self.ddp = ddp
        self.params = [p for p in ddp.module.parameters() if p.requires_grad]
        self.optimizer = make_optimizer(self.params)
        self.max_grad_norm, self.norm_type = max_grad_norm, norm_type

    def step(self) -> float | None:
        norm = None
        if self.max_grad_norm is not None:
            total = torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm, norm_type=self.norm_type)
            norm = float(_full(total))
        self.optimizer.step()
        return norm

    def zero_grad(self) -> None:
        self.ddp.zero_grad_buffer()

    def count_zeros(self) -> int:
        """Zero grad elements over the whole model, each once (no padding in FSDP2's rows)."""
        local = sum(_zeros_counted_here(p.grad) for p in self.params)
        total = torch.tensor([local], dtype=torch.int64, device=self.params[0].device)
        dist.all_reduce(total, group=self.ddp.group)
        return int(total.item())


def _zeros_counted_here(grad: DTensor) -> int:
    """A grad's zeros in this rank's rows where no other rank holds them too: on a mesh dim it is sharded over, every
    rank counts its own rows; on one it is replicated over (all of a 1-D mesh, or HSDP's replicate dim), the first."""
    coordinate = grad.device_mesh.get_coordinate()
    if all(placement.is_shard() or place == 0 for placement, place in zip(grad.placements, coordinate)):
        return int((grad.to_local() == 0).sum())
    return 0


class FSDP2Implementation(Declared):
    """FSDP2, or another wrapper built on its machinery: ``apply(module, mesh=...)`` makes a unit."""

    version = torch.__version__

    def __init__(self, name: str = "fsdp2", apply=fully_shard, lacks: tuple[Lack, ...] = LACKS,
                 unavailable: str | None = None, expectations: str = "fsdp2") -> None:
        """``expectations``: the list it reads, FSDP2's own behaviour whatever applies the units; a variant with
        findings of its own names its own (which may include FSDP2's)."""
        self.name, self.apply, self.lacks, self.unavailable = name, apply, lacks, unavailable
        self.expectations = expectations

    def mesh(self, group, device_type: str):
        """The mesh the units shard over: the group, one dim."""
        return dist.device_mesh.DeviceMesh.from_group(group, device_type)

    def divide(self, unit: FSDPModule, config: DDPConfig, group) -> None:
        """How a unit scales its reduced grads. FSDP2 reduce-scatters with AVG by default: average_in_collective.
        Otherwise it sums and divides by the world size, or (per-token losses, summed) by 1 here and by the token
        count in finalize_model_grads. A factor other than the group size would need PREMUL_SUM, which gloo lacks;
        summing then dividing is what FSDP2 does without it."""
        if not config.average_in_collective:
            unit.set_force_sum_reduction_for_comms(True)
        if config.calculate_per_token_loss:
            unit.set_gradient_divide_factor(1.0)

    def wrap(self, module, config: DDPConfig, group, agreement_group=None, expert_group=None) -> FSDP2DDP:
        refuse_unsupported(self, config)
        records = packed_records(module)
        mesh = self.mesh(group, next(module.parameters()).device.type)
        for child in _units(module):
            owns = list(child.parameters())
            if owns and not any(getattr(p, "shared_embedding", False) for p in owns):
                self.apply(child, mesh=mesh)
        self.apply(module, mesh=mesh)
        for unit in (m for m in module.modules() if isinstance(m, FSDPModule)):
            self.divide(unit, config, group)
        return FSDP2DDP(module, records, group)

    steps_in_param_dtype = True
    """The torch optimizer steps the sharded params themselves: a bf16 param is updated in bf16, with no fp32
    main copy (``protocol.StepsInParamDtype``)."""

    def make_optimizer(self, ddp, make_optimizer, max_grad_norm=None, norm_type=2.0) -> FSDP2Optimizer:
        return FSDP2Optimizer(ddp, make_optimizer, max_grad_norm, norm_type)

    def finalize_model_grads(self, models, num_tokens=None) -> None:
        """With ``num_tokens``: sum it over the group and divide every sharded grad by it, then expose grads."""
        if num_tokens is not None:
            dist.all_reduce(num_tokens, group=models[0].group)
            factor = 1.0 / max(float(num_tokens.item()), 1.0)
            for model in models:
                for param in model.module.parameters():
                    if param.grad is not None:
                        param.grad.mul_(factor)
        for model in models:
            model.finish_grad_sync()


implementation = FSDP2Implementation()
keep_unsharded = FSDP2Implementation("fsdp2-no-reshard", functools.partial(fully_shard, reshard_after_forward=False))
"""FSDP2 with its own knob ``reshard_after_forward=False`` (``--impl fsdp2-no-reshard``): a unit keeps its gathered
params from its forward to its backward instead of gathering them again, so the backward runs on the forward's
all-gather; every value of the common axes meets it in its own rows."""


class HybridSharded(FSDP2Implementation):
    """FSDP2's HSDP (``--impl fsdp2-hsdp``): params sharded within groups of consecutive ranks and replicated across
    them, on a 2-D mesh (replicate, shard): at four ranks two replicas of two shards, at two or three one shard per
    replica. A unit's grads are reduce-scattered within its shard group, then all-reduced across the replicas. Where
    grads are summed, each unit is told the whole group's size as its divide factor (``set_gradient_divide_factor``),
    the path of pytorch #155903 (fixed by PR #155915, 2025-06): a factor given under HSDP was applied on both dims,
    averaging twice over the replicas."""

    def __init__(self) -> None:
        super().__init__("fsdp2-hsdp", expectations="fsdp2-hsdp")

    @staticmethod
    def replicas(world: int) -> int:
        return 2 if world >= 4 and world % 2 == 0 else world

    def mesh(self, group, device_type: str):
        ranks = dist.get_process_group_ranks(group)
        replicas = self.replicas(len(ranks))
        if replicas == 1:
            return super().mesh(group, device_type)
        groups = reduce_groups(group, replicas)  # the shard groups are consecutive ranks, the replicas strided
        layout = torch.tensor(ranks).reshape(replicas, len(ranks) // replicas)
        return dist.device_mesh.DeviceMesh.from_group([groups.across, groups.shard], device_type, mesh=layout,
                                                      mesh_dim_names=("replicate", "shard"))

    def divide(self, unit: FSDPModule, config: DDPConfig, group) -> None:
        super().divide(unit, config, group)
        if not config.average_in_collective and not config.calculate_per_token_loss:
            unit.set_gradient_divide_factor(float(group.size()))


hybrid_sharded = HybridSharded()
