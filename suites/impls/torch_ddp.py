"""Adapter for torch's own ``torch.nn.parallel.DistributedDataParallel`` (``--impl torch``).

Layout level: torch's bucket assignment, computed by torch's own
``torch.distributed._compute_bucket_assignment_by_size`` (read through
``compat.private_torch``: on a torch without it the adapter drops this level)
and turned into one ``LayoutRecord`` per dtype. Which assignment: torch 2.13 DDP (default
``find_unused_parameters=False``) reduces iteration 0 in **one bucket per
dtype** (construction passes the limit ``[sys.maxsize]``), then, before the
second forward, rebuilds its buckets from the order in which grads became
ready, with the limits ``[first_bucket_bytes_cap, bucket_bytes_cap]`` and the
bucket list not reversed. ``plan`` is that rebuilt, steady-state assignment
with grads assumed ready in reverse ``parameters()`` order (torch's own
assumption at construction; Megatron's too), passed exactly as the C++
reducer passes them: tensors in ready order with their indices. The real
ready order may differ (a LayerNorm's weight is ready before its bias), and
with ``find_unused_parameters=True`` torch never rebuilds and keeps its
construction-time assignment (parameters() order, bucket list reversed):
docs/peers.md works both through with numbers.

Torch's buckets are separate flat tensors; the record synthesizes one
contiguous layout per dtype by concatenating them in torch's bucket order,
each bucket's params in torch's order inside it: packed, no padding,
``numel_unpadded == numel``.

Units: ``LayoutConfig.bucket_size`` counts elements and torch's limits count
bytes per bucket (buckets never mix dtypes or devices), so a dtype's limit is
``bucket_size * element_size(dtype)`` bytes; torch closes a bucket once its
bytes reach the limit, which is exactly "elements >= bucket_size". ``None``
means one bucket per buffer (``LayoutConfig``'s meaning): an unbounded limit.

ddp level: torch DDP on the given group with ``gradient_as_bucket_view=False``
and ``bucket_cap_mb`` from ``DDPConfig.bucket_size`` (elements times the
params' element size, in MiB; torch's default 25 MiB with a 1 MiB first
bucket when ``None``; unbounded under ``disable_bucketing``). Torch reduces
inside backward; the handle aliases ``param.main_grad`` to ``param.grad`` and
rebuilds a flat ``grad_data`` in the planned layout at ``finish_grad_sync``.
Torch's reducer launches its all-reduces from C++, through the process group
it is given: the suites hand it a recording group (``ranks.recording``), so
they observe torch's own built-in path, with no comm hook.

What it does not support is ``LACKS``, each with the reason.
"""

from __future__ import annotations

import sys

import torch

from compat import private_torch
from reference.config import DDPConfig
from reference.layout import LayoutConfig, LayoutRecord

from .forwarding import GradsInParamsDDP
from .protocol import NamedParams
from .support import Declared, Lack, provides, refuse_unsupported, unmapped

MIB = 2**20
UNBOUNDED = sys.maxsize  # bytes: what torch itself passes for "one bucket"
DEFAULT_CAP_BYTES = int(private_torch.ddp_default_bucket_cap_mb() * MIB)
FIRST_BUCKET_BYTES = private_torch.ddp_first_bucket_bytes()

LACKS = (
    Lack("buffer", "torch DDP keeps its buckets as separate flat tensors and reduces into param.grad: "
                   "no single buffer, no main_grad views"),
    Lack("shards", "torch DDP all-reduces whole buckets: nothing is sharded"),
    Lack("validation", "torch DDP has no validation of its own that names the field, the value and what "
                       "is valid"),
    Lack("expert", "torch DDP reduces every param over the one group it is handed"),
    Lack("optimizer", "torch DDP has no optimizer of its own (no fp32 main params, no distributed "
                      "optimizer)"),
    *unmapped((), "torch DDP has none of upstream's newer knobs"),
    Lack("policy", "torch DDP all-reduces unpadded buckets: it has no {value!r} policy (no padding, no "
                   "distributed optimizer)", when=lambda policy: policy != "packed"),
    Lack("grad_reduce_in_fp32", "torch DDP reduces each grad in its param's dtype: it has no "
                                "grad_reduce_in_fp32"),
    Lack("overlap_grad_reduce=False", "torch DDP always overlaps: buckets launch from autograd hooks "
                                      "during backward"),
    Lack("average_in_collective", "torch DDP averages by scaling each bucket by 1/world size before a SUM"),
    Lack("calculate_per_token_loss", "torch DDP always averages over ranks; it has no per-token scaling"),
    Lack("buckets_per_group", "got {value}, but torch DDP launches each bucket alone (1)",
         when=lambda n: n != 1),
    Lack("check_for_nan_in_grad", "torch DDP does not check grads for NaN"),
)
NO_ASSIGNMENT = Lack("layout", "torch's bucket assignment "
                               "(torch.distributed._compute_bucket_assignment_by_size) cannot be asked for "
                               "on this torch (compat.private_torch)")


