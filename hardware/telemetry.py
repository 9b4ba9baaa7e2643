"""GPU telemetry while the benchmarks run: every GPU's SM clock, power, temperature and utilization, sampled
on a thread and summarized per device and field (a GPU that throttled or sat idle explains a figure)."""

from __future__ import annotations

import statistics
import threading
from dataclasses import dataclass
from typing import Any, Literal

from datamodel import JsonModel, doc
from .nvml import is_unsupported, load_nvml, query, start_nvml, stop_nvml

TELEMETRY_INTERVAL_S = 1.0


@dataclass(frozen=True, kw_only=True)
class FieldSummary(JsonModel):
    """One field of one GPU over the samples."""

    n: int = doc("samples that read the field")
    min: float = doc("lowest sample")
    median: float = doc("median sample")
    max: float = doc("highest sample")


@dataclass(frozen=True, kw_only=True)
class DeviceTelemetry(JsonModel):
    """One GPU's fields over the benchmarks; a field NVML refused is absent, the rest sampled."""

    index: int = doc("NVML's index")
    sm_clock_mhz: FieldSummary | None = doc("SM clock, MHz", omit_none=True)
    power_w: FieldSummary | None = doc("power drawn, W", omit_none=True)
    temperature_c: FieldSummary | None = doc("GPU temperature, C", omit_none=True)
    utilization_pct: FieldSummary | None = doc("share of time a kernel ran, %", omit_none=True)


@dataclass(frozen=True, kw_only=True)
class Telemetry(JsonModel):
    """Every GPU sampled while the benchmarks ran."""

    available: Literal[True] = doc("NVML was sampled", default=True)
    interval_s: float = doc("seconds between samples")
    devices: tuple[DeviceTelemetry, ...] = doc("per GPU, by NVML index: min / median / max of each "
                                                      "field")


@dataclass(frozen=True, kw_only=True)
class NoTelemetry(JsonModel):
    """Nothing was sampled, and why (no NVML, or it did not start)."""

    available: Literal[False] = doc("nothing was sampled", default=False)
    reason: str = doc("why not")


def device_reading(nvml: Any, index: int) -> dict[str, int | float]:
    """One sample of one GPU by DeviceTelemetry's field names: the fields NVML gave."""
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


class TelemetrySampler:
    """Samples every GPU every ``interval`` seconds on a thread, from ``start()`` to ``stop()``."""

    def __init__(self, nvml: Any = None, interval: float = TELEMETRY_INTERVAL_S) -> None:
        self.nvml, self.reason = load_nvml(nvml)
        self.interval = interval
        self.readings: list[list[dict[str, int | float]]] = []  # per sample, per device
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "TelemetrySampler":
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

    def stop(self) -> Telemetry | NoTelemetry:
        """Per device and field: samples, min, median, max; or why nothing was sampled."""
        if self._thread is None:
            return NoTelemetry(reason=self.reason or "no NVML")
        self._stop.set()
        self._thread.join()
        stop_nvml(self.nvml)
        return Telemetry(interval_s=self.interval, devices=summarize(self.readings))


def summarize(readings: list[list[dict[str, int | float]]]) -> tuple[DeviceTelemetry, ...]:
    devices = max((len(r) for r in readings), default=0)
    out = []
    for index in range(devices):
        fields: dict[str, list[float]] = {}
        for sample in readings:
            for name, value in (sample[index] if index < len(sample) else {}).items():
                fields.setdefault(name, []).append(float(value))
        out.append(DeviceTelemetry(index=index, **{
            name: FieldSummary(n=len(v), min=min(v), median=statistics.median(v), max=max(v))
            for name, v in fields.items()}))
    return tuple(out)
