"""A timeline of one overlapped step, Holistic Trace Analysis style: each layer's backward and each collective.

Spans are milliseconds from the step's start. How they are taken depends on
where the work runs:

- **gloo** (CPU): a layer's span runs from its backward pre-hook to its
  backward hook; a collective's from its launch to the completion of its
  work's future, which gloo completes when the data has arrived, as the
  recording group the implementation reduces over saw them (a reduce-scatter
  has no future on gloo: its end is unknown, null).
- **CUDA**: host-side times of the layers say nothing, since their work is
  queued on a stream. The step runs under the profiler, and a layer's span
  is its emulated-compute kernel's on the device (``torch.cuda._sleep``'s
  ``spin_kernel``, one per layer, in backward order). A collective's span
  is its NCCL kernel's under NCCL (whose work futures complete at enqueue);
  under gloo over CUDA tensors, where no kernel reduces, it is gloo's own
  profiler event (``gloo:all_reduce`` and the like), from launch to
  completion, on the profiler's one clock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Iterable, NamedTuple

import torch.distributed as dist

from compat.private_torch import cuda_spin_is_one_kernel
from datamodel import doc

COMPUTE_KERNEL = "spin_kernel"  # what torch.cuda._sleep launches
COLLECTIVE_KERNEL_PREFIX = "nccl"
HOST_COLLECTIVE_PREFIX = "gloo:"  # gloo's profiler events, one per collective, launch to completion


@dataclass(frozen=True)
class LayerSpan:
    layer: int = doc("the layer's index in the model (backward runs the last first)")
    start_ms: float = doc("when its backward began, ms from the step's start")
    end_ms: float | None = doc("when its backward ended; null when no hook saw it end")


@dataclass(frozen=True)
class CollectiveSpan:
    collective: int = doc("the collective's place in launch order")
    start_ms: float = doc("launch, ms from the step's start")
    end_ms: float | None = doc("completion; null where the backend gives no completion (gloo's reduce-scatter)")
    kind: str | None = doc("all_reduce, reduce_scatter, ... where the recording group saw it; null from kernels",
                           None)


@dataclass(frozen=True)
class Timeline:
    """One overlapped step: each layer's backward and each collective, launch to completion."""

    layers: tuple[LayerSpan, ...] = doc("each layer's backward span")
    collectives: tuple[CollectiveSpan, ...] = doc("each collective's span")
    backward_end_ms: float = doc("when backward returned (on CUDA: the last compute kernel's end)")
    step_end_ms: float = doc("when the step, gradient sync included, was done")


class Kernel(NamedTuple):
    name: str
    start_us: float
    end_us: float


def spans_from_kernels(kernels: Iterable[Kernel], depth: int) -> Timeline:
    """Layer and collective spans from the profiled events of one step.

    The ``depth`` emulated-compute kernels run in backward order, the last
    layer first; every NCCL kernel, or gloo event, is one collective. Times
    become ms from the first event's start.
    """
    kernels = sorted(kernels, key=lambda k: k.start_us)
    if not kernels:
        return Timeline((), (), 0.0, 0.0)
    origin = kernels[0].start_us
    ms = lambda us: (us - origin) / 1e3  # noqa: E731
    compute = [k for k in kernels if COMPUTE_KERNEL in k.name]
    if len(compute) != depth:
        raise ValueError(f"compute kernels: got {len(compute)} {COMPUTE_KERNEL} launches in the profiled step, "
                         f"but should be one per layer ({depth})")
    layers = tuple(LayerSpan(depth - 1 - i, ms(k.start_us), ms(k.end_us)) for i, k in enumerate(compute))
    collectives = tuple(CollectiveSpan(i, ms(k.start_us), ms(k.end_us))
                        for i, k in enumerate(k for k in kernels if k.name.lower().startswith(COLLECTIVE_KERNEL_PREFIX)
                                              or k.name.startswith(HOST_COLLECTIVE_PREFIX)))
    return Timeline(layers, collectives, max(span.end_ms for span in layers), max(ms(k.end_us) for k in kernels))


def profiled_step(steps) -> Timeline | None:
    """One overlapped step under the CUDA profiler: spans from the device's kernels (and gloo's events); None
    where the emulated compute is not one kernel per layer (``compat.private_torch.cuda_spin``'s fallback)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    if not cuda_spin_is_one_kernel():
        return None
    steps.ctx.sync()
    dist.barrier(group=steps.ctx.group)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        steps.overlap_step()
        steps.ctx.sync()
    kernels = [Kernel(e.name, e.time_range.start, e.time_range.end) for e in prof.events()
               if e.device_type == DeviceType.CUDA or e.name.startswith(HOST_COLLECTIVE_PREFIX)]
    return spans_from_kernels(kernels, len(steps.net))


def host_step(steps, recorder) -> Timeline:
    """One overlapped step on CPU: backward hooks time the layers; ``recorder`` (the recording group the
    implementation reduces over) times the collectives."""
    origin = [0.0]  # set when the step begins
    ms = lambda t: (t - origin[0]) * 1e3  # noqa: E731 - a perf_counter time as ms since the step began
    now = lambda: ms(time.perf_counter())  # noqa: E731
    layers = []
    handles = []
    for index, layer in enumerate(steps.net):
        handles.append(layer.register_full_backward_pre_hook(
            lambda m, g, i=index: layers.append(LayerSpan(i, now(), None))))
        handles.append(layer.register_full_backward_hook(
            lambda m, gi, go, i=index: _close(layers, i, now())))
    steps.ctx.sync()
    dist.barrier(group=steps.ctx.group)
    recorder.clear()
    origin[0] = time.perf_counter()
    try:
        backward_end = steps.overlap_step(first_layer_input_grad=True)
        end = now()
    finally:
        for handle in handles:
            handle.remove()
    collectives = tuple(CollectiveSpan(i, ms(c.launched_s), None if c.completed_s is None else ms(c.completed_s),
                                       c.kind)
                        for i, c in enumerate(c for c in recorder.collectives if c.reduces))
    return Timeline(tuple(layers), collectives, ms(backward_end), end)


def _close(spans: list[LayerSpan], layer: int, at: float) -> None:
    for i in reversed(range(len(spans))):
        if spans[i].layer == layer and spans[i].end_ms is None:
            spans[i] = replace(spans[i], end_ms=at)
            return
