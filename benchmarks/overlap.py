"""Overlap: how much gradient communication each implementation hides behind backward.

Every implementation with the ``ddp`` level is measured side by side in one
run, on the same model and data, in two modes:

- **emulated**: each layer's backward waits a fixed time without using a
  core (``BackwardWait``), so communication and "compute" do not compete for
  the CPU and the figure measures scheduling: does the implementation launch
  a bucket's collective as soon as its grads are in?
- **real**: the same layers with no wait: the matrix products' real backward.
  On a machine with few cores, compute and the collectives' threads compete,
  so this figure mostly measures that fight.

The model is ``depth`` bias-free Linear(width, width) layers, one bucket per
layer. Per implementation and round, three steps (forward, backward and the
gradient sync; no optimizer), their order rotating from round to round:

- compute: backward inside the implementation's ``no_sync``, no communication;
- overlap: backward and ``finish_grad_sync``, communication as scheduled;
- serial: backward inside ``no_sync``, then one all-reduce of a layer's
  gradient size per layer: the same bytes, none of them hidden.

``efficiency = (serial - overlap) / (serial - compute)`` per round (docs/rules.md,
section 5). The **ideal** for the same schedule: bucket k is ready when k
layers' backward is done (``c`` each: the compute step's backward over the
depth) and the collectives (``a`` each: the serial step's communication over
the depth) run one at a time; the last bucket's collective can never hide.
``share`` is the efficiency over the ideal. A **timeline** of one overlapped
emulated step per implementation records each layer's backward and each
collective, launch to completion (Holistic Trace Analysis style).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict
from pathlib import Path

import torch
import torch.distributed as dist

from reference.config import DDPConfig

from .registry import Benchmark, Metric, Record, absolute, cell, figure_of, figures_json
from .settings import Model
from .stats import Figure
from .timing import timed

VARIANTS = ("compute", "overlap", "serial")
MODES = ("emulated", "real")

RECORD = Record({
    "mode": "emulated (backward waits without using a core) or real (the layers' real backward)",
    "impl": "implementation",
    "model": "width, depth, batch and wait_ms per layer",
    "compute_ms": "figure: step with backward inside no_sync, no communication",
    "overlap_ms": "figure: step with the implementation's gradient sync",
    "serial_ms": "figure: step with one all-reduce per layer after backward",
    "efficiency": "figure: (serial - overlap) / (serial - compute), per round",
    "ideal": "efficiency of the ideal schedule for the measured per-layer compute and per-bucket collective",
    "share": "figure: efficiency over ideal, per round",
    "timeline": "one overlapped step: backward spans per layer and collective spans (launch to completion), "
                "ms from the step's start; null in real mode",
    "world_size": "ranks",
    "backend": "gloo or nccl",
})


class BackwardWait(torch.autograd.Function):
    """Identity forward; a backward that waits ``seconds`` without using a core, standing in for compute."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, seconds: float) -> torch.Tensor:
        ctx.seconds = seconds
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        time.sleep(ctx.seconds)
        return grad, None


class Layer(torch.nn.Module):
    def __init__(self, width: int, wait_s: float) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(width, width, bias=False)
        self.wait_s = wait_s

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.linear(x)
        return BackwardWait.apply(x, self.wait_s) if self.wait_s else x


def layer_stack(model: Model, seed: int = 0) -> torch.nn.Sequential:
    torch.manual_seed(seed)
    return torch.nn.Sequential(*[Layer(model.width, model.wait_ms / 1e3) for _ in range(model.depth)])


def ideal_efficiency(depth: int, layer_s: float, collective_s: float) -> float:
    """Efficiency of the best schedule: bucket k ready at k * layer_s, one collective at a time."""
    if depth < 1 or collective_s <= 0:
        return float("nan")
    end = 0.0
    for k in range(1, depth + 1):
        end = max(k * layer_s, end) + collective_s
    exposed = end - depth * layer_s
    return (depth * collective_s - exposed) / (depth * collective_s)


