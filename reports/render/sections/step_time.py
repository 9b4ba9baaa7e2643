"""The step-time section: each implementation's step against plain torch DDP's, side by side."""

from __future__ import annotations

from ..table import cell, sampling_note, table


def markdown(records: list[dict]) -> str:
    rows = [{"impl": r["impl"], "step (ms)": cell(r, "impl_ms"), "torch DDP (ms)": cell(r, "torch_ddp_ms"),
             "ratio": cell(r, "ratio")} for r in records]
    model = records[0]["model"] if records else {}
    return table(rows) + (
        f"\n\n{model.get('depth')} x Linear({model.get('width')}, {model.get('width')}), batch "
        f"{model.get('batch')}, SGD. ratio = the implementation's step / plain torch DDP's, per round "
        "(median [95% interval]); goal for the reference: <= 1.05. Sampled: "
        + (sampling_note(records[0].get("sampling")) if records else ""))
