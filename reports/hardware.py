"""What the numbers in a report were measured on: host, torch build, and GPUs as NVML sees them.

Bandwidth and step-time figures mean little without the machine beside them, so
every run records ``collect_hardware()`` in ``results.json`` and renders
``hardware_markdown()`` in ``report.md``. NVML (``pynvml``, from nvidia-ml-py)
is queried one field at a time: a field the driver, the GPU or our permissions
do not allow is recorded as ``{"unsupported": "<error name>"}`` and the rest
is still collected. Without an NVIDIA driver the ``nvml`` section says so
plainly instead of failing.

The NVML module is a parameter everywhere (``nvml=None`` imports ``pynvml``),
so tests can hand in a fake.

``python -m reports.hardware`` prints the markdown; ``--json`` prints the dict.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from tabulate import tabulate

GIB = 1024**3

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

# nvmlValueType_t -> the member of nvmlValue_t holding the number.
FIELD_VALUE_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}

# scopeId asking nvmlDeviceGetFieldValues for the sum over all NVLinks (UINT_MAX).
ALL_LINKS_SCOPE = 0xFFFFFFFF

# Why nvmlInit failed, in plain words, by NVML error name.
INIT_FAILURES = {
    "LibraryNotFound": "NVML library not found: no NVIDIA driver on this machine",
    "DriverNotLoaded": "NVIDIA driver not loaded: no usable NVIDIA GPU on this machine",
    "NoPermission": "no permission to use NVML",
    "LibRmVersionMismatch": "NVML library and kernel driver versions differ (reboot or reinstall the driver)",
}


# ---------------------------------------------------------------- host


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's marketing name, so runs on different hosts are told apart."""
    try:
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def total_memory_bytes(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """Physical memory in bytes (MemTotal), falling back to sysconf where /proc is missing."""
    try:
        for line in meminfo.read_text().splitlines():
            fields = line.split()
            if fields[:1] == ["MemTotal:"] and fields[2:3] == ["kB"]:
                return int(fields[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def usable_cores() -> int | None:
    """Cores this process may run on (a container or taskset may allow fewer than the host has)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return None


def collect_host() -> dict:
    """CPU, memory, OS and Python: what every figure in the report depends on."""
    return {
        "cpu_model": cpu_model(),
        "logical_cores": os.cpu_count(),
        "usable_cores": usable_cores(),
        "memory_bytes": total_memory_bytes(),
        "os": platform.platform(),
        "hostname": platform.node(),
        "machine": platform.machine(),
        "python": platform.python_version(),
    }


# ---------------------------------------------------------------- torch


def nccl_version_string(version: Any) -> str:
    """torch.cuda.nccl.version() gives (2, 21, 5) or (2, 21, 5, 'suffix'); older torch an int 22105."""
    if isinstance(version, int):  # NCCL_VERSION_CODE: major*10000 + minor*100 + patch (major*1000 before 2.9)
        major, rest = divmod(version, 10000 if version >= 10000 else 1000)
        return f"{major}.{rest // 100}.{rest % 100}"
    parts = [str(p) for p in version]
    suffix = f"-{parts[3]}" if len(parts) > 3 and parts[3] else ""
    return ".".join(parts[:3]) + suffix


def nccl_version(torch: Any) -> str | None:
    """NCCL's version as torch was built with it; only asked when CUDA works (it needs the library)."""
    if not torch.cuda.is_available() or not torch.distributed.is_nccl_available():
        return None
    try:
        return nccl_version_string(torch.cuda.nccl.version())
    except (RuntimeError, AttributeError) as exc:
        return f"unknown ({type(exc).__name__}: {exc})"


def torch_devices(torch: Any) -> list[dict]:
    """Each torch CUDA device with its UUID, so torch index -> NVML device can be mapped."""
    devices = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        uuid = getattr(props, "uuid", None)
        devices.append({
            "index": index,
            "name": props.name,
            "uuid": str(uuid) if uuid is not None else None,
            "total_memory_bytes": props.total_memory,
            "capability": f"{props.major}.{props.minor}",
        })
    return devices


def collect_torch() -> dict:
    """torch's build and what it can use here: CUDA, gloo, NCCL."""
    import torch
    import torch.distributed

    distributed = torch.distributed.is_available()
    cuda = torch.cuda.is_available()
    return {
        "torch": str(torch.__version__),
        "cuda_build": torch.version.cuda,
        "cuda_available": cuda,
        "cuda_device_count": torch.cuda.device_count() if cuda else 0,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "distributed_available": distributed,
        "gloo_available": distributed and torch.distributed.is_gloo_available(),
        "nccl_available": distributed and torch.distributed.is_nccl_available(),
        "nccl_version": nccl_version(torch) if distributed else None,
        "devices": torch_devices(torch) if cuda else [],
    }


# ---------------------------------------------------------------- NVML: tolerant queries


def unsupported(name: str) -> dict:
    """The record of a field NVML would not give: the error's name stands in for the value."""
    return {"unsupported": name}


def is_unsupported(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"unsupported"}


def error_class_name(name: str) -> str:
    """NVMLError_NotSupported -> 'NotSupported'."""
    return name.removeprefix("NVMLError_")


def nvml_error_name(exc: BaseException) -> str:
    """The error's NVML name; a bare NVMLError (an unknown code) keeps its code."""
    if type(exc).__name__.startswith("NVMLError_"):
        return error_class_name(type(exc).__name__)
    value = getattr(exc, "value", None)
    return f"{type(exc).__name__} {value}" if value is not None else type(exc).__name__


def return_code_name(nvml: Any, code: int) -> str:
    """An nvmlReturn_t code (a field value's own status) named like the exception it would raise."""
    try:
        return error_class_name(nvml.nvmlExceptionClass(code).__name__)
    except (AttributeError, ValueError):
        return f"NVML error {code}"


def text(value: Any) -> Any:
    """NVML strings come back as bytes from some pynvml functions and str from others."""
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def query(nvml: Any, function: str, *args: Any, convert: Callable[[Any], Any] = text) -> Any:
    """One NVML call; any NVMLError (or a function this pynvml lacks) becomes an unsupported record."""
    fn = getattr(nvml, function, None)
    if fn is None:
        return unsupported(f"FunctionNotFound (pynvml has no {function})")
    try:
        return convert(fn(*args))
    except nvml.NVMLError as exc:
        return unsupported(nvml_error_name(exc))


def field(record: Any, convert: Callable[[Any], Any]) -> Any:
    """A value derived from an earlier query, passing an unsupported record through."""
    return record if is_unsupported(record) else convert(record)


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


# ---------------------------------------------------------------- NVML: devices and links


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


def load_nvml(nvml: Any = None) -> tuple[Any, str | None]:
    """The NVML module to use, or None and why not (nvidia-ml-py may not be installed)."""
    if nvml is not None:
        return nvml, None
    try:
        import pynvml
    except ImportError as exc:
        return None, f"pynvml (nvidia-ml-py) not importable: {exc}"
    return pynvml, None


def init_failure_reason(exc: BaseException) -> str:
    """nvmlInit's error in plain words, keeping NVML's own name for searching."""
    name = nvml_error_name(exc)
    return f"{INIT_FAILURES.get(name, f'nvmlInit failed: {exc}')}; nvmlInit raised NVMLError_{name}"


def start_nvml(nvml: Any) -> str | None:
    """nvmlInit; None when it worked, else why not."""
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return init_failure_reason(exc)
    return None


def stop_nvml(nvml: Any) -> None:
    """nvmlShutdown; a failure here must not lose what was collected."""
    try:
        nvml.nvmlShutdown()
    except nvml.NVMLError:
        pass


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


def collect_hardware(nvml: Any = None) -> dict:
    """Everything the report needs about the machine, JSON-serialisable."""
    torch_info = collect_torch()
    nvml_info = collect_nvml(nvml)
    map_torch_devices(torch_info, nvml_info)
    return {"host": collect_host(), "torch": torch_info, "nvml": nvml_info}


# ---------------------------------------------------------------- NVLink traffic counters


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


def github(rows: Any, headers: Any = "keys") -> str:
    """A github table; cells are already text, so '4.0' stays '4.0' (not the number 4)."""
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)


def cell(value: Any, fmt: Callable[[Any], str] = str) -> str:
    """A table cell: unsupported fields read 'n/a (<error>)', missing ones 'n/a'."""
    if is_unsupported(value):
        return f"n/a ({value['unsupported']})"
    if value is None:
        return "n/a"
    return fmt(value)


def gib(n: int) -> str:
    return f"{n / GIB:.1f} GiB"


def yes_no(flag: Any) -> str:
    return "yes" if flag else "no"


def host_table(hw: dict) -> str:
    host, t = hw["host"], hw["torch"]
    cores = f"{host['logical_cores']}"
    if host.get("usable_cores") not in (None, host["logical_cores"]):
        cores += f" ({host['usable_cores']} usable by this process)"
    cuda = f"build {t['cuda_build'] or 'none (CPU build)'}; available: {yes_no(t['cuda_available'])}"
    if t["cuda_available"]:
        cuda += f", {t['cuda_device_count']} device(s)"
    if t.get("cuda_visible_devices") is not None:
        cuda += f"; CUDA_VISIBLE_DEVICES={t['cuda_visible_devices']}"
    nccl = yes_no(t["nccl_available"]) + (f" ({t['nccl_version']})" if t.get("nccl_version") else "")
    rows = [
        ("CPU", host["cpu_model"]),
        ("logical cores", cores),
        ("memory", cell(host["memory_bytes"], gib)),
        ("OS", host["os"]),
        ("Python", host["python"]),
        ("torch", t["torch"]),
        ("CUDA", cuda),
        ("gloo", yes_no(t["gloo_available"])),
        ("NCCL", nccl),
    ]
    return github(rows, ["host", ""])


def pair(current: Any, maximum: Any, fmt: Callable[[Any], str] = str, sep: str = " / ") -> str:
    return f"{cell(current, fmt)}{sep}{cell(maximum, fmt)}"


def device_row(d: dict) -> dict:
    if "handle" in d:
        return {"nvml": d["index"], "name": cell(d["handle"])}
    return {
        "nvml": d["index"],
        "torch": cell(d.get("torch_index")),
        "name": cell(d["name"]),
        "bus id": cell(d["pci_bus_id"]),
        "memory used / total": pair(d["memory_used_bytes"], d["memory_total_bytes"], gib),
        "SM MHz now / max": pair(d["sm_clock_mhz"], d["sm_clock_max_mhz"]),
        "mem MHz now / max": pair(d["memory_clock_mhz"], d["memory_clock_max_mhz"]),
        "power W / limit": pair(d["power_draw_w"], d["power_limit_w"], lambda w: f"{w:.0f}"),
        "temp C": cell(d["temperature_c"]),
        "PCIe gen x width (max)": f"{pair(d['pcie_generation'], d['pcie_width'], sep=' x')} "
                                  f"({pair(d['pcie_generation_max'], d['pcie_width_max'], sep=' x')})",
    }


def devices_table(nvml: dict) -> str:
    rows = [device_row(d) for d in nvml["devices"]]
    return github(rows)


def distinct(values: list[str]) -> str:
    return ", ".join(dict.fromkeys(values)) or "-"


def nvlink_row(d: dict) -> dict:
    nv = d.get("nvlink", {"links": [], "unanswered": {}})
    up = [link for link in nv["links"] if link["active"]]
    return {
        "nvml": d["index"],
        "links active": f"{len(up)} of {len(nv['links'])} answering",
        "version enum": distinct([cell(link["version_enum"]) for link in up]),
        "generation": distinct([cell(link["generation"]) for link in up]),
        "remote bus ids": distinct([cell(link["remote_pci_bus_id"]) for link in up]),
        "links not answering": "; ".join(f"{len(ls)} ({err})" for err, ls in nv["unanswered"].items()) or "-",
    }


def nvlink_table(nvml: dict) -> str:
    return github([nvlink_row(d) for d in nvml["devices"]])


def pair_cell(record: dict) -> str:
    p2p = cell(record["p2p_nvlink"], lambda p: p["name"])
    topo = cell(record["topology"], lambda t: t["name"])
    return f"{p2p} / {topo}"


def pairs_matrix(nvml: dict) -> str:
    count = len(nvml["devices"])
    by_pair = {(p["a"], p["b"]): p for p in nvml["pairs"]}
    rows = [[f"GPU{a}"] + ["X" if a == b else pair_cell(by_pair[(a, b)]) for b in range(count)]
            for a in range(count)]
    legend = "; ".join(f"{name} = {meaning}" for name, meaning in TOPOLOGY_LEVELS.values())
    return (github(rows, ["NVLink P2P / topology"] + [f"GPU{b}" for b in range(count)])
            + f"\n\nTopology (closest common ancestor): {legend}.")


def kib(n: Any) -> str:
    return f"{n:,} KiB ({n / 1024**2:.2f} GiB)"


def traffic_table(delta: dict) -> str:
    rows = [{"nvml": d["index"], "link": scope, "TX": cell(c["tx_kib"], kib), "RX": cell(c["rx_kib"], kib)}
            for d in delta["devices"] for scope, c in d["counters"].items()]
    if not rows:
        return "NVLink data moved during the measurement: no NVLink counter could be read."
    return (f"NVLink data moved during the measurement ({delta['seconds']:.1f} s; 'total' is NVML's sum "
            f"over all links):\n\n" + github(rows))


def gpu_sections(nvml: dict, nvlink_delta: dict | None) -> list[str]:
    head = (f"NVIDIA driver {cell(nvml['driver_version'])}, CUDA driver {cell(nvml['cuda_driver_version'])}, "
            f"NVML {cell(nvml['nvml_version'])}. NVML indices ignore CUDA_VISIBLE_DEVICES; the torch "
            f"column maps them to torch device indices by UUID.")
    sections = [head, devices_table(nvml), nvlink_table(nvml)]
    if len(nvml["devices"]) > 1:
        sections.append(pairs_matrix(nvml))
    if nvlink_delta is not None:
        sections.append(traffic_table(nvlink_delta))
    return sections


def hardware_markdown(hw: dict, nvlink_delta: dict | None = None) -> str:
    """The report's hardware section: host table, then the GPUs or a plain sentence that there are none."""
    nvml = hw["nvml"]
    sections = [host_table(hw)]
    if not nvml["available"]:
        sections.append(f"No NVIDIA GPU: NVML unavailable ({nvml['reason']}).")
    elif not nvml["devices"]:
        sections.append(f"No NVIDIA GPU: NVML found no device (device count: {cell(nvml['device_count'])}).")
    else:
        sections.extend(gpu_sections(nvml, nvlink_delta))
    return "\n\n".join(sections)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports.hardware", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print collect_hardware() as JSON")
    args = parser.parse_args(argv)
    hw = collect_hardware()
    print(json.dumps(hw, indent=2) if args.json else hardware_markdown(hw))
    return 0


if __name__ == "__main__":
    sys.exit(main())
