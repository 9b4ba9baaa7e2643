"""Adapter for Megatron-FSDP (pip ``megatron-fsdp`` 0.6.1; 0.2.3 to 0.4.0 in the release matrix), one registered name per
sharding strategy.

Megatron-FSDP is the data-parallel path Megatron-LM runs as its FSDP: its own
bucketed param-and-grad buffer, params handed to the optimizer as uneven
DTensors sharded on dim 0, and four strategies (``STRATEGIES``): ``no_shard``
(grads all-reduced, like DDP), ``optim`` (optimizer state and main params
sharded, ZeRO-1), ``optim_grads`` (grads reduce-scattered too, ZeRO-2) and
``optim_grads_params`` (params sharded too, ZeRO-3; it needs unit modules).
``--impl megatron-fsdp`` is ``optim_grads_params``, what ``fully_shard``
builds by default; ``megatron-fsdp-no-shard``, ``-optim`` and ``-optim-grads``
the others, and ``-optim-grads-units`` ``optim_grads`` with unit modules, which
it does not need (a bucket then never holds two units' params). megatron-core
0.19.2 bundles the same package byte for byte.

``ddp``
    ``wrap`` builds ``MegatronFSDP`` itself, with the package's own
    ``DistributedDataParallelConfig`` (``fully_shard`` picks megatron-core's
    config class where megatron-core is installed beside it, and 0.16.1's fails
    with a TypeError at fully_shard.py:371), over a CPU or GPU ``DeviceMesh``
    ("fsdp" over the group under test, "tp" of one rank), with what
    ``fully_shard`` defaults to: ``sync_model_each_microbatch=True``, so the
    last backward of a step reduces and finishes the sync itself. ``no_sync``
    turns that off and opens the wrapper's own ``no_sync`` for the microbatches
    before the last (with auto-sync on, each backward would reduce the
    accumulating buffer in place). Under ``optim_grads_params`` each module
    that owns params itself is a unit module (its class; never a container's). Reduced grads
    and params are read from the optimizer's DTensors, each rank's dim-0 rows
    gathered with ``all_gather_object`` over the control group (the package's
    ``uneven_dtensor_to_full_tensor`` all-gathers equal sizes only on gloo,
    uneven_dtensor.py:338); a rank whose rows of a param are none has no grad
    for it (param_and_grad_buffer.py:3393).
``optimizer``
    the suite's torch optimizer over the wrapper's DTensor params, through the
    package's ``fully_shard_optimizer`` as its users call it (step, then the
    optimized masters installed into the model's weights); clipping (the
    package has none of its own) takes the global norm as torch's ``clip_grad_norm_``
    does, from each rank's rows, reduced over the group; per-token
    losses reduce with SUM (``calculate_per_token_loss``) and
    ``finalize_model_grads`` divides by the global token count.

On a CPU the package needs four shims and two settings
(``suites/impls/megatron_fsdp_cpu.py``). What it does not support is ``lacked``,
each row with the upstream line. Its two live bugs of 0.6.1 are findings in
``fixtures/expectations/megatron-fsdp.toml`` (docs/peers.md, F7 and F8).
"""

from __future__ import annotations

import contextlib
import importlib.metadata

import torch
import torch.distributed as dist

from reference.config import DDPConfig

from . import megatron_fsdp_cpu
from .forwarding import GradsInParamsDDP
from .support import Declared, Lack, no_checkpoint, quiet as _quiet, refuse_unsupported, unmapped
from .wrap import packed_records

STRATEGIES = {
    "optim_grads_params": "megatron-fsdp",
    "no_shard": "megatron-fsdp-no-shard",
    "optim": "megatron-fsdp-optim",
    "optim_grads": "megatron-fsdp-optim-grads",
}
SHARDS_GRADS = ("optim_grads", "optim_grads_params")


