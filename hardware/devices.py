"""Every GPU NVML sees (all of them: NVML ignores CUDA_VISIBLE_DEVICES): clocks, power, PCIe, compute mode,
NVLinks, and each pair's P2P status and topology; marked with the torch index that drives each."""

from __future__ import annotations

import re
from typing import Any

from .nvml import field, is_unsupported, load_nvml, query, start_nvml, stop_nvml, text

# NVML_NVLINK_VERSION_* are enum values, not generations (NVML_NVLINK_VERSION_4_0 == 6).
# This table mirrors nvidia-ml-py 13's constants; constants found in the NVML module
# in use take precedence, so a newer module decodes newer links.
NVLINK_GENERATIONS = {1: "1.0", 2: "2.0", 3: "2.2", 4: "3.0", 5: "3.1", 6: "4.0", 7: "5.0", 8: "6.0"}

# NVML_TOPOLOGY_* (nvmlGpuTopologyLevel_t) -> the short names nvidia-smi topo uses, and what they mean.
TOPOLOGY_LEVELS = {
    0: ("INTERNAL", "same board"),
    10: ("PIX", "one PCIe switch"),
    20: ("PXB", "several PCIe switches, no host bridge"),
    30: ("PHB", "a PCIe host bridge"),
    40: ("NODE", "host bridges within one NUMA node"),
    50: ("SYS", "across NUMA nodes"),
}

# NVML_P2P_STATUS_* (nvmlGpuP2PStatus_t).
P2P_STATUSES = {
    0: "OK",
    1: "CHIPSET_NOT_SUPPORTED",
    2: "GPU_NOT_SUPPORTED",
    3: "IOH_TOPOLOGY_NOT_SUPPORTED",
    4: "DISABLED_BY_REGKEY",
    5: "NOT_SUPPORTED",
    6: "UNKNOWN",
}

# NVML_COMPUTEMODE_* (nvmlComputeMode_t): who may create a context on the GPU.
COMPUTE_MODES = {0: "DEFAULT", 1: "EXCLUSIVE_THREAD", 2: "PROHIBITED", 3: "EXCLUSIVE_PROCESS"}
# Modes in which a second process cannot use the GPU: one rank per GPU and nothing else may touch it.
RESTRICTED_COMPUTE_MODES = ("EXCLUSIVE_THREAD", "PROHIBITED", "EXCLUSIVE_PROCESS")


def milliwatts_to_watts(milliwatts: int) -> float:
    return milliwatts / 1000.0


def cuda_driver_version_string(version: int) -> str:
    """nvmlSystemGetCudaDriverVersion's 12040 -> '12.4'."""
    return f"{version // 1000}.{version % 1000 // 10}"


def bus_id(pci_info: Any) -> str:
    return text(pci_info.busId)


def nvlink_generations(nvml: Any) -> dict[int, str]:
    """Enum value -> generation, from the module's NVML_NVLINK_VERSION_X_Y constants over our table."""
    table = dict(NVLINK_GENERATIONS)
    for name in dir(nvml):
        match = re.fullmatch(r"NVML_NVLINK_VERSION_(\d+)_(\d+)", name)
        if match and isinstance(getattr(nvml, name), int):
            table[getattr(nvml, name)] = f"{match[1]}.{match[2]}"
    return table


def nvlink_generation(enum: int, generations: dict[int, str]) -> str:
    return generations.get(enum, f"unknown (enum {enum})")


def collect_link(nvml: Any, handle: Any, link: int, active: bool, generations: dict[int, str]) -> dict:
    """One NVLink: state, version (raw enum and decoded generation) and, when up, its far end."""
    record: dict[str, Any] = {"link": link, "active": active}
    if not active:
        return record
    version = query(nvml, "nvmlDeviceGetNvLinkVersion", handle, link)
    record["version_enum"] = version
    record["generation"] = field(version, lambda v: nvlink_generation(v, generations))
    record["remote_pci_bus_id"] = query(nvml, "nvmlDeviceGetNvLinkRemotePciInfo", handle, link,
                                        convert=bus_id)
    return record


def collect_nvlinks(nvml: Any, handle: Any) -> dict:
    """Every link 0..NVML_NVLINK_MAX_LINKS-1 that answers; those that do not, grouped by error."""
    generations = nvlink_generations(nvml)
    links, unanswered = [], {}
    for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        state = query(nvml, "nvmlDeviceGetNvLinkState", handle, link)
        if is_unsupported(state):
            unanswered.setdefault(state["unsupported"], []).append(link)
        else:
            links.append(collect_link(nvml, handle, link, bool(state), generations))
    return {"links": links, "unanswered": unanswered}


