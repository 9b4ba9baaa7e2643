"""Measuring overlap (``benchmarks.overlap`` defines its records and the method)."""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from hardware.noise import SleepOvershoot
from ranks.recording import recording

from . import implementations_for
from ..measurable import NOT_MEASURABLE, Refusal, below_zero, costs_more, lone_rank, noise_bound, outside, shown
from ..overlap import MODES, VARIANTS, OverlapRecord, ideal_efficiency
from ..sampling import GATE_RULES, Sampled, sample
from ..settings import Model
from ..stats import Figure
from ..timeline import Timeline
from .emulation import layer_stack, sleep_overshoot, step_config, watch_sleeps
from .timeline import host_step, profiled_step
from .timing import timed

CALIBRATION_ROUNDS = 20
"""Rounds of ``depth`` all-reduces that size the emulated compute: enough that the size (and the efficiency with
it) does not move between runs of the same code (docs/measurements/benchmarks.md)."""


CALIBRATION_WARMUP = 3


def bucket_collective_s(ctx, model: Model) -> float:
    """One bucket's all-reduce, the slowest rank's median over a few rounds of ``depth`` calls."""
    bucket = torch.zeros(model.bucket_elements, device=ctx.device)
    op = lambda: dist.all_reduce(bucket, group=ctx.group)  # noqa: E731
    for _ in range(CALIBRATION_WARMUP):  # the first calls set up the transport
        timed(ctx, op)
    return Figure.of([timed(ctx, op, model.depth) for _ in range(CALIBRATION_ROUNDS)], "s", "lower").median


class Steps:
    """One implementation's three step variants over its own copy of the model."""

    def __init__(self, ctx, impl, model: Model, wait_s: float, group=None) -> None:
        """``group``: the group the implementation reduces over (default the group under test; the timeline
        hands it a recorder of that group)."""
        self.ctx, self.model = ctx, model
        self.net = layer_stack(model, wait_s).to(ctx.device)
        self.ddp = impl.wrap(self.net, step_config(model), group or ctx.group, ctx.control_group)
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

    def overlap_step(self, first_layer_input_grad: bool = False) -> float:
        """Backward and the implementation's sync; returns when (perf_counter) backward returned.

        ``first_layer_input_grad``: an input that requires grad, so that the first layer's full backward
        hook fires after its backward rather than before it (it waits for the grads of its inputs).
        """
        x = self.x.detach().requires_grad_() if first_layer_input_grad else self.x
        self._forward_backward(x)
        backward_end = time.perf_counter()
        self.ddp.finish_grad_sync()
        self.ctx.sync()
        return backward_end

    def _overlap(self) -> None:
        self._forward_backward()
        self.ddp.finish_grad_sync()

    def _compute(self) -> None:
        with self.ddp.no_sync():
            self.ctx.sync()
            begin = time.perf_counter()
            self._forward_backward()
            self.ctx.sync()  # queued device work is part of the backward
            self.backward_s = time.perf_counter() - begin

    def _serial(self) -> None:
        self._compute()
        for bucket in self.buckets:
            dist.all_reduce(bucket, group=self.ctx.group)

    def _forward_backward(self, x: torch.Tensor | None = None) -> None:
        self.ddp(self.x if x is None else x).square().mean().backward()


def measure(ctx, settings) -> list[OverlapRecord]:
    impls = implementations_for(settings.impls, step_config(settings.real), ctx)
    records = []
    for mode in MODES:
        model = settings.emulated if mode == "emulated" else settings.real
        collective_s = bucket_collective_s(ctx, model)
        wait_s = model.wait_ratio * collective_s
        steps = {impl.name: Steps(ctx, impl, model, wait_s) for impl in impls}
        times = {(name, v): [] for name in steps for v in VARIANTS}
        layer = {name: [] for name in steps}

        def one_round(i: int, keep: bool) -> float:
            total = 0.0
            for name in list(steps)[i % len(steps):] + list(steps)[: i % len(steps)]:
                for variant in VARIANTS[i % 3:] + VARIANTS[: i % 3]:
                    t = steps[name].run(variant)
                    total += t
                    if keep:
                        times[(name, variant)].append(t)
                if keep:
                    layer[name].append(steps[name].backward_s / model.depth)
            return total

        # At one rank there is nothing to hide (refused whatever the rounds): no calibration to aim for.
        calibrated = mode == "emulated" and ctx.world_size > 1

        def targets() -> dict:
            if not calibrated:
                return {}
            efficiencies = {name: efficiency_of(*(times[(name, v)] for v in VARIANTS), world_size=ctx.world_size)
                            for name in steps}
            return {name: (figure if refused is None else None, GATE_RULES["efficiency"].target)
                    for name, (figure, refused) in efficiencies.items()}

        with watch_sleeps() as sleeps:
            sampled = sample(ctx, settings.sampling("overlap", gated=calibrated), one_round, targets)
        overshoot = sleep_overshoot(sleeps) if mode == "emulated" and ctx.device.type == "cpu" else None
        for impl in impls:
            timeline = record_timeline(ctx, impl, model, wait_s) if mode == "emulated" else None
            records.append(_record(ctx, mode, impl.name, model, collective_s, wait_s, times, layer[impl.name],
                                   timeline, sampled, overshoot))
    return records


