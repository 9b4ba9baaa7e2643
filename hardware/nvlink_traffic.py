"""NVLink traffic: NVML's per-link TX/RX counters sampled before and after a run, and their delta.

The counters (KiB) come from ``nvmlDeviceGetFieldValues``; a counter that
cannot be read, or went backwards (a reset), gives None rather than a number.
"""

from __future__ import annotations

import time
from typing import Any

from .nvml import (ALL_LINKS_SCOPE, FIELD_VALUE_MEMBERS, is_unsupported, load_nvml, query, return_code_name, start_nvml,
                   stop_nvml, unsupported)


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


def read_counters(nvml: Any, handle: Any, scopes: list[int]) -> dict:
    """TX/RX data KiB for each scope (a link, or ALL_LINKS_SCOPE) in one nvmlDeviceGetFieldValues call."""
    tx, rx = nvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, nvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX
    ids = [(fid, scope) for scope in scopes for fid in (tx, rx)]
    values = query(nvml, "nvmlDeviceGetFieldValues", handle, ids, convert=list)
    if is_unsupported(values):
        return {"error": values["unsupported"]}
    counters: dict[str, dict] = {}
    for (fid, scope), value in zip(ids, values):
        key = "total" if scope == ALL_LINKS_SCOPE else str(scope)
        direction = "tx_kib" if fid == tx else "rx_kib"
        if value.nvmlReturn != 0:
            counters.setdefault(key, {})[direction] = unsupported(return_code_name(nvml, value.nvmlReturn))
        else:
            counters.setdefault(key, {})[direction] = int(field_number(value))
    return {"counters": counters}


def sample_device(nvml: Any, index: int) -> dict:
    """One GPU's NVLink data counters: the sum over links and each active link."""
    handle = query(nvml, "nvmlDeviceGetHandleByIndex", index, convert=lambda h: h)
    if is_unsupported(handle):
        return {"index": index, "error": handle["unsupported"]}
    record = {"index": index, "uuid": query(nvml, "nvmlDeviceGetUUID", handle)}
    record.update(read_counters(nvml, handle, [ALL_LINKS_SCOPE, *active_links(nvml, handle)]))
    return record


def nvlink_throughput_sample(nvml: Any = None) -> dict | None:
    """NVLink TX/RX data counters (KiB, cumulative) of every GPU; None without NVML.

    Take one before and one after a measurement and pass both to nvlink_throughput_delta.
    """
    nvml, _ = load_nvml(nvml)
    if nvml is None or start_nvml(nvml) is not None:
        return None
    try:
        count = query(nvml, "nvmlDeviceGetCount", convert=int)
        if is_unsupported(count):
            return {"time_s": time.monotonic(), "error": count["unsupported"], "devices": []}
        return {"time_s": time.monotonic(), "devices": [sample_device(nvml, i) for i in range(count)]}
    finally:
        stop_nvml(nvml)


def counter_delta(before: Any, after: Any) -> int | None:
    """KiB moved between two readings; None when either is missing or the counter went back (reset)."""
    if not isinstance(before, int) or not isinstance(after, int) or after < before:
        return None
    return after - before


def device_key(device: dict) -> Any:
    uuid = device.get("uuid")
    return uuid if isinstance(uuid, str) else device["index"]


def device_delta(before: dict, after: dict) -> dict:
    """Per-scope TX/RX KiB for one GPU, over the scopes both samples read."""
    old, new = before.get("counters", {}), after.get("counters", {})
    scopes = [s for s in new if s in old]
    return {
        "index": after["index"],
        "uuid": after.get("uuid"),
        "counters": {s: {d: counter_delta(old[s].get(d), new[s].get(d)) for d in ("tx_kib", "rx_kib")}
                     for s in scopes},
    }


def nvlink_throughput_delta(before: dict, after: dict) -> dict:
    """KiB sent/received over NVLink per GPU and link between two samples ('total' = all links)."""
    old = {device_key(d): d for d in before.get("devices", [])}
    devices = [device_delta(old[device_key(d)], d) for d in after.get("devices", []) if device_key(d) in old]
    return {"seconds": after["time_s"] - before["time_s"], "devices": devices}


# ---------------------------------------------------------------- markdown