def lacked(strategy: str) -> tuple[Lack, ...]:
    """What Megatron-FSDP under ``strategy`` does not support through this adapter, each with the upstream line."""
    layout = ("Megatron-FSDP lays its buffer out by its own BucketingPolicy (param_and_grad_buffer.py:233, grouped "
              "at :1726), not Megatron DDP's layout; the suites read its grads through the optimizer's DTensors")
    rows = [
        Lack("layout", layout),
        Lack("buffer", layout),
        Lack("shards", layout),
        Lack("validation", "Megatron-FSDP validates with bare asserts (e.g. megatron_fsdp.py:337)"),
        no_checkpoint("Megatron-FSDP"),
        Lack("expert", "Megatron-FSDP finds experts by the name '.experts.' (param_and_grad_buffer.py:1782), not "
                       "allreduce=False, and the adapter hands it no expert mesh"),
        *unmapped((), "the adapter maps none of upstream's newer knobs onto Megatron-FSDP's config"),
        Lack("policy", "Megatron-FSDP shards by its strategy, each param on dim 0 with its own padding; the suites "
                       "read its full gathered grads under 'packed'", when=lambda policy: policy != "packed"),
        Lack("grad_reduce_in_fp32", "the adapter leaves Megatron-FSDP's MixedPrecisionPolicy at its defaults "
                                    "(mixed_precision.py main_grads_dtype None: grads in the param dtype)"),
        Lack("average_in_collective", "megatron_fsdp.py:376-378 asks the expert data-parallel group's size, which "
                                      "is None without an expert mesh: AttributeError"),
        Lack("buckets_per_group", "Megatron-FSDP launches its buckets through its own reduce pipeline",
             when=lambda n: n != 1),
        Lack("check_for_nan_in_grad", "Megatron-FSDP has no check naming a param with NaN grads "
                                      "(report_nan_in_param_grad only reports)"),
        Lack("overlap_param_gather", "Megatron-FSDP decides its param gathers itself (overlapped under "
                                     "optim_grads_params, megatron_fsdp.py:330)"),
    ]
    if strategy in SHARDS_GRADS:
        rows.append(Lack("overlap_grad_reduce=False", f"under {strategy} Megatron-FSDP reduce-scatters during "
                         "backward whatever the config says (megatron_fsdp.py:333 sets overlap_grad_reduce=True)"))
    return tuple(rows)


def _rows(tensor: torch.Tensor | None) -> torch.Tensor | None:
    """This rank's rows of a dim-0-sharded DTensor (all of a replicated one), on the CPU."""
    if tensor is None:
        return None
    return getattr(tensor, "_local_tensor", tensor).detach().cpu().clone()


def gather_rows(named, group) -> dict[str, torch.Tensor]:
    """Every tensor of ``named`` ((name, DTensor or None, shape, replicated)) whole: each rank's dim-0 rows in rank
    order, over ``group`` (``all_gather_object``: the rows differ in count); None where no rank has rows."""
    mine = [(name, _rows(t)) for name, t, _, _ in named]
    everyone: list = [None] * dist.get_world_size(group)
    dist.all_gather_object(everyone, mine, group=group)
    whole = {}
    for i, (name, _, shape, replicated) in enumerate(named):
        pieces = [theirs[i][1] for theirs in everyone]
        if replicated:
            whole[name] = pieces[0]
            continue
        pieces = [p for p in pieces if p is not None and p.numel()]
        got = torch.cat([p.reshape(-1, *shape[1:]) for p in pieces]) if pieces else None
        if got is not None and tuple(got.shape) != tuple(shape):
            raise RuntimeError(f"{name}: the ranks' rows make {tuple(got.shape)}, but should make {tuple(shape)}")
        whole[name] = got
    return whole


class MegatronFSDPDDP(GradsInParamsDDP):
    """A ``MegatronFSDP`` under the suites' names; reads go through the optimizer's DTensors."""

    def __init__(self, raw, module: torch.nn.Module, records, group, agreement_group, device) -> None:
        self.shapes = {name: tuple(p.shape) for name, p in module.named_parameters()}
        self.dtypes = {name: p.dtype for name, p in module.named_parameters()}
        super().__init__(raw, module, records, source="main_grad")
        self.group, self.agreement_group, self.device = group, agreement_group, device

    def _distributed(self) -> dict[str, torch.nn.Parameter]:
        return dict(self.raw.param_and_grad_buffer.optimizer_named_parameters)

    def _replicated(self, tensor) -> bool:
        placements = getattr(tensor, "placements", ())
        return not any(p.is_shard() for p in placements)

    @contextlib.contextmanager
    def no_sync(self):
        """Auto-sync off and the wrapper's own ``no_sync``: the backward accumulates, the last one reduces."""
        self.raw.set_model_auto_sync(False)
        try:
            with self.raw.no_sync():
                yield
        finally:
            self.raw.set_model_auto_sync(True)

    def reduced_grads(self, named):
        dist_params = self._distributed()
        items = [(name, dist_params[name].grad, self.shapes[name], self._replicated(dist_params[name]))
                 for name, _ in named]
        whole = gather_rows(items, self.agreement_group)
        missing = [name for name, _ in named if whole[name] is None]
        if missing:
            raise RuntimeError(f"reduced grads: no rank holds a grad of {missing}, but every trainable param should "
                               "have one after finish_grad_sync")
        return [whole[name].to(self.device) for name, _ in named]

    def whole_params(self) -> dict[str, torch.Tensor]:
        """The optimizer's params (the masters the step updates), gathered and cast to the model's dtypes."""
        dist_params = self._distributed()
        items = [(name, dist_params[name], shape, self._replicated(dist_params[name]))
                 for name, shape in self.shapes.items()]
        whole = gather_rows(items, self.agreement_group)
        return {name: whole[name].to(self.device, self.dtypes[name]) for name in self.shapes}

    def wait_for_reductions(self) -> None:
        """With auto-sync the last backward finished the sync itself (``microbatch_count`` back at 0); finish one
        that is still pending (a ddp-level check that calls it inside ``no_sync``'s accumulation)."""
        if self.raw.microbatch_count:
            self.raw.finish_grad_sync()

    def finish_grad_sync(self) -> None:
        self.wait_for_reductions()
        for buf in self.buffers:
            buf.forget()

    def zero_grad_buffer(self) -> None:
        self.raw.zero_grad_buffer()
        for param in self._distributed().values():
            param.grad = None
        for buf in self.buffers:
            buf.forget()


