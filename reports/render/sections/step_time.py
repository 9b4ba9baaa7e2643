"""The step-time section: each implementation's step against plain torch DDP's, side by side."""

from __future__ import annotations

from typing import Sequence

from benchmarks.step_time import StepTimeRecord

from ..table import cell, sampling_note, table


def markdown(records: Sequence[StepTimeRecord]) -> str:
    rows = [{"impl": r.impl, "step (ms)": cell(r.impl_ms), "torch DDP (ms)": cell(r.torch_ddp_ms),
             "ratio": cell(r.ratio, r.refused)} for r in records]
    if not records:
        return table(rows)
    model = records[0].model
    return table(rows) + (
        f"\n\n{model.depth} x Linear({model.width}, {model.width}), batch {model.batch}, SGD. ratio = the "
        "implementation's step / plain torch DDP's, per round (median [95% interval]); goal for the reference: "
        "<= 1.05. Sampled: " + sampling_note(records[0].sampling))
