"""A timeline of one overlapped step, Holistic Trace Analysis style: each layer's backward and each collective.

Spans are milliseconds from the step's start. How they are taken depends on
where the work runs:

- **gloo** (CPU): a layer's span runs from its backward pre-hook to its
  backward hook; a collective's from its launch to the completion of its
  work's future, which gloo completes when the data has arrived.
- **NCCL** (CUDA): host-side times say nothing, since everything is queued
  on streams and NCCL completes a work's future when it is enqueued. The
  step runs under the profiler, and the spans are the device's own: each
  emulated-compute kernel (``torch.cuda._sleep``'s ``spin_kernel``, one per
  layer, in backward order) and each NCCL kernel, start to end.
"""

from __future__ import annotations

import time
from typing import Iterable, NamedTuple

import torch.distributed as dist

COMPUTE_KERNEL = "spin_kernel"  # what torch.cuda._sleep launches
COLLECTIVE_KERNEL_PREFIX = "nccl"


class Kernel(NamedTuple):
    name: str
    start_us: float
    end_us: float


def spans_from_kernels(kernels: Iterable[Kernel], depth: int) -> dict:
    """Layer and collective spans from the device's kernels of one step.

    The ``depth`` emulated-compute kernels run in backward order, the last
    layer first; every NCCL kernel is one collective. Times become ms from
    the first kernel's start.
    """
    kernels = sorted(kernels, key=lambda k: k.start_us)
    if not kernels:
        return {"layers": [], "collectives": [], "backward_end_ms": 0.0, "step_end_ms": 0.0}
    origin = kernels[0].start_us
    ms = lambda us: (us - origin) / 1e3  # noqa: E731
    compute = [k for k in kernels if COMPUTE_KERNEL in k.name]
    if len(compute) != depth:
        raise ValueError(f"compute kernels: got {len(compute)} {COMPUTE_KERNEL} launches in the profiled step, "
                         f"but should be one per layer ({depth})")
    layers = [{"layer": depth - 1 - i, "start_ms": ms(k.start_us), "end_ms": ms(k.end_us)}
              for i, k in enumerate(compute)]
    collectives = [{"collective": i, "start_ms": ms(k.start_us), "end_ms": ms(k.end_us)}
                   for i, k in enumerate(k for k in kernels if k.name.lower().startswith(COLLECTIVE_KERNEL_PREFIX))]
    return {"layers": layers, "collectives": collectives,
            "backward_end_ms": max(span["end_ms"] for span in layers),
            "step_end_ms": max(ms(k.end_us) for k in kernels)}


def profiled_step(steps) -> dict:
    """One overlapped step under the CUDA profiler: spans from the device's kernels."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    steps.ctx.sync()
    dist.barrier(group=steps.ctx.group)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        steps.overlap_step()
        steps.ctx.sync()
    kernels = [Kernel(e.name, e.time_range.start, e.time_range.end) for e in prof.events()
               if e.device_type == DeviceType.CUDA]
    return spans_from_kernels(kernels, len(steps.net))


def host_step(steps, points) -> dict:
    """One overlapped step on CPU: backward hooks time the layers, the collectives' own futures their ends."""
    origin = [0.0]  # set when the step begins
    now = lambda: (time.perf_counter() - origin[0]) * 1e3  # noqa: E731 - ms since the step began
    layers, collectives = [], []
    handles = []
    for index, layer in enumerate(steps.net):
        handles.append(layer.register_full_backward_pre_hook(
            lambda m, g, i=index: layers.append({"layer": i, "start_ms": now(), "end_ms": None})))
        handles.append(layer.register_full_backward_hook(
            lambda m, gi, go, i=index: _close(layers, i, now())))

    def traced(fn):
        def call(*args, **kwargs):
            span = {"collective": len(collectives), "start_ms": now(), "end_ms": None}
            collectives.append(span)
            work = fn(*args, **kwargs)
            if not kwargs.get("async_op"):
                span["end_ms"] = now()  # a blocking call has completed when it returns
                return work
            try:
                work.get_future().add_done_callback(lambda _: span.__setitem__("end_ms", now()))
            except (AttributeError, RuntimeError, TypeError):
                pass  # launched inside a coalescing manager: only the group's handle completes; unknown here
            return work
        return call

    originals = [(owner, attr, getattr(owner, attr)) for owner, attr in points]
    steps.ctx.sync()
    dist.barrier(group=steps.ctx.group)
    origin[0] = time.perf_counter()
    for owner, attr, fn in originals:
        setattr(owner, attr, traced(fn))
    try:
        backward_end = steps.overlap_step(first_layer_input_grad=True)
        end = now()
    finally:
        for owner, attr, fn in originals:
            setattr(owner, attr, fn)
        for handle in handles:
            handle.remove()
    return {"layers": layers, "collectives": collectives, "backward_end_ms": (backward_end - origin[0]) * 1e3,
            "step_end_ms": end}


def _close(spans: list[dict], layer: int, at: float) -> None:
    for span in reversed(spans):
        if span["layer"] == layer and span["end_ms"] is None:
            span["end_ms"] = at
            return