class MegatronFSDPOptimizer:
    """The suite's torch optimizer over the DTensor params, through ``fully_shard_optimizer``."""

    def __init__(self, ddp: MegatronFSDPDDP, make_optimizer, max_grad_norm: float | None, norm_type: float,
                 strategy: str) -> None:
        from megatron_fsdp import fully_shard_optimizer

        self.ddp, self.max_grad_norm, self.norm_type, self.strategy = ddp, max_grad_norm, norm_type, strategy
        self.params = [p for p in ddp.raw.parameters() if p.requires_grad]
        with _quiet():
            self.optimizer = fully_shard_optimizer(make_optimizer(self.params))

    def _grads(self) -> list[torch.nn.Parameter]:
        return [p for p in self.ddp._distributed().values() if p.grad is not None]

    def step(self) -> float | None:
        norm = None
        if self.max_grad_norm is not None:
            norm = self._clip()
        # finalize_model_grads finished the sync (or the last backward did, with auto-sync): no second one here.
        self.optimizer.step(sync_grad_before_optimizer_step=False)
        # no_shard has nothing to gather: 0.5.0 onwards return at once (megatron_fsdp.py:1273 in 0.6.1), 0.4.0 and
        # earlier fetch a weight buffer no_shard never made (AttributeError, param_and_grad_buffer.py:4225 in 0.4.0).
        if self.strategy != "no_shard":
            self.ddp.raw.start_param_sync(force_sync=True)
        return norm

    def _clip(self) -> float:
        """The global norm of the reduced grads (each element once: a rank's rows of a sharded grad, a replicated
        grad on every rank alike), and every grad scaled by ``max_grad_norm / norm`` where that is below 1."""
        grads = [_rows_of(p.grad) for p in self._grads()]
        sharded = [not self.ddp._replicated(p) for p in self._grads()]
        inf = self.norm_type == float("inf")
        device = self.ddp.device
        if inf:
            here = max((float(g.abs().max()) for g in grads if g.numel()), default=0.0)
            total = torch.tensor([here], dtype=torch.float64, device=device)
            dist.all_reduce(total, op=dist.ReduceOp.MAX, group=self.ddp.group)
            norm = float(total.item())
        else:
            p = self.norm_type
            powers = [float(g.double().abs().pow(p).sum()) for g in grads]
            split = torch.tensor([sum(x for x, s in zip(powers, sharded) if s)], dtype=torch.float64, device=device)
            dist.all_reduce(split, group=self.ddp.group)
            norm = (float(split.item()) + sum(x for x, s in zip(powers, sharded) if not s)) ** (1 / p)
        coefficient = self.max_grad_norm / (norm + 1e-6)
        if coefficient < 1:
            for g in grads:
                g.mul_(coefficient)
        return norm

    def zero_grad(self) -> None:
        self.optimizer.zero_grad()
        self.ddp.zero_grad_buffer()

    def count_zeros(self) -> int:
        """Zero elements of the reduced grads over the whole model, each once: a sharded grad's on each rank's
        rows, a replicated one's on rank 0 (no padding in a DTensor's rows)."""
        rank = dist.get_rank(self.ddp.group)
        local = 0
        for param in self.ddp._distributed().values():
            if param.grad is not None and (not self.ddp._replicated(param) or rank == 0):
                local += int((_rows(param.grad) == 0).sum())
        total = torch.tensor([local], dtype=torch.int64, device=self.ddp.device)
        dist.all_reduce(total, group=self.ddp.agreement_group)
        return int(total.item())


