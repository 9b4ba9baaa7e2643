"""MXFP8 params gathered through the grad buffer (the reuse) against a param buffer of their own.

Two figures a run: the bytes of the buffers, measured from the tensors'
storages (each storage once; with the reuse the bf16 param view is the grad
buffer's memory and adds none), beside what the planner said (they must
agree); and the step time with the reuse over the step without it, side by
side in rotating rounds (a ratio with its interval, gated). Each with bf16
grads and with fp32 grads (``grad_reduce_in_fp32``: the param view is half
of the grad buffer), on a stack of linear layers whose weights are MXFP8.
Every implementation that maps both knobs is measured (the reference here).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

from datamodel import doc

from .measurable import Refusal
from .registry import Benchmark, Metric, absolute, gated
from .sampling import Sampled
from .stats import Figure


@dataclass(frozen=True)
class BufferBytes:
    """What the buffers of one configuration take."""

    measured: int = doc("bytes of the buffers' storages, each storage counted once")
    planned: int = doc("what the planner says they take (reference.layout BufferLayout.memory)")


@dataclass(frozen=True)
class QuantizedParamsRecord:
    """One implementation, one grad dtype: the buffers' bytes and the step, with the reuse and without."""

    impl: str = doc("implementation")
    grads: Literal["bf16", "fp32"] = doc("the grads' dtype: bf16, or fp32 (grad_reduce_in_fp32)")
    without: BufferBytes = doc("a bf16 param buffer of their own for the MXFP8 params' gather")
    reused: BufferBytes = doc("the gather through the grad buffer's memory")
    saved: float = doc("the share of the buffers' bytes the reuse saves, measured")
    plain_ms: Figure = doc("a step without the reuse")
    reuse_ms: Figure = doc("a step with the reuse, in the same rounds")
    ratio: Figure | None = doc("the step with the reuse over the step without, per round; null when refused")
    refused: Refusal | None = doc("why the ratio is not given, or null")
    sampling: Sampled = doc("rounds, warm-up, why sampling stopped, the ratio's target and whether it was met")
    width: int = doc("width of each bias-free Linear layer (its weight MXFP8)")
    depth: int = doc("layers")
    world_size: int = doc("ranks")


def metrics(records: Sequence[QuantizedParamsRecord]) -> dict[str, Metric]:
    out = {}
    for r in records:
        key = f"quantized_params/{r.impl}/{r.grads}-grads"
        out[f"{key}/buffer_bytes_reused"] = Metric.count(r.reused.measured, "B", "lower", True)
        out[f"{key}/buffer_bytes_without"] = Metric.count(r.without.measured, "B", "lower", False)
        if r.ratio is not None:
            out[f"{key}/step_ratio_reuse_to_without"] = gated(r.ratio, "ratio", r.sampling, r.grads)
        out[f"{key}/reuse_ms"] = absolute(r.reuse_ms)
    return out


BENCHMARK = Benchmark(
    name="quantized_params",
    title="MXFP8 params: the grad buffer reused for their gather",
    record=QuantizedParamsRecord,
    runner="benchmarks.measuring.quantized_params:measure",
    metrics=metrics,
)
