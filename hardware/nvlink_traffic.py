"""NVLink traffic: NVML's per-link TX/RX counters sampled before and after a run, and their delta.

The counters (KiB) come from ``nvmlDeviceGetFieldValues``; a counter that
cannot be read, or went backwards (a reset), gives None rather than a number.
The samples stay in memory; the delta is what a run records.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from datamodel import JsonModel, doc
from .nvml import (ALL_LINKS_SCOPE, FIELD_VALUE_MEMBERS, Unsupported, is_unsupported, load_nvml, query,
                   return_code_name, start_nvml, stop_nvml)

TOTAL = "total"
"""The scope of NVML's sum over all links; a link's scope is its number."""


@dataclass(frozen=True)
class LinkCounters:
    """One scope's cumulative data counters (KiB), or why NVML would not read one."""

    tx_kib: int | Unsupported
    rx_kib: int | Unsupported


@dataclass(frozen=True)
class DeviceCounters:
    """One GPU's counters by scope ('total', then each active link), or why they could not be read."""

    index: int
    uuid: str | Unsupported | None
    counters: dict[str, LinkCounters] = field(default_factory=dict)
    error: str | None = None

    def key(self) -> Any:
        """The same GPU in two samples: its UUID, or its index where NVML gave none."""
        return self.uuid if isinstance(self.uuid, str) else self.index


@dataclass(frozen=True)
class CounterSample:
    """Every GPU's NVLink data counters at one moment."""

    time_s: float
    devices: tuple[DeviceCounters, ...]
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class LinkTraffic(JsonModel):
    """KiB one scope moved between the samples."""

    tx_kib: int | None = doc("KiB sent; null when a sample could not read the counter or it was reset")
    rx_kib: int | None = doc("KiB received; null likewise")


@dataclass(frozen=True, kw_only=True)
class DeviceTraffic(JsonModel):
    """One GPU's NVLink traffic during the benchmarks."""

    index: int = doc("NVML's index")
    uuid: str | Unsupported | None = doc("the GPU's UUID; null when NVML gave no handle")
    counters: dict[str, LinkTraffic] = doc("by scope: 'total' (NVML's sum over all links), then each "
                                                  "active link by number; only scopes both samples read")


@dataclass(frozen=True, kw_only=True)
class NvlinkDelta(JsonModel):
    """NVLink TX/RX KiB per GPU and link while the benchmarks ran."""

    seconds: float = doc("time between the two samples")
    devices: tuple[DeviceTraffic, ...] = doc("every GPU both samples read")


def field_number(value: Any) -> int | float:
    """The number in an nvmlFieldValue_t, read from the union member its valueType names."""
    member = FIELD_VALUE_MEMBERS.get(value.valueType)
    if member is None:
        raise ValueError(f"field value type: got {value.valueType}, but should be one of "
                         f"{sorted(FIELD_VALUE_MEMBERS)}")
    return getattr(value.value, member)


def active_links(nvml: Any, handle: Any) -> list[int]:
    """Links that are up: the only ones whose counters can move."""
    links = []
    for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        if query(nvml, "nvmlDeviceGetNvLinkState", handle, link) == 1:
            links.append(link)
    return links


def read_counters(nvml: Any, handle: Any, scopes: list[int]) -> dict[str, LinkCounters] | Unsupported:
    """TX/RX data KiB for each scope (a link, or ALL_LINKS_SCOPE) in one nvmlDeviceGetFieldValues call."""
    tx, rx = nvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, nvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX
    ids = [(fid, scope) for scope in scopes for fid in (tx, rx)]
    values = query(nvml, "nvmlDeviceGetFieldValues", handle, ids, convert=list)
    if is_unsupported(values):
        return values
    read = [Unsupported(return_code_name(nvml, v.nvmlReturn)) if v.nvmlReturn != 0 else int(field_number(v))
            for v in values]
    return {TOTAL if scope == ALL_LINKS_SCOPE else str(scope):
            LinkCounters(tx_kib=read[2 * i], rx_kib=read[2 * i + 1]) for i, scope in enumerate(scopes)}


def sample_device(nvml: Any, index: int) -> DeviceCounters:
    """One GPU's NVLink data counters: the sum over links and each active link."""
    handle = query(nvml, "nvmlDeviceGetHandleByIndex", index, convert=lambda h: h)
    if is_unsupported(handle):
        return DeviceCounters(index=index, uuid=None, error=handle.error)
    uuid = query(nvml, "nvmlDeviceGetUUID", handle)
    counters = read_counters(nvml, handle, [ALL_LINKS_SCOPE, *active_links(nvml, handle)])
    if is_unsupported(counters):
        return DeviceCounters(index=index, uuid=uuid, error=counters.error)
    return DeviceCounters(index=index, uuid=uuid, counters=counters)


def nvlink_throughput_sample(nvml: Any = None) -> CounterSample | None:
    """NVLink TX/RX data counters (KiB, cumulative) of every GPU; None without NVML.

    Take one before and one after a measurement and pass both to nvlink_throughput_delta.
    """
    nvml, _ = load_nvml(nvml)
    if nvml is None or start_nvml(nvml) is not None:
        return None
    try:
        count = query(nvml, "nvmlDeviceGetCount", convert=int)
        if is_unsupported(count):
            return CounterSample(time_s=time.monotonic(), devices=(), error=count.error)
        devices = tuple(sample_device(nvml, i) for i in range(count))
        return CounterSample(time_s=time.monotonic(), devices=devices)
    finally:
        stop_nvml(nvml)


def counter_delta(before: Any, after: Any) -> int | None:
    """KiB moved between two readings; None when either is missing or the counter went back (reset)."""
    if not isinstance(before, int) or not isinstance(after, int) or after < before:
        return None
    return after - before


def device_delta(before: DeviceCounters, after: DeviceCounters) -> DeviceTraffic:
    """Per-scope TX/RX KiB for one GPU, over the scopes both samples read."""
    old, new = before.counters, after.counters
    return DeviceTraffic(index=after.index, uuid=after.uuid, counters={
        scope: LinkTraffic(tx_kib=counter_delta(old[scope].tx_kib, new[scope].tx_kib),
                           rx_kib=counter_delta(old[scope].rx_kib, new[scope].rx_kib))
        for scope in new if scope in old})


def nvlink_throughput_delta(before: CounterSample, after: CounterSample) -> NvlinkDelta:
    """KiB sent/received over NVLink per GPU and link between two samples ('total' = all links)."""
    old = {d.key(): d for d in before.devices}
    return NvlinkDelta(seconds=after.time_s - before.time_s,
                       devices=tuple(device_delta(old[d.key()], d) for d in after.devices if d.key() in old))