class MegatronFSDPImplementation(Declared):
    def __init__(self, strategy: str, units: bool = False) -> None:
        """``units``: unit modules (``fsdp_unit_modules``) under a strategy that does not need them, each unit's
        params a bucket group of their own, gathered and reduced together (the name gains ``-units``)."""
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy: got {strategy!r}, but should be one of {', '.join(STRATEGIES)}")
        if units and strategy == "optim_grads_params":
            raise ValueError("units: got True under optim_grads_params, which has unit modules always")
        self.strategy, self.units = strategy, units
        self.name = STRATEGIES[strategy] + ("-units" if units else "")
        self.lacks = lacked(strategy)
        try:
            self.version = importlib.metadata.version("megatron-fsdp")
            with _quiet():
                import megatron_fsdp  # noqa: F401
        except Exception as exc:  # not installed, or broken against this torch
            self.version = "not installed"
            self.unavailable = (f"megatron-fsdp cannot be imported ({type(exc).__name__}: {exc}); install it with "
                                "`pip install -r requirements-megatron-fsdp.txt -c constraints.txt`")
        else:
            self.unavailable = None

    def unit_modules(self, module: torch.nn.Module) -> list[type] | None:
        """Under optim_grads_params (or with ``units``), the classes of the modules owning params themselves
        (without any, optim_grads_params divides by zero, megatron_fsdp.py:432), less the classes of a tied param's
        owner; None otherwise. Not a container's (a ModuleList has no forward of its own, so a unit of one would
        never gather or reduce: the deep shape's blocks)."""
        if self.strategy != "optim_grads_params" and not self.units:
            return None
        owners = [c for c in module.modules() if c is not module and any(True for _ in c.parameters(recurse=False))]
        # A class whose module owns a tied (shared_embedding) param is left to the root, which uses that param
        # outside the unit's forward too (a unit frees its params' storage after its forward).
        tied = {type(c) for c in owners if any(getattr(p, "shared_embedding", False) for p in c.parameters())}
        return [cls for cls in dict.fromkeys(type(c) for c in owners) if cls not in tied]

    def ddp_config(self, config: DDPConfig, gloo: bool = True):
        """The package's own config for ``config`` (not megatron-core's, whatever is installed); over ``gloo`` the
        grads are scaled, then summed: its fused division reduces with PREMUL_SUM (param_and_grad_buffer.py:4748),
        which gloo refuses."""
        from megatron_fsdp import DistributedDataParallelConfig

        return DistributedDataParallelConfig(
            data_parallel_sharding_strategy=self.strategy,
            overlap_grad_reduce=config.overlap_grad_reduce,
            overlap_param_gather=False,
            average_in_collective=config.average_in_collective,
            bucket_size=config.bucket_size,
            gradient_reduce_div_fusion=not gloo,
        )

    def wrap(self, module, config: DDPConfig, group, agreement_group=None, expert_group=None) -> MegatronFSDPDDP:
        from megatron_fsdp import MegatronFSDP
        from megatron_fsdp.utils import FSDPDistributedIndex

        refuse_unsupported(self, config)
        if expert_group is not None:
            raise ValueError("expert_group: got a group, but the megatron-fsdp adapter does not claim the expert level")
        records = packed_records(module)
        device = next(module.parameters()).device
        if device.type == "cpu":
            megatron_fsdp_cpu.install_current_stream()
        index = FSDPDistributedIndex(device_mesh=megatron_fsdp_cpu.fsdp_mesh(group, device.type),
                                     dp_shard_dim="fsdp", tp_dim="tp")
        gloo = dist.get_backend(group) == "gloo"  # also where ranks share a GPU over gloo
        with megatron_fsdp_cpu.building(device), _quiet():
            raw = MegatronFSDP(module, index, self.ddp_config(config, gloo),
                               fsdp_unit_modules=self.unit_modules(module),
                               disable_bucketing=config.disable_bucketing, device=device,
                               calculate_per_token_loss=config.calculate_per_token_loss,
                               sync_model_each_microbatch=True)
        return MegatronFSDPDDP(raw, module, records, group, agreement_group or group, device)

    def make_optimizer(self, ddp, make_optimizer, max_grad_norm=None, norm_type=2.0) -> MegatronFSDPOptimizer:
        return MegatronFSDPOptimizer(ddp, make_optimizer, max_grad_norm, norm_type, self.strategy)

    def finalize_model_grads(self, models, num_tokens=None) -> None:
        """Finish every sync; with ``num_tokens``, divide the (summed) reduced grads by the global count if > 0."""
        for model in models:
            model.finish_grad_sync()
        if num_tokens is None:
            return
        dist.all_reduce(num_tokens, group=models[0].agreement_group)
        factor = 1.0 / max(float(num_tokens.item()), 1.0)
        for model in models:
            for param in model._distributed().values():
                if param.grad is not None:
                    _rows_of(param.grad).mul_(factor)


def _rows_of(tensor: torch.Tensor) -> torch.Tensor:
    return getattr(tensor, "_local_tensor", tensor)


implementation = MegatronFSDPImplementation("optim_grads_params")
no_shard = MegatronFSDPImplementation("no_shard")
optim = MegatronFSDPImplementation("optim")
optim_grads = MegatronFSDPImplementation("optim_grads")
optim_grads_units = MegatronFSDPImplementation("optim_grads", units=True)
