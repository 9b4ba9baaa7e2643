"""Every private torch name the project reads, each behind a function with a fallback that says what it assumes.

A GPU image carries an older torch than the tests' pin, and users run the
newest: a private name may be missing, moved or renamed in either. So no
file of the project reads one directly (``tests/compat/test_private_torch.py``
scans the code for any that does); each is read here, once, and where torch
lacks it the fallback below takes over: a documented value, a public
equivalent, or the feature declared unavailable with the reason. ``READS``
lists them as data: the name, who reads it, and the fallback.

Checked present on torch 2.11.0, 2.13.0 and 2.15.0 unless ``READS`` says
otherwise (torch 2.11.0 of the CUDA image lacks ``_DEFAULT_BUCKET_CAP_MB``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d
from torch.nn.parallel import distributed as torch_ddp


@dataclass(frozen=True)
class PrivateRead:
    name: str
    """Where torch keeps it, e.g. ``torch.nn.parallel.distributed._DEFAULT_BUCKET_CAP_MB``."""
    read_by: str
    """Who reads it, and for what."""
    fallback: str
    """What happens where torch lacks it, and what that assumes."""


READS = (
    PrivateRead("torch.nn.parallel.distributed._DEFAULT_BUCKET_CAP_MB",
                "the torch DDP adapter: the bucket cap torch DDP uses when given none",
                "25 MiB, DistributedDataParallel's documented default (bucket_cap_mb=None means 25); "
                "missing from torch 2.11.0's CUDA image"),
    PrivateRead("torch.distributed._DEFAULT_FIRST_BUCKET_BYTES",
                "the torch DDP adapter: the size of the first bucket torch DDP rebuilds with the default cap",
                "1 MiB, the reducer's kDefaultFirstBucketBytes (torch/csrc/distributed/c10d/reducer.hpp)"),
    PrivateRead("torch.distributed._compute_bucket_assignment_by_size",
                "the torch DDP adapter: torch's own bucket assignment, which the layout checks compare",
                "none can be computed: the adapter drops the 'layout' level and declares no buckets (those "
                "checks skip with the reason); its grads are read through one bucket over every param"),
    PrivateRead("torch.nn.parallel.DistributedDataParallel._build_params_for_reducer",
                "the torch DDP adapter: the params in the order torch hands them to its reducer",
                "the same order rebuilt from public calls, as torch 2.11-2.15 build it: named_modules(), each "
                "module's own params that require grad and are not ignored, first occurrence kept; a param "
                "expects a sparse grad when its module is a sparse Embedding or EmbeddingBag"),
    PrivateRead("torch.distributed._coalescing_manager",
                "the reference's bucket groups: several buckets' collectives launched as one",
                "each bucket's collective launched on its own, asynchronously, and all waited for: the same "
                "values, one launch per bucket instead of one per group"),
    PrivateRead("torch.distributed._composable.replicate_with_fsdp.replicate",
                "the replicate adapter (--impl replicate)",
                "the implementation is unavailable here, and every check skips with that reason"),
    PrivateRead("torch.cuda._sleep",
                "emulated compute on CUDA: a kernel that holds the stream for a number of clock cycles",
                "a chain of tiny kernels on the stream, calibrated like the spin: the stream is held as long, "
                "but the host spends time launching them and they take SMs (assumed small against a bucket's "
                "collective); the overlap's timeline on CUDA is then null, its layers' kernels not told apart"),
    PrivateRead("torch.autograd.Variable._execution_engine.queue_callback",
                "the worked hook-based example: finish the bucket reductions once backward has ended",
                "nothing is queued: the example finishes in finish_grad_sync(), which the suites call after "
                "backward (as Megatron's DDP asks its callers to)"),
    PrivateRead("torch.Tensor._base",
                "the observed-layout checks: which buffer a param's main_grad is a view of, and where it starts",
                "where a tensor does not say what it views, the layout cannot be read from the views: those "
                "checks skip with that reason"),
    PrivateRead("torch.distributed.Backend._plugins",
                "the recording group: whether its backend is registered already",
                "registering again and taking torch's 'already registered' refusal as registered"),
    PrivateRead("torch.distributed.distributed_c10d._world.pg_map",
                "the recording group: get_backend() names the real backend (gloo, nccl), not the recorder's",
                "get_backend() names the recorder's backend; an implementation that branches on the name takes "
                "its path for an unknown backend"),
    PrivateRead("torch.distributed.ProcessGroup._device_types, _get_backend, _register_backend",
                "the recording group: C++ that asks a group for its backend object (torch DDP's logger) gets "
                "the real one",
                "no backend object registered on the recorder: such C++ callers find none and fail, naming "
                "the device type"),
    PrivateRead("torch.distributed.ProcessGroup._start_coalescing, _end_coalescing",
                "the recording group: torch's coalescing manager calls them on the group it coalesces over",
                "not forwarded: the coalescing manager's own fallback applies (see _coalescing_manager)"),
)


# torch DDP's defaults and bucket assignment.

MIB = 2**20


def ddp_default_bucket_cap_mb() -> float:
    """The bucket cap torch DDP uses when ``bucket_cap_mb`` is None (MiB)."""
    return getattr(torch_ddp, "_DEFAULT_BUCKET_CAP_MB", 25)


def ddp_first_bucket_bytes() -> int:
    """The first bucket's byte cap torch DDP rebuilds with under the default cap."""
    return getattr(dist, "_DEFAULT_FIRST_BUCKET_BYTES", MIB)


