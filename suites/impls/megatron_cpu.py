"""What megatron-core 0.16.1 needs to run its DDP and distributed optimizer on a CPU over gloo.

Five runtime patches, none of them an edit to megatron's files, each named
by the line it works around (docs/peers.md has the reproductions):

P1  ``torch.cuda.current_device()`` is where buffers are allocated
    (distributed/param_and_grad_buffer.py:800, 806): patched to the device
    wanted ("meta" to plan without allocating, "cpu" to run).
P2  ``device="cuda"`` is hard-coded in tensor factories of the optimizer
    (optimizer/optimizer.py:473, 481, 485), the norm and clipping
    (optimizer/clip_grads.py:90, 103, 174, 207) and utils.py:1207: a
    ``TorchFunctionMode`` turns a cuda ``device`` argument into "cpu".
P3  ``Tensor.type()`` is compared with "torch.cuda.FloatTensor" and kin
    (optimizer/distrib_optimizer.py:361, 420, 582; optimizer/clip_grads.py:167):
    the same mode reports a CPU tensor's type under its cuda name.
P4  ``ChainedOptimizer.count_zeros`` (optimizer/optimizer.py:1293) asks
    parallel_state for the tensor-parallel rank, which explicit process
    groups never set: ``set_tensor_model_parallel_rank(0)``, its public setter.
P5  ``DistributedOptimizer`` asserts its inner optimizer is Adam
    (optimizer/distrib_optimizer.py:514-520, "due to checkpointing
    requirements"): torch's SGD is let through, as the suite's SGD cases need;
    only checkpointing is untested with it.

P1 to P3 are CPU-only; on CUDA devices only P4 and P5 apply. While planning
with a fake group, the per-stage logger is patched out as well (it asks the
group for ranks a fake cannot give).
"""

from __future__ import annotations

import contextlib
from typing import Iterator
from unittest import mock

import torch
from torch.overrides import TorchFunctionMode


class CudaOnCpu(TorchFunctionMode):
    """P2: a tensor factory asked for ``device="cuda"`` gets "cpu"; P3: ``Tensor.type()`` says "torch.cuda.*"."""

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
    """Everything the DDP and the optimizer need on ``device``: P1-P3 on CPU, P4 and P5 always."""
    from megatron.core import parallel_state
    from megatron.core.optimizer import distrib_optimizer

    parallel_state.set_tensor_model_parallel_rank(0)  # P4
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(  # P5
            distrib_optimizer, "Adam", (distrib_optimizer.Adam, torch.optim.SGD)))
        if device.type == "cpu":
            stack.enter_context(mock.patch.object(torch.cuda, "current_device", lambda: "cpu"))  # P1
            stack.enter_context(CudaOnCpu())  # P2, P3
        yield