class Steps:
    """One implementation's three step variants over its own copy of the model."""

    def __init__(self, ctx, impl, model: Model) -> None:
        self.ctx, self.model = ctx, model
        self.net = layer_stack(model).to(ctx.device)
        config = DDPConfig(overlap_grad_reduce=True, bucket_size=model.bucket_elements)
        self.ddp = impl.wrap(self.net, config, ctx.group, ctx.control_group)
        self.impl = impl
        gen = torch.Generator().manual_seed(ctx.rank)
        self.x = torch.randn(model.batch, model.width, generator=gen).to(ctx.device)
        self.buckets = [torch.zeros(model.bucket_elements, device=ctx.device) for _ in range(model.depth)]
        self.backward_s = 0.0

    def run(self, variant: str) -> float:
        """Seconds for one step of ``variant`` (the slowest rank's); zeroing is not timed."""
        seconds = timed(self.ctx, getattr(self, f"_{variant}"))
        self.ddp.zero_grad_buffer()
        return seconds

    def _overlap(self) -> None:
        self._forward_backward()
        self.ddp.finish_grad_sync()

    def _compute(self) -> None:
        with self.ddp.no_sync():
            begin = time.perf_counter()
            self._forward_backward()
            self.backward_s = time.perf_counter() - begin

    def _serial(self) -> None:
        self._compute()
        for bucket in self.buckets:
            dist.all_reduce(bucket, group=self.ctx.group)

    def _forward_backward(self, x: torch.Tensor | None = None) -> None:
        self.ddp(self.x if x is None else x).square().mean().backward()


def measure(ctx, settings) -> list[dict]:
    from suites.impls import load_implementation

    impls = [load_implementation(spec) for spec in settings.impls]
    impls = [i for i in impls if i.unavailable is None and "ddp" in i.capabilities]
    records = []
    for mode in MODES:
        model = settings.emulated if mode == "emulated" else settings.real
        rounds = settings.emulated_rounds if mode == "emulated" else settings.rounds
        steps = {impl.name: Steps(ctx, timing_variant(impl), model) for impl in impls}
        times = {(name, v): [] for name in steps for v in VARIANTS}
        layer = {name: [] for name in steps}
        for i in range(settings.warmup + rounds):
            names = list(steps)[i % len(steps):] + list(steps)[: i % len(steps)]
            for name in names:
                variants = VARIANTS[i % 3:] + VARIANTS[: i % 3]
                for variant in variants:
                    t = steps[name].run(variant)
                    if i >= settings.warmup:
                        times[(name, variant)].append(t)
                if i >= settings.warmup:
                    layer[name].append(steps[name].backward_s / model.depth)
        for impl in impls:
            timeline = record_timeline(Steps(ctx, impl, model)) if mode == "emulated" else None
            records.append(_record(ctx, mode, impl.name, model, times, layer[impl.name], timeline))
    return records


def timing_variant(impl):
    """The implementation as timed: an adapter that pays for making its collectives visible (torch's
    Python comm hook) offers ``for_timing()`` without that cost; the timeline uses the visible one."""
    return impl.for_timing() if hasattr(impl, "for_timing") else impl


def _record(ctx, mode, name, model: Model, times, layer_s: list[float], timeline) -> dict:
    compute, overlap, serial = (times[(name, v)] for v in VARIANTS)
    # A round whose serial step was not slower than its compute step measured no communication to hide.
    efficiency = [(s - o) / (s - c) for c, o, s in zip(compute, overlap, serial) if s > c] or [math.nan]
    collective = [(s - c) / model.depth for c, s in zip(compute, serial)]
    ideal = ideal_efficiency(model.depth, Figure.of(layer_s, "s", "lower").median,
                             Figure.of(collective, "s", "lower").median)
    return {
        "mode": mode, "impl": name, "model": asdict(model),
        **figures_json(compute_ms=Figure.of([t * 1e3 for t in compute], "ms", "lower"),
                       overlap_ms=Figure.of([t * 1e3 for t in overlap], "ms", "lower"),
                       serial_ms=Figure.of([t * 1e3 for t in serial], "ms", "lower"),
                       efficiency=Figure.of(efficiency, "", "higher", "absolute"),
                       share=Figure.of([e / ideal for e in efficiency], "", "higher", "absolute")),
        "ideal": ideal, "timeline": timeline, "world_size": ctx.world_size, "backend": ctx.backend,
    }