def collect_device(nvml: Any, index: int) -> dict:
    """One GPU, every field asked for separately so that one refusal costs one field."""
    handle = query(nvml, "nvmlDeviceGetHandleByIndex", index, convert=lambda h: h)
    if is_unsupported(handle):
        return {"index": index, "handle": handle}
    sm, mem = nvml.NVML_CLOCK_SM, nvml.NVML_CLOCK_MEM
    memory = query(nvml, "nvmlDeviceGetMemoryInfo", handle, convert=lambda m: m)
    return {
        "index": index,
        "name": query(nvml, "nvmlDeviceGetName", handle),
        "uuid": query(nvml, "nvmlDeviceGetUUID", handle),
        "pci_bus_id": query(nvml, "nvmlDeviceGetPciInfo", handle, convert=bus_id),
        "memory_total_bytes": field(memory, lambda m: int(m.total)),
        "memory_used_bytes": field(memory, lambda m: int(m.used)),
        "sm_clock_mhz": query(nvml, "nvmlDeviceGetClockInfo", handle, sm),
        "sm_clock_max_mhz": query(nvml, "nvmlDeviceGetMaxClockInfo", handle, sm),
        "memory_clock_mhz": query(nvml, "nvmlDeviceGetClockInfo", handle, mem),
        "memory_clock_max_mhz": query(nvml, "nvmlDeviceGetMaxClockInfo", handle, mem),
        "power_draw_w": query(nvml, "nvmlDeviceGetPowerUsage", handle, convert=milliwatts_to_watts),
        "power_limit_w": query(nvml, "nvmlDeviceGetEnforcedPowerLimit", handle, convert=milliwatts_to_watts),
        "temperature_c": query(nvml, "nvmlDeviceGetTemperature", handle, nvml.NVML_TEMPERATURE_GPU),
        "compute_mode": query(nvml, "nvmlDeviceGetComputeMode", handle,
                              convert=lambda m: COMPUTE_MODES.get(m, f"unknown ({m})")),
        "pcie_generation": query(nvml, "nvmlDeviceGetCurrPcieLinkGeneration", handle),
        "pcie_generation_max": query(nvml, "nvmlDeviceGetMaxPcieLinkGeneration", handle),
        "pcie_width": query(nvml, "nvmlDeviceGetCurrPcieLinkWidth", handle),
        "pcie_width_max": query(nvml, "nvmlDeviceGetMaxPcieLinkWidth", handle),
        "nvlink": collect_nvlinks(nvml, handle),
    }


def p2p_status(status: int) -> dict:
    return {"status": status, "name": P2P_STATUSES.get(status, f"unknown ({status})")}


def topology_level(level: int) -> dict:
    name, meaning = TOPOLOGY_LEVELS.get(level, (f"unknown ({level})", "not in our table"))
    return {"level": level, "name": name, "meaning": meaning}


def collect_pairs(nvml: Any, count: int) -> list[dict]:
    """NVLink P2P status and closest common PCIe ancestor for every ordered pair of GPUs."""
    handles = [query(nvml, "nvmlDeviceGetHandleByIndex", i, convert=lambda h: h) for i in range(count)]
    pairs = []
    for a in range(count):
        for b in range(count):
            if a == b:
                continue
            if is_unsupported(handles[a]) or is_unsupported(handles[b]):
                failed = handles[a] if is_unsupported(handles[a]) else handles[b]
                pairs.append({"a": a, "b": b, "p2p_nvlink": failed, "topology": failed})
                continue
            pairs.append({
                "a": a, "b": b,
                "p2p_nvlink": query(nvml, "nvmlDeviceGetP2PStatus", handles[a], handles[b],
                                    nvml.NVML_P2P_CAPS_INDEX_NVLINK, convert=p2p_status),
                "topology": query(nvml, "nvmlDeviceGetTopologyCommonAncestor", handles[a], handles[b],
                                  convert=topology_level),
            })
    return pairs


def collect_nvml(nvml: Any = None) -> dict:
    """The driver and every GPU NVML sees (all of them: NVML ignores CUDA_VISIBLE_DEVICES)."""
    nvml, reason = load_nvml(nvml)
    if nvml is None:
        return {"available": False, "reason": reason}
    reason = start_nvml(nvml)
    if reason is not None:
        return {"available": False, "reason": reason}
    try:
        count = query(nvml, "nvmlDeviceGetCount", convert=int)
        known = 0 if is_unsupported(count) else count
        return {
            "available": True,
            "driver_version": query(nvml, "nvmlSystemGetDriverVersion"),
            "cuda_driver_version": query(nvml, "nvmlSystemGetCudaDriverVersion",
                                         convert=cuda_driver_version_string),
            "nvml_version": query(nvml, "nvmlSystemGetNVMLVersion"),
            "device_count": count,
            "devices": [collect_device(nvml, i) for i in range(known)],
            "pairs": collect_pairs(nvml, known),
        }
    finally:
        stop_nvml(nvml)


def normalised_uuid(uuid: Any) -> str | None:
    """NVML says 'GPU-1a2b...'; torch's uuid prints without the prefix. Compare without it."""
    if not isinstance(uuid, str) or not uuid:
        return None
    return uuid.lower().removeprefix("gpu-")


def map_torch_devices(torch_info: dict, nvml_info: dict) -> None:
    """Mark each NVML device with the torch index that drives it (by UUID), when torch sees it."""
    by_uuid = {normalised_uuid(d.get("uuid")): d["index"] for d in torch_info.get("devices", [])}
    by_uuid.pop(None, None)
    for device in nvml_info.get("devices", []):
        device["torch_index"] = by_uuid.get(normalised_uuid(device.get("uuid")))
