"""Overlap: how much gradient communication each implementation hides behind backward.

Every implementation with the ``ddp`` level is measured side by side in one
run, on the same model and data, in two modes:

- **emulated**: each layer's backward also takes a fixed time that competes
  with nothing (``benchmarks.measuring.emulation``: a sleep on CPU, a spinning kernel
  on the CUDA stream), so the figure measures scheduling: does the
  implementation launch a bucket's collective as soon as its grads are in?
  That time is one bucket's collective, measured at the start (the slowest
  rank's median), so communication is the same share of the step on gloo,
  PCIe or NVLink.
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
section 5). A round whose serial step was not slower than its compute step
measured no communication to hide; such rounds are dropped and counted.
When there is no communication to hide, the efficiency is **not measurable
here** and no figure is given: at one rank (nothing is communicated; a
collective over one rank is a local copy at most), or when the
communication itself (serial - compute) cannot be told from noise
(``benchmarks.measurable.noise_bound``, or below the compute step's own
interquartile range). An efficiency outside [0, 1], or an overlapped step
below the compute step beyond noise, is a **measurement failure**: refused,
with what to try. The emulated efficiency is gated, and its rounds are
calibrated to its target (``benchmarks.sampling``); the real mode, which is
informative, runs a fixed count. The **ideal** for the same schedule: bucket k is ready when k
layers' backward is done (``c`` each: the compute step's backward over the
depth) and the collectives (``a`` each: the serial step's communication over
the depth) run one at a time; the last bucket's collective can never hide.
``share`` is the efficiency over the ideal. A **timeline** of one overlapped
emulated step per implementation records each layer's backward and each
collective, launch to completion (``benchmarks.timeline``; on CUDA the
device's own kernel spans).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

from datamodel import doc
from hardware.node import Backend
from hardware.noise import SleepOvershoot

from .measurable import Refusal
from .registry import Benchmark, Metric, absolute, gated, informative
from .sampling import Sampled
from .settings import Model
from .stats import Figure
from .timeline import Timeline

VARIANTS = ("compute", "overlap", "serial")
MODES = ("emulated", "real")

@dataclass(frozen=True)
class OverlapRecord:
    """One implementation in one mode: its three steps side by side, and how much communication it hid."""

    mode: Literal["emulated", "real"] = doc("emulated (backward takes extra time that competes with nothing) or real (the layers' own "
                    "backward)")
    impl: str = doc("implementation")
    model: Model = doc("width, depth, batch and wait_ratio")
    collective_ms: float = doc("one bucket's all-reduce, measured before the rounds (the slowest rank's median)")
    wait_ms: float = doc("emulated compute per layer's backward (wait_ratio x collective_ms); 0 in real mode")
    compute_ms: Figure = doc("step with backward inside no_sync, no communication")
    overlap_ms: Figure = doc("step with the implementation's gradient sync")
    serial_ms: Figure = doc("step with one all-reduce per layer after backward")
    communication_ms: Figure = doc("serial - compute per round: the communication there is to hide")
    refused: Refusal | None = doc("why the efficiency is not given (kind: not measurable here, measurement failure, "
                                  "or finding; why; remedy), or null (benchmarks/measurable.py)")
    dropped_rounds: int = doc("rounds left out of the efficiency because serial was not slower than compute")
    efficiency: Figure | None = doc("(serial - overlap) / (serial - compute), per kept round; null when refused")
    ideal: float = doc("efficiency of the ideal schedule for the measured per-layer compute and per-bucket "
                       "collective")
    share: Figure | None = doc("efficiency over ideal, per kept round; null when refused")
    sampling: Sampled = doc("rounds, warm-up, why sampling stopped, each gated figure's target and whether it was met "
                            "(benchmarks/sampling.py)")
    sleep_overshoot: SleepOvershoot | None = doc("the emulated compute's sleeps on CPU, time slept over time asked; "
                                                 "null on CUDA and in real mode")
    timeline: Timeline | None = doc("one overlapped step: backward spans per layer and collective spans (launch to "
                                    "completion), ms from the step's start; null in real mode")
    world_size: int = doc("ranks")
    backend: Backend = doc("gloo or nccl")


def ideal_efficiency(depth: int, layer_s: float, collective_s: float) -> float:
    """Efficiency of the best schedule: bucket k ready at k * layer_s, one collective at a time."""
    if depth < 1 or collective_s <= 0:
        return float("nan")
    end = 0.0
    for k in range(1, depth + 1):
        end = max(k * layer_s, end) + collective_s
    exposed = end - depth * layer_s
    return (depth * collective_s - exposed) / (depth * collective_s)


def metrics(records: Sequence[OverlapRecord]) -> dict[str, Metric]:
    """The emulated efficiency is gated (it measures scheduling); the real one and the times are informative.
    A figure that is not measurable here gives no metric: nothing to compare."""
    out = {}
    for r in records:
        key = f"overlap/{r.mode}/{r.impl}"
        if r.efficiency is not None and r.mode == "emulated":
            out[f"{key}/efficiency"] = gated(r.efficiency, "efficiency", r.sampling, r.impl)
        elif r.efficiency is not None:
            out[f"{key}/efficiency"] = informative(r.efficiency)
        for variant in VARIANTS:
            out[f"{key}/{variant}_ms"] = absolute(getattr(r, f"{variant}_ms"))
    return out


BENCHMARK = Benchmark(
    name="overlap",
    title="Overlap of gradient communication with backward",
    record=OverlapRecord,
    runner="benchmarks.measuring.overlap:measure",
    metrics=metrics,
)
