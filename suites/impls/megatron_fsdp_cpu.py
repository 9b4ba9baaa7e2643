"""What Megatron-FSDP (pip ``megatron-fsdp`` 0.6.1) needs to run on a CPU over gloo: four shims, each proven.

Runtime patches, none of them an edit to the package's files; each is named by
the upstream line it works around, and ``tests/suites/impls/test_megatron_fsdp.py``
shows, for each, the failure without it:

S1  ``torch.cuda.current_device()`` is read in ``MegatronFSDP.__init__`` even
    when ``device=`` is given (megatron_fsdp.py:234, :238): answered 0 while the
    wrapper is built (a CPU torch raises there).
S2  ``Tensor.cuda()`` moves the chunk metadata of every uneven DTensor the
    buffer makes of a param (uneven_dtensor.py:187, reached from
    param_and_grad_buffer.py:3243 through make_fsdp_dtensor): the identity while
    the wrapper is built.
S3  ``torch.cuda.Stream()`` makes the side streams of the grad reduce and param
    gather pipelines (megatron_fsdp.py:406-407): a ``CpuStream`` while the
    wrapper is built.
S4  ``torch.cuda.current_stream()`` orders the reduce-scatter and all-gather
    pipelines (param_and_grad_buffer.py:4029, :4124, :4558), from the backward
    hooks too: a ``CpuStream`` whose ``wait_stream`` does nothing and whose
    ``record_event()`` answers an event with a no-op ``wait()``. The hooks run
    inside the caller's ``loss.backward()``, outside any call of the adapter,
    so S4 is installed for the process, on a torch that has no CUDA (where the
    original can only raise) and never where CUDA is available.

``torch.cuda.stream(...)`` and ``torch.cuda.empty_cache()`` need nothing on a
CPU torch. Besides the shims, two settings, not patches (the adapter's ``ddp_config`` and ``fsdp_mesh``):
``gradient_reduce_div_fusion = False`` (param_and_grad_buffer.py:4746-4748
reduces with ``_make_nccl_premul_sum``, which gloo refuses; with it off the
grads are scaled, then summed) and a CPU ``DeviceMesh`` with dims
("fsdp", "tp"), tp of size 1 (``fully_shard`` would build a "cuda" mesh,
fully_shard.py:302-306).
"""

from __future__ import annotations

import contextlib
import functools
from typing import Iterator
from unittest import mock

import torch

SHIMS = ("current_device", "tensor_cuda", "stream", "current_stream")
"""S1 to S4, by the names ``running(..., without=)`` takes to leave one out (the tests' proof that each is needed)."""


class CpuEvent:
    """An event recorded on a CPU stream: the work before it is done already."""

    def wait(self, *args, **kwargs) -> None:
        """Nothing to wait for: a CPU runs its work in order."""

    def synchronize(self) -> None:
        """Nothing to wait for."""

    def query(self) -> bool:
        return True


class CpuStream:
    """S3, S4: the one stream of a CPU, which runs its work in order."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def wait_stream(self, stream) -> None:
        """Work on a CPU runs in order: nothing to wait for."""

    def wait_event(self, event) -> None:
        """Nothing to wait for."""

    def record_event(self, event=None) -> CpuEvent:
        return CpuEvent()

    def synchronize(self) -> None:
        """Nothing to wait for."""


_CUDA_CURRENT_STREAM = torch.cuda.current_stream


def _current_stream(*args, **kwargs):
    if torch.cuda.is_available():
        return _CUDA_CURRENT_STREAM(*args, **kwargs)
    return CpuStream()


def install_current_stream() -> None:
    """S4 for the process, where torch has no CUDA (the backward hooks run outside the adapter's calls)."""
    if not torch.cuda.is_available():
        torch.cuda.current_stream = _current_stream


def uninstall_current_stream() -> None:
    """S4 taken away again (the tests' proof that it is needed)."""
    torch.cuda.current_stream = _CUDA_CURRENT_STREAM


@contextlib.contextmanager
def building(device: torch.device, without: tuple[str, ...] = ()) -> Iterator[None]:
    """S1 to S3 while ``MegatronFSDP`` is built on ``device`` (nothing on a GPU); ``without``: shims left out."""
    unknown = set(without) - set(SHIMS)
    if unknown:
        raise ValueError(f"without: got {sorted(unknown)}, but should be drawn from {', '.join(SHIMS)}")
    with contextlib.ExitStack() as stack:
        if device.type == "cpu":
            if "current_device" not in without:
                stack.enter_context(mock.patch.object(torch.cuda, "current_device", lambda: 0))  # S1
            if "tensor_cuda" not in without:
                stack.enter_context(mock.patch.object(torch.Tensor, "cuda", _stays))  # S2
            if "stream" not in without:
                stack.enter_context(mock.patch.object(torch.cuda, "Stream", CpuStream))  # S3
        yield


def _stays(tensor: torch.Tensor, *args, **kwargs) -> torch.Tensor:
    """S2: a CPU tensor asked onto the GPU stays where it is."""
    return tensor


def fsdp_mesh(group, device_type: str = "cpu"):
    """A 2-D ``DeviceMesh`` ("fsdp" over ``group``, "tp" of this rank alone), as Megatron-FSDP's index asks: on a
    CPU, where ``fully_shard`` would build a "cuda" one."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh

    ranks = dist.get_process_group_ranks(group)
    return DeviceMesh.from_group([group, _alone()], device_type, mesh=torch.tensor(ranks).reshape(len(ranks), 1),
                                 mesh_dim_names=("fsdp", "tp"))


@functools.cache
def _alone():
    """A group of this rank alone, made by this rank alone (the mesh's "tp" dim)."""
    import torch.distributed as dist

    from reference.process_groups import new_group

    return new_group([dist.get_rank()], use_local_synchronization=True)
