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

from dataclasses import dataclass
from typing import Iterable, NamedTuple


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


