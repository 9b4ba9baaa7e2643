"""Taking one overlapped step's timeline (``benchmarks.timeline`` defines it and says how each backend's is taken)."""

from __future__ import annotations

import time
from dataclasses import replace

import torch.distributed as dist

from compat.private_torch import cuda_spin_is_one_kernel

from ..timeline import HOST_COLLECTIVE_PREFIX, CollectiveSpan, Kernel, LayerSpan, Timeline, spans_from_kernels


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
