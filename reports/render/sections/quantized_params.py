"""The quantized-params section: the buffers' bytes with MXFP8's reuse of the grad buffer and without, measured and
planned, and the step time with it over the step without."""

from __future__ import annotations

from typing import Sequence

from benchmarks.quantized_params import QuantizedParamsRecord

from ..table import cell, sampling_note, table


def markdown(records: Sequence[QuantizedParamsRecord]) -> str:
    if not records:
        return "No implementation that maps fp8_param_gather and reuse_grad_buf_for_mxfp8_param_ag was measured."
    rows = [{"impl": r.impl, "grads": r.grads, "buffers without (B)": f"{r.without.measured:,}",
             "with the reuse (B)": f"{r.reused.measured:,}", "saved": f"{100 * r.saved:.1f}%",
             "as planned": "yes" if (r.without.measured, r.reused.measured) == (r.without.planned, r.reused.planned)
             else f"no: planned {r.without.planned:,} and {r.reused.planned:,}",
             "step ratio (reuse / without)": cell(r.ratio, r.refused)} for r in records]
    first = records[0]
    return table(rows, numparse=False) + (
        f"\n\n{first.depth} x Linear({first.width}, {first.width}) in bf16, every weight MXFP8, a distributed "
        "optimizer (padded), SGD. The bytes are the buffers' storages, each once; the ratio is the step with the "
        "reuse over the step without, per round (median [95% interval]). Sampled: " + sampling_note(first.sampling))