def communication_check(compute: list[float], serial: list[float], *, world_size: int
                        ) -> tuple[Figure, Refusal | None]:
    """The communication per round (serial - compute), and why there is none to hide or it cannot be told from
    noise, if so."""
    communication = Figure.of([s - c for c, s in zip(compute, serial)], "s", "lower")
    refused = lone_rank(world_size, "to hide") or noise_bound(communication.samples, "serial - compute", "s")
    if refused:
        return communication, refused
    noise = Figure.of(compute, "s", "lower")
    if noise.n > 1 and communication.median < noise.iqr:
        return communication, Refusal(NOT_MEASURABLE, f"serial - compute = {shown(communication.median, 's')}, below "
                                                      f"the compute step's own spread (IQR {shown(noise.iqr, 's')})",
                                      rule="serial - compute below the compute step's spread")
    return communication, None


def efficiency_of(compute: list[float], overlap: list[float], serial: list[float], *, world_size: int
                  ) -> tuple[Figure | None, Refusal | None]:
    """The efficiency over the rounds whose serial step was slower than compute, or None and why it is refused:
    no communication to hide, none kept, a value outside [0, 1], or an overlapped step faster than compute."""
    _, refused = communication_check(compute, serial, world_size=world_size)
    if refused:
        return None, refused
    kept = hidden_shares(compute, overlap, serial)
    if not kept:
        return None, Refusal(NOT_MEASURABLE, "no round's serial step was slower than its compute step",
                             rule="no round's serial step slower than compute")
    efficiency = Figure.of(kept, "", "higher", "absolute")
    refused = (below_zero(Figure.of([o - c for c, o in zip(compute, overlap)], "s", "lower"),
                          "the overlapped step minus the compute step", "overlap")
               or costs_more(Figure.of(overlap, "s", "lower"), Figure.of(serial, "s", "lower"))
               or outside(efficiency, 0.0, 1.0, "the efficiency", "overlap", below=BELOW, above=ABOVE))
    return (None, refused) if refused else (efficiency, None)


def hidden_shares(compute: list[float], overlap: list[float], serial: list[float]) -> list[float]:
    """Per round, the share of its communication that overlapping hid, over the rounds that had some."""
    return [(s - o) / (s - c) for c, o, s in zip(compute, overlap, serial) if s > c]


BELOW = ("the overlapped step was slower than the serial one, within noise: overlapping cost more than it hid, or "
         "the rounds could not tell")


ABOVE = "the overlapped step was faster than compute alone, which cannot happen"


def _record(ctx, mode: str, name: str, model: Model, collective_s: float, wait_s: float, times: dict,
            layer_s: list[float], timeline: Timeline | None, sampled: Sampled,
            overshoot: SleepOvershoot | None) -> OverlapRecord:
    compute, overlap, serial = (times[(name, v)] for v in VARIANTS)
    communication, _ = communication_check(compute, serial, world_size=ctx.world_size)
    efficiency, refused = efficiency_of(compute, overlap, serial, world_size=ctx.world_size)
    kept = hidden_shares(compute, overlap, serial)
    per_layer = [(s - c) / model.depth for c, s in zip(compute, serial)]
    ideal = ideal_efficiency(model.depth, Figure.of(layer_s, "s", "lower").median,
                             Figure.of(per_layer, "s", "lower").median)
    in_ms = lambda seconds: Figure.of([t * 1e3 for t in seconds], "ms", "lower")  # noqa: E731
    return OverlapRecord(
        mode=mode, impl=name, model=model, collective_ms=collective_s * 1e3, wait_ms=wait_s * 1e3,
        compute_ms=in_ms(compute), overlap_ms=in_ms(overlap), serial_ms=in_ms(serial),
        communication_ms=in_ms(communication.samples), refused=refused, dropped_rounds=len(compute) - len(kept),
        efficiency=efficiency, ideal=ideal,
        share=Figure.of([e / ideal for e in kept], "", "higher", "absolute") if efficiency else None,
        sampling=sampled, sleep_overshoot=overshoot, timeline=timeline, world_size=ctx.world_size,
        backend=ctx.backend)


def record_timeline(ctx, impl, model: Model, wait_s: float, warmup: int = 2) -> Timeline | None:
    """One overlapped step, after ``warmup`` ones (upstream dispatches its first step's collectives late,
    torch DDP rebuilds its buckets after it): each layer's backward span and each collective's span. The
    implementation reduces over a recorder of the group under test (on CPU its record gives the spans)."""
    recorder = recording(ctx.group)
    steps = Steps(ctx, impl, model, wait_s, recorder)
    for _ in range(warmup):
        steps.run("overlap")
    spans = profiled_step(steps) if ctx.device.type == "cuda" else host_step(steps, recorder)
    steps.ddp.zero_grad_buffer()
    return spans