def layout_limits(config: LayoutConfig, dtype: torch.dtype) -> list[int]:
    """Byte limits for ``config.bucket_size`` elements of ``dtype``; unbounded for one bucket."""
    if config.bucket_size is None:
        return [UNBOUNDED]
    return [config.bucket_size * dtype.itemsize]


def ddp_bucket_cap_mb(config: DDPConfig, module: torch.nn.Module) -> float | None:
    """``bucket_cap_mb`` for torch DDP: None keeps torch's default (25 MiB, first bucket 1 MiB)."""
    if config.disable_bucketing:
        return UNBOUNDED // MIB
    if config.bucket_size is None:
        return None
    return config.bucket_size * _element_size(module) / MIB  # exact: a power-of-two denominator


def rebuild_limits(bucket_cap_mb: float | None) -> list[int]:
    """The limits torch's reducer rebuilds with: a 1 MiB first bucket only when bucket_cap_mb is None."""
    if bucket_cap_mb is None:
        return [FIRST_BUCKET_BYTES, DEFAULT_CAP_BYTES]
    return [int(bucket_cap_mb * MIB)]


def rebuilt_assignment(params: list[torch.Tensor], limits: list[int], sparse: list[bool]) -> list[list[int]]:
    """torch's rebuilt buckets (indices into ``params``) when grads are ready in reverse order.

    The reducer passes the tensors in ready order with their indices, so torch
    keeps its buckets in the order they closed instead of sorting them.
    """
    ready = list(reversed(range(len(params))))
    assign = private_torch.bucket_assignment_by_size()
    if assign is None:  # torch's assignment cannot be asked for: one bucket to read the grads through
        return [ready]
    buckets, _ = assign([params[i] for i in ready], limits, [sparse[i] for i in ready], ready)
    return [list(b) for b in buckets]


def synthesize(names: list[str], params: list[torch.Tensor], buckets: list[list[int]]) -> LayoutRecord:
    """Concatenate one dtype's buckets in torch's order into a packed layout record."""
    offset, bounds, index_map = 0, [], {}
    for b, members in enumerate(buckets):
        start = offset
        for i in members:
            index_map[names[i]] = (offset, offset + params[i].numel(), b)
            offset += params[i].numel()
        bounds.append((start, offset))
    dtype = params[buckets[0][0]].dtype
    return LayoutRecord(
        param_dtype=dtype, grad_dtype=dtype, numel=offset, numel_unpadded=offset,
        bucket_indices=tuple(bounds), per_bucket_numel_unpadded=tuple(e - s for s, e in bounds),
        param_index_map=index_map,
    )


def layouts(names: list[str], params: list[torch.Tensor], sparse: list[bool], limits_for
            ) -> list[LayoutRecord]:
    """One record per dtype, first-seen order; ``limits_for(dtype)`` gives that dtype's byte limits.

    torch groups buckets by (dtype, device) inside one call, each group with
    its own limit sequence, so one call per dtype is the same assignment.
    """
    records = []
    for dtype in dict.fromkeys(p.dtype for p in params):
        members = [i for i, p in enumerate(params) if p.dtype == dtype]
        local = rebuilt_assignment(
            [params[i] for i in members], limits_for(dtype), [sparse[i] for i in members]
        )
        records.append(synthesize([names[i] for i in members], [params[i] for i in members], local))
    return records


def reducer_params(ddp: torch.nn.parallel.DistributedDataParallel):
    """(names, params, expect_sparse) in the order torch DDP hands them to its reducer."""
    params, sparse = private_torch.params_for_reducer(ddp)
    name_of = {}
    for name, param in ddp.module.named_parameters():
        name_of.setdefault(param, name)
    return [name_of[p] for p in params], params, sparse


class TorchDDP(GradsInParamsDDP):
    """torch's DistributedDataParallel: it reduces inside backward, into ``param.grad``."""

    def finish_grad_sync(self) -> None:
        try:
            super().finish_grad_sync()
        except RuntimeError as exc:
            raise RuntimeError(
                f"{exc} (torch DDP with find_unused_parameters=False reduces a bucket only once all "
                "its grads are ready)"
            ) from None


