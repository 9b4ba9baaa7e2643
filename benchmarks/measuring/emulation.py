"""Emulated compute: a backward that takes a known time without competing with communication for the machine.

On CPU the layer's backward sleeps (the core is free for gloo's threads); on
CUDA it occupies the current stream with ``torch.cuda._sleep``, a kernel that
spins for a number of clock cycles and uses almost no SMs (read through
``compat.private_torch``, with its fallback), so NCCL's kernels
on their own stream can overlap it exactly as they would overlap real
compute. The cycles per second are measured once per device.
"""

from __future__ import annotations

import contextlib
import time
from typing import Iterator

import numpy as np
import torch

from compat.private_torch import cuda_spin
from hardware.noise import SleepOvershoot
from reference.config import DDPConfig

_CYCLES_PER_SECOND: dict[int, float] = {}
CALIBRATION_CYCLES = 50_000_000


def cuda_cycles_per_second(device: torch.device) -> float:
    """How many spin cycles make a second on ``device``, timed with CUDA events."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _CYCLES_PER_SECOND:
        with torch.cuda.device(index):
            cuda_spin()(CALIBRATION_CYCLES // 10)  # warm-up: first launch costs
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            cuda_spin()(CALIBRATION_CYCLES)
            end.record()
            end.synchronize()
            _CYCLES_PER_SECOND[index] = CALIBRATION_CYCLES / (start.elapsed_time(end) / 1e3)
    return _CYCLES_PER_SECOND[index]


def busy_for(seconds: float, device: torch.device) -> None:
    """Take ``seconds``: a spinning kernel on the current CUDA stream, or a sleep on CPU (timed, for
    ``watch_sleeps``: a loaded machine wakes a sleeper late)."""
    if device.type == "cuda":
        cuda_spin()(max(1, int(seconds * cuda_cycles_per_second(device))))
        return
    start = time.perf_counter()
    time.sleep(seconds)
    if _watchers and seconds > 0:
        _watchers[-1].append((time.perf_counter() - start) / seconds)


_watchers: list[list[float]] = []


@contextlib.contextmanager
def watch_sleeps() -> Iterator[list[float]]:
    """Every CPU sleep of ``busy_for`` while the block runs, as time slept over time asked."""
    slept: list[float] = []
    _watchers.append(slept)
    try:
        yield slept
    finally:
        _watchers.pop()


def sleep_overshoot(ratios: list[float]) -> SleepOvershoot | None:
    """How late the sleeps woke; None without sleeps."""
    if not ratios:
        return None
    median, p90 = np.quantile(ratios, [0.5, 0.9])
    return SleepOvershoot(n=len(ratios), median=round(float(median), 4), p90=round(float(p90), 4),
                          max=round(max(ratios), 4))


class BackwardWait(torch.autograd.Function):
    """Identity forward; a backward that takes ``seconds`` (``busy_for``), standing in for compute."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, seconds: float) -> torch.Tensor:
        ctx.seconds = seconds
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        busy_for(ctx.seconds, grad.device)
        return grad, None


class Layer(torch.nn.Module):
    """A bias-free Linear whose backward also takes ``wait_s`` of emulated compute (none when 0)."""

    def __init__(self, width: int, wait_s: float) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(width, width, bias=False)
        self.wait_s = wait_s

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.linear(x)
        return BackwardWait.apply(x, self.wait_s) if self.wait_s else x


def layer_stack(model, wait_s: float = 0.0, seed: int = 0) -> torch.nn.Sequential:
    """``model.depth`` layers of ``model.width`` (a ``benchmarks.settings.Model``), the same on every rank."""
    torch.manual_seed(seed)
    return torch.nn.Sequential(*[Layer(model.width, wait_s) for _ in range(model.depth)])


def step_config(model) -> DDPConfig:
    """What the step benchmarks wrap their layer stack with: overlapped reduction, a bucket a layer."""
    return DDPConfig(overlap_grad_reduce=True, bucket_size=model.bucket_elements)