def record_timeline(steps: Steps, warmup: int = 2) -> dict:
    """One overlapped step, after ``warmup`` ones (upstream dispatches its first step's collectives late,
    torch DDP rebuilds its buckets after it): each layer's backward span and each collective's
    launch-to-completion span."""
    from suites.multigpu.recording import patch_points

    for _ in range(warmup):
        steps.run("overlap")

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

    points = [(owner, attr, getattr(owner, attr)) for owner, attr in patch_points(steps.impl)]
    steps.ctx.sync()
    dist.barrier(group=steps.ctx.group)
    origin[0] = time.perf_counter()
    for owner, attr, fn in points:
        setattr(owner, attr, traced(fn))
    try:
        # An input that requires grad, so that the first layer's backward hook fires after its
        # backward rather than before it (a full backward hook waits for the grads of its inputs).
        steps._forward_backward(steps.x.detach().requires_grad_())
        backward_end = now()
        steps.ddp.finish_grad_sync()
        steps.ctx.sync()
        end = now()
    finally:
        for owner, attr, fn in points:
            setattr(owner, attr, fn)
        for handle in handles:
            handle.remove()
    steps.ddp.zero_grad_buffer()
    return {"layers": layers, "collectives": collectives, "backward_end_ms": backward_end, "step_end_ms": end}


def _close(spans: list[dict], layer: int, at: float) -> None:
    for span in reversed(spans):
        if span["layer"] == layer and span["end_ms"] is None:
            span["end_ms"] = at
            return


def metrics(records: list[dict]) -> list[Metric]:
    """The emulated efficiency is gated (it measures scheduling); the real one and the times are informative."""
    out = []
    for r in records:
        key = f"overlap/{r['mode']}/{r['impl']}"
        out.append(Metric(f"{key}/efficiency", "", "higher", r["mode"] == "emulated",
                          figure=figure_of(r, "efficiency")))
        for variant in VARIANTS:
            out.append(absolute(f"{key}/{variant}_ms", figure_of(r, f"{variant}_ms")))
    return out


def markdown(records: list[dict]) -> str:
    from reports.render import table

    parts = []
    for mode in MODES:
        rows = [{"impl": r["impl"], "compute (ms)": cell(r, "compute_ms"), "overlap (ms)": cell(r, "overlap_ms"),
                 "serial (ms)": cell(r, "serial_ms"), "efficiency": cell(r, "efficiency"),
                 "ideal": f"{r['ideal']:.3f}", "share of ideal": cell(r, "share")}
                for r in records if r["mode"] == mode]
        if rows:
            model = next(r["model"] for r in records if r["mode"] == mode)
            parts.append(f"### {mode.capitalize()} compute: {model['depth']} x Linear({model['width']}, "
                         f"{model['width']}), batch {model['batch']}"
                         + (f", {model['wait_ms']:g} ms backward wait per layer" if model["wait_ms"] else "")
                         + "\n\n" + table(rows))
    return "\n\n".join(parts) + (
        "\n\nMedian [95% interval] over rounds. efficiency = (serial - overlap) / (serial - compute) per "
        "round; the ideal hides every bucket's collective but the last's.")


def plots(records: list[dict], out: Path) -> list[Path]:
    from reports.plots import plot_overlap, plot_timeline

    written = [p for p in (plot_overlap(records, out),) if p is not None]
    written += [plot_timeline(r, out) for r in records if r.get("timeline")]
    return written


BENCHMARK = Benchmark(
    name="overlap",
    title="Overlap of gradient communication with backward",
    record=RECORD,
    run=measure,
    metrics=metrics,
    markdown=markdown,
    plots=plots,
)
