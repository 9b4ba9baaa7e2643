"""What the numbers in a report were measured on: host, torch build, and GPUs as NVML sees them.

Bandwidth and step-time figures mean little without the machine beside them, so
every run records ``collect_hardware()`` in ``results.json`` and renders it
with ``reports.hardware_markdown`` in ``report.md``; ``reports.nvlink_traffic``
samples NVLink counters around the bandwidth sweep. NVML (``pynvml``, from nvidia-ml-py)
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
from pathlib import Path
from typing import Any, Callable, Sequence



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
    """Each torch CUDA device with its UUID, so torch index -> NVML device can be mapped.

    A device this process may not use (another process holds it in an exclusive compute mode) is
    recorded with the error instead of failing the run.
    """
    devices = []
    for index in range(torch.cuda.device_count()):
        try:
            props = torch.cuda.get_device_properties(index)
        except RuntimeError as exc:
            devices.append({"index": index, "name": "unusable", "uuid": None, "error": str(exc).splitlines()[0]})
            continue
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports.hardware", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print collect_hardware() as JSON")
    args = parser.parse_args(argv)
    from .hardware_markdown import hardware_markdown  # the renderer imports this module

    hw = collect_hardware()
    print(json.dumps(hw, indent=2) if args.json else hardware_markdown(hw))
    return 0


if __name__ == "__main__":
    sys.exit(main())
