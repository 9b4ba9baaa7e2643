"""Each node of a run, described by its first rank while the benchmarks run on it.

Every node records what its figures depend on: host, torch build, NCCL
version and every ``NCCL_*`` setting, and, with NVIDIA GPUs, NVML's devices
(compute mode included), links, P2P and topology, the NVLink traffic of the
benchmarks, and telemetry sampled while they ran (SM clock, power,
temperature, utilization): a GPU that throttled or sat idle explains a figure;
and what made the host noisy (``noise``: load, governors and frequencies,
other processes' share of the CPUs).
The NVML module is a parameter (``nvml=None`` imports pynvml) so tests can
hand in a fake.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from typing import Any

from .noise import NoiseProbe
from .nvml import is_unsupported, load_nvml, query, start_nvml, stop_nvml
from .probe import collect_hardware
from .nvlink_traffic import nvlink_throughput_delta, nvlink_throughput_sample

TELEMETRY_INTERVAL_S = 1.0


def device_reading(nvml: Any, index: int) -> dict:
    """One sample of one GPU: SM clock (MHz), power (W), temperature (C), utilization (%)."""
    handle = query(nvml, "nvmlDeviceGetHandleByIndex", index, convert=lambda h: h)
    if is_unsupported(handle):
        return {}
    reading = {
        "sm_clock_mhz": query(nvml, "nvmlDeviceGetClockInfo", handle, nvml.NVML_CLOCK_SM),
        "power_w": query(nvml, "nvmlDeviceGetPowerUsage", handle, convert=lambda mw: mw / 1000.0),
        "temperature_c": query(nvml, "nvmlDeviceGetTemperature", handle, nvml.NVML_TEMPERATURE_GPU),
        "utilization_pct": query(nvml, "nvmlDeviceGetUtilizationRates", handle, convert=lambda u: u.gpu),
    }
    return {k: v for k, v in reading.items() if isinstance(v, (int, float))}


class Telemetry:
    """Samples every GPU every ``interval`` seconds on a thread, from ``start()`` to ``stop()``."""

    def __init__(self, nvml: Any = None, interval: float = TELEMETRY_INTERVAL_S) -> None:
        self.nvml, self.reason = load_nvml(nvml)
        self.interval = interval
        self.readings: list[list[dict]] = []  # per sample, per device
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "Telemetry":
        if self.nvml is not None:
            self.reason = start_nvml(self.nvml)
        if self.nvml is not None and self.reason is None:
            self._thread = threading.Thread(target=self._run, name="ddpc-telemetry", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        count = query(self.nvml, "nvmlDeviceGetCount", convert=int)
        devices = 0 if is_unsupported(count) else count
        while True:
            self.readings.append([device_reading(self.nvml, i) for i in range(devices)])
            if self._stop.wait(self.interval):
                return

    def stop(self) -> dict:
        """Per device and field: samples, min, median, max; or why nothing was sampled."""
        if self._thread is None:
            return {"available": False, "reason": self.reason or "no NVML"}
        self._stop.set()
        self._thread.join()
        stop_nvml(self.nvml)
        return {"available": True, "interval_s": self.interval, "devices": summarize(self.readings)}


def summarize(readings: list[list[dict]]) -> list[dict]:
    devices = max((len(r) for r in readings), default=0)
    out = []
    for index in range(devices):
        fields: dict[str, list[float]] = {}
        for sample in readings:
            for name, value in (sample[index] if index < len(sample) else {}).items():
                fields.setdefault(name, []).append(float(value))
        out.append({"index": index, **{name: {"n": len(v), "min": min(v), "median": statistics.median(v),
                                              "max": max(v)} for name, v in fields.items()}})
    return out


class NodeProbe:
    """Started by a node's first rank before the benchmarks, finished after them."""

    def __init__(self, ctx, nvml: Any = None) -> None:
        self.ctx, self.nvml = ctx, nvml
        self.nvlink_before = nvlink_throughput_sample(nvml)
        self.telemetry = Telemetry(nvml).start()
        self.noise = NoiseProbe().start()
        self.started = time.monotonic()

    def finish(self) -> dict:
        noise = self.noise.stop()
        telemetry = self.telemetry.stop()
        after = nvlink_throughput_sample(self.nvml)
        hardware = collect_hardware(self.nvml)
        return {
            "node_rank": int(os.environ.get("GROUP_RANK", 0)),
            "first_rank": self.ctx.rank,
            "local_ranks": int(os.environ.get("LOCAL_WORLD_SIZE", self.ctx.world_size)),
            "host": hardware["host"],
            "devices": [d["name"] for d in hardware["torch"]["devices"]],
            "nccl_version": hardware["torch"]["nccl_version"],
            "nccl_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")},
            "backend": self.ctx.backend,
            "hardware": hardware,
            "nvlink_delta": nvlink_throughput_delta(self.nvlink_before, after)
            if self.nvlink_before and after else None,
            "telemetry": telemetry,
            "noise": noise,
            "benchmark_seconds": time.monotonic() - self.started,
        }


def first_rank_of_node(ctx) -> bool:
    """Plain mode is one node whose first rank is 0; under torchrun, LOCAL_RANK says."""
    return int(os.environ.get("LOCAL_RANK", ctx.rank)) == 0