class TorchDDPImplementation(Declared):
    """torch DDP with its defaults, or with ``options``: its own knobs (``OWN_KNOBS``) set to other values, a
    registered name each, so that the suites meet every value with the common axes (its own covering rows)."""

    version = torch.__version__
    unavailable = None

    def __init__(self, name: str = "torch", expectations: str | None = None, **options) -> None:
        """``expectations``: the list of another name whose findings this variant shares (``SharesExpectations``)."""
        unknown = set(options) - set(OWN_KNOBS)
        if unknown:
            raise ValueError(f"options: got {sorted(unknown)}, but should be drawn from {', '.join(OWN_KNOBS)}")
        self.name, self.options = name, options
        if expectations is not None:
            self.expectations = expectations

    @property
    def lacks(self) -> tuple[Lack, ...]:
        """``LACKS``, and the ``layout`` level where torch's bucket assignment cannot be asked for."""
        return LACKS if private_torch.bucket_assignment_by_size() else (NO_ASSIGNMENT, *LACKS)

    def plan(self, named_params: NamedParams, config: LayoutConfig) -> list[LayoutRecord]:
        """torch's rebuilt buckets per dtype (module docstring).

        A non-packed policy raises. ``grad_reduce_in_fp32`` has no torch
        counterpart (``LACKS`` says so) and does not move any offset;
        the records answer with what torch does, ``grad_dtype == param_dtype``.
        """
        if config.policy != "packed":
            raise ValueError(f"policy: got {config.policy!r}, but torch DDP supports only 'packed'")
        named = list(named_params)
        names, params = [n for n, _ in named], [p for _, p in named]
        return layouts(names, params, [False] * len(params), lambda dtype: layout_limits(config, dtype))

    def wrap(self, module, config: DDPConfig, group, agreement_group=None, expert_group=None) -> TorchDDP:
        """torch DDP on ``group``; its buffers carry the steady-state plan for torch's own limits.

        ``agreement_group`` is not used: torch does not agree across ranks before grads are read.
        """
        refuse_unsupported(self, config)
        cap_mb = ddp_bucket_cap_mb(config, module)
        device = next(module.parameters()).device
        ddp = torch.nn.parallel.DistributedDataParallel(
            module, device_ids=[device.index] if device.type == "cuda" else None, process_group=group,
            bucket_cap_mb=cap_mb, **{"gradient_as_bucket_view": False, **self.options},
        )
        names, params, sparse = reducer_params(ddp)
        limits = rebuild_limits(cap_mb)
        handle = TorchDDP(ddp, module, layouts(names, params, sparse, lambda dtype: limits))
        # torch's rebuilt buckets, as it launches them; none where torch's assignment cannot be asked for, nor
        # under static_graph, whose reducer keeps its construction-time bucket through the second step (measured:
        # every float32 grad in one all-reduce of 4200 elements there), nor with find_unused_parameters, whose
        # reducer never rebuilds (should_rebuild_buckets, torch/csrc/distributed/c10d/reducer.hpp:150-151)
        rebuilt = (provides(self, "layout") and not self.options.get("static_graph")
                   and not self.options.get("find_unused_parameters"))
        handle.declared_layouts = [b.layout for b in handle.buffers] if rebuilt else None
        return handle


def _element_size(module: torch.nn.Module) -> int:
    """One byte limit serves every dtype in torch DDP: refuse what it cannot express."""
    sizes = {p.element_size() for p in module.parameters() if p.requires_grad}
    if len(sizes) != 1:
        raise ValueError(
            f"bucket_size: got params with element sizes {sorted(sizes)}, but torch DDP's single "
            "bucket_cap_mb (bytes) matches an element count for one element size only"
        )
    return sizes.pop()


OWN_KNOBS = {
    "static_graph": "the graph is the same every iteration: the reducer records which grads arrive once and "
                    "skips the search for unused params from the second iteration on",
    "gradient_as_bucket_view": "each param's .grad is a view into its bucket, not a copy: the memory upstream's "
                               "contiguous grad buffer saves, and what a bucket's reduction writes through",
    "find_unused_parameters": "the reducer walks the autograd graph after each forward for params that get no "
                              "grad, and keeps its construction-time buckets",
}
"""torch DDP's own knobs that a registered variant turns (docs/peers.md); each value meets the common axes in the
variant's own rows."""

implementation = TorchDDPImplementation()
static_graph = TorchDDPImplementation("torch-static-graph", static_graph=True)
bucket_view = TorchDDPImplementation("torch-bucket-view", expectations="torch", gradient_as_bucket_view=True)
find_unused = TorchDDPImplementation("torch-find-unused", expectations="torch", find_unused_parameters=True)