def bucket_assignment_by_size() -> Callable | None:
    """torch's ``_compute_bucket_assignment_by_size(tensors, limits, expect_sparse, indices)``, or None."""
    return getattr(dist, "_compute_bucket_assignment_by_size", None)


def params_for_reducer(ddp: torch.nn.parallel.DistributedDataParallel) -> tuple[list, list[bool]]:
    """(params, expect_sparse_gradient) in the order torch DDP hands them to its reducer."""
    own = getattr(ddp, "_build_params_for_reducer", None)
    if own is not None:
        return own()
    ignored = getattr(ddp, "parameters_to_ignore", set())
    seen: set = set()
    params, sparse = [], []
    for module_name, module in ddp.module.named_modules():
        for param_name, param in module.named_parameters(recurse=False):
            if not param.requires_grad or f"{module_name}.{param_name}" in ignored or param in seen:
                continue
            seen.add(param)
            params.append(param)
            sparse.append(isinstance(module, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and module.sparse)
    return params, sparse


# Collectives.

def coalescing_manager() -> Callable | None:
    """torch's ``_coalescing_manager(group=..., async_ops=True)`` context manager, or None."""
    return getattr(dist, "_coalescing_manager", None)


def forward_coalescing(group: dist.ProcessGroup, which: str, device):
    """``group._start_coalescing(device)`` or ``group._end_coalescing(device)`` (``which``: start or end)."""
    method = getattr(group, f"_{which}_coalescing", None)
    if method is None:
        raise NotImplementedError(f"{type(group).__name__} has no _{which}_coalescing on this torch "
                                  f"{torch.__version__}: launch the collectives one by one")
    return method(device)


# Registering a Python process group's backend, and making torch see the real one behind it.

def registered_backends() -> dict | None:
    """The backends registered with torch, by upper-case name; None where torch keeps them elsewhere."""
    return getattr(dist.Backend, "_plugins", None)


def register_backend_once(name: str, creator: Callable, devices: list[str]) -> None:
    """``Backend.register_backend(name, creator, devices)`` unless ``name`` is registered already."""
    plugins = registered_backends()
    if plugins is not None and name.upper() in plugins:
        return
    try:
        dist.Backend.register_backend(name, creator, devices=devices)
    except ValueError as exc:  # torch refuses a name it has registered
        if plugins is not None or "already" not in str(exc):
            raise


def show_backend_behind(group: dist.ProcessGroup, inner: dist.ProcessGroup) -> None:
    """Make torch see ``inner``'s backend behind ``group``: its name for ``get_backend``, and the backend objects
    C++ asks a group for, per device type. Where torch keeps either elsewhere, that part is left undone."""
    world = getattr(c10d, "_world", None)
    pg_map = getattr(world, "pg_map", None)
    if pg_map is not None and group in pg_map and inner in pg_map:
        pg_map[group] = (pg_map[inner][0], pg_map[group][1])
    if not (all(hasattr(inner, n) for n in ("_device_types", "_get_backend"))
            and hasattr(group, "_register_backend")):
        return
    for device in inner._device_types:
        backend = inner._get_backend(device)
        kind = getattr(dist.ProcessGroup.BackendType, backend.name().upper(), dist.ProcessGroup.BackendType.CUSTOM)
        group._register_backend(device, kind, backend)


# Composable data parallelism.

def replicate() -> tuple[Callable | None, str | None]:
    """torch's ``replicate`` on FSDP2's machinery, or None with why it is not here."""
    try:
        from torch.distributed._composable.replicate_with_fsdp import replicate as found
    except ImportError as exc:
        return None, f"torch {torch.__version__} has no torch.distributed._composable.replicate_with_fsdp ({exc})"
    return found, None


# CUDA and autograd.

FALLBACK_CYCLES_PER_KERNEL = 10_000
"""The fallback spin counts one tiny kernel for this many cycles (calibration turns either into seconds)."""


def cuda_spin() -> Callable[[int], None]:
    """``torch.cuda._sleep(cycles)``: hold the current stream for about ``cycles`` clock cycles."""
    sleep = getattr(torch.cuda, "_sleep", None)
    return sleep if sleep is not None else _kernel_chain


def cuda_spin_is_one_kernel() -> bool:
    """Whether a spin is one kernel (``_sleep``'s ``spin_kernel``) that a profiler can tell apart per call."""
    return hasattr(torch.cuda, "_sleep")


def _kernel_chain(cycles: int) -> None:
    scratch = _scratch()
    for _ in range(max(1, cycles // FALLBACK_CYCLES_PER_KERNEL)):
        scratch.add_(1)


_SCRATCH: dict = {}


def _scratch() -> torch.Tensor:
    device = torch.cuda.current_device()
    if device not in _SCRATCH:
        _SCRATCH[device] = torch.zeros(1, device=torch.device("cuda", device))
    return _SCRATCH[device]


def view_base(tensor: torch.Tensor) -> tuple[torch.Tensor | None, str | None]:
    """The tensor ``tensor`` is a view of (None when it is no view), or None with why this torch cannot say."""
    if not tensors_tell_their_base():
        return None, f"torch {torch.__version__} does not say which tensor a view views (Tensor._base)"
    return tensor._base, None


def tensors_tell_their_base() -> bool:
    return hasattr(torch.Tensor, "_base")


def queue_backward_callback(callback: Callable[[], None]) -> bool:
    """Run ``callback`` once autograd has finished the current backward; False where torch cannot be asked."""
    engine = getattr(torch.autograd.Variable, "_execution_engine", None)
    queue = getattr(engine, "queue_callback", None)
    if queue is None:
        return False
    queue(callback)
    return True
