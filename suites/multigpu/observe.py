"""Watching an implementation from outside, as it trains: its collectives and its params' grads becoming ready.

Every implementation under test is handed recording groups
(``ranks.recording``) in place of the groups under test, so what it
communicates is measured, whatever launches it (Python, torch's C++
reducer, a custom kernel that calls its process group). A step is observed
as a ``StepRecord``: the collectives of the step, when each param's grad was
accumulated (a post-accumulate-grad hook registered after the
implementation's own), when backward returned and when the sync did.

An implementation that reduces over some other group (one it made itself,
or the default group) cannot be observed: the checks that need to see its
communication skip with "cannot observe", they never fail it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
import torch

from ranks.recording import Collective, RecordingGroup
from suites.impls.protocol import DeclaresLayouts


@dataclass
class StepRecord:
    collectives: list[Collective] = field(default_factory=list)
    grads_ready: dict[str, float] = field(default_factory=dict)
    """param name -> ``time.perf_counter()`` when its grad was accumulated (the last time, over microbatches)."""
    backward_returned: float | None = None
    """``time.perf_counter()`` when backward returned, where the watcher marked it."""

    def reductions(self) -> list[Collective]:
        """The gradient reductions: all-reduce, reduce-scatter or reduce of floating-point data. A reduction of
        one element is bookkeeping (a flag, a token count), not gradients."""
        return [c for c in self.collectives
                if c.reduces and c.numel > 1 and c.inputs and c.inputs[0].dtype.startswith(("float", "bfloat"))]


def cannot_observe(impl) -> str:
    return (f"cannot observe: {impl.name} issued no gradient reduction through the process group it was handed; "
            "it reduces over another group (or outside torch.distributed), where the suite cannot see it")


def requires_observed(record: StepRecord, impl) -> list[Collective]:
    """The gradient reductions recorded; skips the check, with the reason, when there are none to see."""
    reductions = record.reductions()
    if not reductions:
        pytest.skip(cannot_observe(impl))
    return reductions


@contextlib.contextmanager
def watching(model: torch.nn.Module, recorders: list[RecordingGroup]) -> Iterator[StepRecord]:
    """Record, while the block runs, the collectives on ``recorders`` and when each of ``model``'s grads is ready."""
    for recorder in recorders:
        recorder.clear()
    record = StepRecord()
    handles = [param.register_post_accumulate_grad_hook(
        lambda p, n=name: record.grads_ready.__setitem__(n, time.perf_counter()))
        for name, param in model.named_parameters() if param.requires_grad]
    try:
        yield record
    finally:
        for handle in handles:
            handle.remove()
        record.collectives = sorted((c for r in recorders for c in r.collectives), key=lambda c: c.launched_s)


def observe_step(side, step: int, global_tokens: int) -> StepRecord:
    """One step of ``side`` (backward over its microbatches, then its sync), watched."""
    with watching(side.model, side.recorders) as record:
        local = side.backward(step, global_tokens)
        record.backward_returned = time.perf_counter()
        side.sync(local)
    return record


def local_grads(case, ctx, step: int = 0) -> dict[str, torch.Tensor]:
    """This rank's own gradients of a step (summed over its microbatches), from a plain copy of the model."""
    from .models import batch, loss_fn, make_model

    model = make_model(case.tied, case.dtype).to(ctx.device)
    for micro in range(case.microbatches):
        tokens, labels = (t.to(ctx.device) for t in batch(case.seed, step, micro, ctx.rank))
        loss_fn(model(tokens), labels).backward()
    return {name: param.grad for name, param in model.named_parameters()}


def declared_layouts(ddp):
    """The layout an implementation claims: its handle's ``declared_layouts`` (``DeclaresLayouts``), else its
    buffers' layouts; None when it claims none (its buffers only say where the suite reads grads from)."""
    if isinstance(ddp, DeclaresLayouts):
        return ddp.declared_layouts
    return [b.layout for b in ddp.buffers]


def flat_inputs(reductions: list[Collective]) -> list:
    """Every tensor the reductions reduced, in launch order (a coalesced launch's tensors in its own order)."""
    return [t for c in reductions for t in c.inputs]
