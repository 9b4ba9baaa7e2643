"""What megatron-core needs to run its DDP and distributed optimizer on a CPU over gloo.

Runtime patches, none of them an edit to megatron's files, each applied only to
the versions whose lines it works around (docs/peers.md has the file and line
per version, the error and a reproduction):

P1  ``torch.cuda.current_device()`` is where buffers are allocated: patched to
    the device wanted ("meta" to plan without allocating, "cpu" to run).
P2  ``device="cuda"`` is hard-coded in tensor factories of the optimizer, the
    norms and the clipping: a ``TorchFunctionMode`` turns it into "cpu".
P3  ``Tensor.type()`` is compared with "torch.cuda.FloatTensor" and kin: the
    same mode reports a CPU tensor's type under its cuda name.
P4  (before 0.19) ``ChainedOptimizer.count_zeros`` asks parallel_state for the
    tensor-parallel rank, which explicit process groups never set:
    ``set_tensor_model_parallel_rank(0)``, its public setter.
P5  ``DistributedOptimizer`` asserts its inner optimizer is Adam ("due to
    checkpointing requirements"): torch's SGD is let through, as the suite's
    SGD cases need; only checkpointing is untested with it.
P6  (0.19 on) importing megatron.core imports the Triton kernels of the MoE
    paged stash, whose module imports ``triton`` unguarded: where triton is not
    installed, a stand-in for that one module, whose kernels raise if called.
P7  (0.19 on) ``start_grad_sync`` asks ``torch.cuda.current_stream()`` for the
    stream to wait for CUDA-graph replays on, in every grad sync (backward
    hooks included).
P8  with several distributed-optimizer instances DDP makes a CUDA stream for
    the grad reductions (``torch.cuda.Stream``) and, with overlap, runs them
    on it and syncs it with the current (before 0.19: default) stream.

P7 and P8 share one stub: ``torch.cuda.Stream`` answers a ``CpuStream`` while
the DDP is built, and each bucket group's start and finish of a grad sync see
``CpuStream`` as the current and default stream and a no-op ``torch.cuda.stream``
(a CPU runs its work in order, with no replays to wait for).

P1 to P3, P7 and P8 apply on a CPU only; P4 and P5 on every device; P6 wherever
triton is missing. While planning with a fake group, the per-stage logger is
patched out as well (it asks the group for ranks a fake cannot give).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import importlib.util
import sys
import types
from typing import Iterator
from unittest import mock

import torch
from packaging.version import Version
from torch.overrides import TorchFunctionMode

# P4 ends, P6 and P7 begin here (seen in 0.16.1 and 0.19.2; 0.17 and 0.18 are untested and get 0.16's set).
PATCHES_CHANGE_AT = Version("0.19")
PAGED_STASH_KERNELS = "megatron.core.transformer.moe.ops.paged_stash"


@functools.cache
def installed_version() -> str | None:
    """megatron-core's version as pip installed it, or None when it is not installed."""
    try:
        return importlib.metadata.version("megatron-core")
    except importlib.metadata.PackageNotFoundError:
        return None


def _at_least_0_19() -> bool:
    return Version(installed_version() or "0") >= PATCHES_CHANGE_AT


class CudaOnCpu(TorchFunctionMode):
    """P2: a factory asked for ``device="cuda"`` gets "cpu"; P3: ``Tensor.type()`` says "torch.cuda.*"."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        device = kwargs.get("device")
        if device is not None and torch.device(device).type == "cuda":
            kwargs = {**kwargs, "device": "cpu"}
        out = func(*args, **kwargs)
        if func is torch.Tensor.type and len(args) == 1 and not kwargs and isinstance(out, str) \
                and not out.startswith("torch.cuda."):
            out = "torch.cuda." + out.removeprefix("torch.")
        return out


class CpuStream:
    """P7, P8: the one stream of a CPU, which runs its work in order and replays no CUDA graph."""

    def wait_event(self, event) -> None:
        raise RuntimeError(f"event: got {event!r} to wait for, but a CPU run has no CUDA graph replays")

    def wait_stream(self, stream) -> None:
        """Work on a CPU runs in order: nothing to wait for."""


def _missing_kernel(name: str):
    """P6: any kernel asked of the stand-in; dunders are refused so that ``inspect`` sees a plain module."""
    if name.startswith("__"):
        raise AttributeError(name)

    def kernel(*args, **kwargs):
        raise RuntimeError(f"{PAGED_STASH_KERNELS}.{name}: a Triton kernel, but triton is not installed")

    return kernel


def provide_missing_kernels() -> None:
    """P6, before megatron's first import: stand in for the paged stash's kernels where triton is missing."""
    if not _at_least_0_19() or PAGED_STASH_KERNELS in sys.modules or importlib.util.find_spec("triton"):
        return
    stand_in = types.ModuleType(PAGED_STASH_KERNELS, "Stand-in for megatron's Triton kernels (no triton)")
    stand_in.__getattr__ = _missing_kernel
    sys.modules[PAGED_STASH_KERNELS] = stand_in


def stub_streams(bucket_groups) -> None:
    """P7, P8 on a CPU: these bucket groups start and finish their grad syncs on ``CpuStream``."""
    for group in bucket_groups:
        group.start_grad_sync = _on_cpu_streams(group.start_grad_sync)
        group.finish_grad_sync = _on_cpu_streams(group.finish_grad_sync)


def _on_cpu_streams(grad_sync):
    @functools.wraps(grad_sync)
    def on_cpu(*args, **kwargs):
        with mock.patch.multiple(torch.cuda, current_stream=lambda *a, **k: CpuStream(),
                                 default_stream=lambda *a, **k: CpuStream(),
                                 stream=lambda *a, **k: contextlib.nullcontext()):
            return grad_sync(*args, **kwargs)

    return on_cpu


@contextlib.contextmanager
def planning(pgb, device) -> Iterator[None]:
    """P1 for a buffer planned or allocated with a fake group: allocate on ``device``, skip the logger."""
    with (
        mock.patch.object(torch.cuda, "current_device", lambda: device),
        mock.patch.object(pgb, "log_on_each_pipeline_stage", lambda *a, **k: None),
    ):
        yield


@contextlib.contextmanager
def running(device: torch.device) -> Iterator[None]:
    """What the DDP and the optimizer need on ``device``: P1-P3 and P8's stream on CPU, P4 and P5 always."""
    from megatron.core.optimizer import distrib_optimizer

    if not _at_least_0_19():
        from megatron.core import parallel_state

        parallel_state.set_tensor_model_parallel_rank(0)  # P4
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(  # P5
            distrib_optimizer, "Adam", (distrib_optimizer.Adam, torch.optim.SGD)))
        if device.type == "cpu":
            stack.enter_context(mock.patch.object(torch.cuda, "current_device", lambda: "cpu"))  # P1
            stack.enter_context(mock.patch.object(torch.cuda, "Stream", lambda *a, **k: CpuStream()))  # P8
            stack.enter_context(CudaOnCpu())  # P2, P3
        yield
