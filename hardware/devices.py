"""Every GPU NVML sees (all of them: NVML ignores CUDA_VISIBLE_DEVICES): clocks, power, PCIe, compute mode,
NVLinks, and each pair's P2P status and topology; marked with the torch index that drives each."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Literal

from .host import TorchBuild
from datamodel import JsonModel, doc
from .nvml import Unsupported, field, is_unsupported, load_nvml, query, start_nvml, stop_nvml, text

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


@dataclass(frozen=True, kw_only=True)
class NvLink(JsonModel):
    """One NVLink of a GPU: its state and, when up, its version and far end."""

    link: int = doc("the link's number on its GPU")
    active: bool = doc("whether the link is up")
    version_enum: int | Unsupported | None = doc(
        "NVML's NVLink version: an enum value, not the generation (NVML_NVLINK_VERSION_4_0 is 6); up links "
        "only",
        omit_none=True)
    generation: str | Unsupported | None = doc(
        "the NVLink generation the enum stands for ('4.0'); up links only", omit_none=True)
    remote_pci_bus_id: str | Unsupported | None = doc(
        "the PCI bus id at the link's far end; up links only", omit_none=True)


@dataclass(frozen=True, kw_only=True)
class NvLinks(JsonModel):
    """Every link 0..NVML_NVLINK_MAX_LINKS-1 of a GPU: those that answered, those that did not by error."""

    links: tuple[NvLink, ...] = doc("every link that answered")
    unanswered: dict[str, tuple[int, ...]] = doc("the links that did not answer, by NVML error name")


@dataclass(frozen=True, kw_only=True)
class NvmlDevice(JsonModel):
    """One GPU as NVML sees it, each field asked for separately so that one refusal costs one field."""

    index: int = doc("NVML's index (NVML ignores CUDA_VISIBLE_DEVICES)")
    name: str | Unsupported = doc("the GPU's name")
    uuid: str | Unsupported = doc("the GPU's UUID ('GPU-...')")
    pci_bus_id: str | Unsupported = doc("the GPU's PCI bus id")
    memory_total_bytes: int | Unsupported = doc("memory in bytes")
    memory_used_bytes: int | Unsupported = doc("memory in use in bytes, when probed")
    sm_clock_mhz: int | Unsupported = doc("SM clock in MHz, when probed")
    sm_clock_max_mhz: int | Unsupported = doc("highest SM clock in MHz")
    memory_clock_mhz: int | Unsupported = doc("memory clock in MHz, when probed")
    memory_clock_max_mhz: int | Unsupported = doc("highest memory clock in MHz")
    power_draw_w: float | Unsupported = doc("power drawn in W, when probed")
    power_limit_w: float | Unsupported = doc("enforced power limit in W")
    temperature_c: int | Unsupported = doc("GPU temperature in C, when probed")
    compute_mode: str | Unsupported | None = doc(
        "who may create a context on the GPU: DEFAULT, EXCLUSIVE_THREAD, PROHIBITED or EXCLUSIVE_PROCESS "
        "(the last three let one process only); absent in runs before it was recorded", omit_none=True)
    pcie_generation: int | Unsupported = doc("PCIe generation of the link now")
    pcie_generation_max: int | Unsupported = doc("highest PCIe generation of the link")
    pcie_width: int | Unsupported = doc("PCIe lanes of the link now")
    pcie_width_max: int | Unsupported = doc("most PCIe lanes of the link")
    nvlink: NvLinks = doc("the GPU's NVLinks")
    torch_index: int | None = doc("the torch device index that drives this GPU (by UUID), or null "
                                         "when torch does not see it", default=None)


@dataclass(frozen=True, kw_only=True)
class UnreachableDevice(JsonModel):
    """A GPU NVML counts but gives no handle to: only why."""

    index: int = doc("NVML's index")
    handle: Unsupported = doc("why NVML gave no handle to the GPU")
    torch_index: int | None = doc("always null: torch's devices are mapped by UUID", default=None)


@dataclass(frozen=True, kw_only=True)
class P2pStatus(JsonModel):
    """nvmlGpuP2PStatus_t, with its name."""

    status: int = doc("NVML's status value")
    name: str = doc("its name: OK, CHIPSET_NOT_SUPPORTED, ..., NOT_SUPPORTED, UNKNOWN")


@dataclass(frozen=True, kw_only=True)
class TopologyLevel(JsonModel):
    """nvmlGpuTopologyLevel_t: the closest common ancestor of two GPUs, as nvidia-smi topo names it."""

    level: int = doc("NVML's level value")
    name: str = doc("its short name: INTERNAL, PIX, PXB, PHB, NODE, SYS")
    meaning: str = doc("what it means ('host bridges within one NUMA node')")


@dataclass(frozen=True, kw_only=True)
class DevicePair(JsonModel):
    """An ordered pair of GPUs: NVLink P2P status and PCIe topology (a lost handle stands in for both)."""

    a: int = doc("NVML index of the first GPU")
    b: int = doc("NVML index of the second GPU")
    p2p_nvlink: P2pStatus | Unsupported = doc("P2P over NVLink from a to b")
    topology: TopologyLevel | Unsupported = doc("the closest common PCIe ancestor of a and b")


@dataclass(frozen=True, kw_only=True)
class Nvml(JsonModel):
    """The NVIDIA driver and every GPU NVML sees (all of them: NVML ignores CUDA_VISIBLE_DEVICES)."""

    available: Literal[True] = doc("NVML started", default=True)
    driver_version: str | Unsupported = doc("the NVIDIA driver's version")
    cuda_driver_version: str | Unsupported = doc("the CUDA version the driver supports ('12.4')")
    nvml_version: str | Unsupported = doc("NVML's version")
    device_count: int | Unsupported = doc("GPUs NVML counts")
    devices: tuple[NvmlDevice | UnreachableDevice, ...] = doc("every GPU NVML counts, by NVML index")
    pairs: tuple[DevicePair, ...] = doc("every ordered pair of the GPUs NVML counts")


@dataclass(frozen=True, kw_only=True)
class NoNvml(JsonModel):
    """NVML could not start here (no driver, no pynvml, no permission)."""

    available: Literal[False] = doc("NVML did not start", default=False)
    reason: str = doc("why, in plain words, with NVML's own error name")


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


def collect_link(nvml: Any, handle: Any, link: int, active: bool, generations: dict[int, str]) -> NvLink:
    """One NVLink: state, version (raw enum and decoded generation) and, when up, its far end."""
    if not active:
        return NvLink(link=link, active=False)
    version = query(nvml, "nvmlDeviceGetNvLinkVersion", handle, link)
    return NvLink(link=link, active=True, version_enum=version,
                  generation=field(version, lambda v: nvlink_generation(v, generations)),
                  remote_pci_bus_id=query(nvml, "nvmlDeviceGetNvLinkRemotePciInfo", handle, link,
                                          convert=bus_id))


def collect_nvlinks(nvml: Any, handle: Any) -> NvLinks:
    """Every link 0..NVML_NVLINK_MAX_LINKS-1 that answers; those that do not, grouped by error."""
    generations = nvlink_generations(nvml)
    links, unanswered = [], {}
    for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        state = query(nvml, "nvmlDeviceGetNvLinkState", handle, link)
        if is_unsupported(state):
            unanswered.setdefault(state.error, []).append(link)
        else:
            links.append(collect_link(nvml, handle, link, bool(state), generations))
    return NvLinks(links=tuple(links), unanswered={error: tuple(ls) for error, ls in unanswered.items()})


def collect_device(nvml: Any, index: int) -> NvmlDevice | UnreachableDevice:
    """One GPU, every field asked for separately so that one refusal costs one field."""
    handle = query(nvml, "nvmlDeviceGetHandleByIndex", index, convert=lambda h: h)
    if is_unsupported(handle):
        return UnreachableDevice(index=index, handle=handle)
    sm, mem = nvml.NVML_CLOCK_SM, nvml.NVML_CLOCK_MEM
    memory = query(nvml, "nvmlDeviceGetMemoryInfo", handle, convert=lambda m: m)
    return NvmlDevice(
        index=index,
        name=query(nvml, "nvmlDeviceGetName", handle),
        uuid=query(nvml, "nvmlDeviceGetUUID", handle),
        pci_bus_id=query(nvml, "nvmlDeviceGetPciInfo", handle, convert=bus_id),
        memory_total_bytes=field(memory, lambda m: int(m.total)),
        memory_used_bytes=field(memory, lambda m: int(m.used)),
        sm_clock_mhz=query(nvml, "nvmlDeviceGetClockInfo", handle, sm),
        sm_clock_max_mhz=query(nvml, "nvmlDeviceGetMaxClockInfo", handle, sm),
        memory_clock_mhz=query(nvml, "nvmlDeviceGetClockInfo", handle, mem),
        memory_clock_max_mhz=query(nvml, "nvmlDeviceGetMaxClockInfo", handle, mem),
        power_draw_w=query(nvml, "nvmlDeviceGetPowerUsage", handle, convert=milliwatts_to_watts),
        power_limit_w=query(nvml, "nvmlDeviceGetEnforcedPowerLimit", handle, convert=milliwatts_to_watts),
        temperature_c=query(nvml, "nvmlDeviceGetTemperature", handle, nvml.NVML_TEMPERATURE_GPU),
        compute_mode=query(nvml, "nvmlDeviceGetComputeMode", handle,
                           convert=lambda m: COMPUTE_MODES.get(m, f"unknown ({m})")),
        pcie_generation=query(nvml, "nvmlDeviceGetCurrPcieLinkGeneration", handle),
        pcie_generation_max=query(nvml, "nvmlDeviceGetMaxPcieLinkGeneration", handle),
        pcie_width=query(nvml, "nvmlDeviceGetCurrPcieLinkWidth", handle),
        pcie_width_max=query(nvml, "nvmlDeviceGetMaxPcieLinkWidth", handle),
        nvlink=collect_nvlinks(nvml, handle),
    )


def p2p_status(status: int) -> P2pStatus:
    return P2pStatus(status=status, name=P2P_STATUSES.get(status, f"unknown ({status})"))


def topology_level(level: int) -> TopologyLevel:
    name, meaning = TOPOLOGY_LEVELS.get(level, (f"unknown ({level})", "not in our table"))
    return TopologyLevel(level=level, name=name, meaning=meaning)


def collect_pairs(nvml: Any, count: int) -> tuple[DevicePair, ...]:
    """NVLink P2P status and closest common PCIe ancestor for every ordered pair of GPUs."""
    handles = [query(nvml, "nvmlDeviceGetHandleByIndex", i, convert=lambda h: h) for i in range(count)]
    pairs = []
    for a in range(count):
        for b in range(count):
            if a == b:
                continue
            if is_unsupported(handles[a]) or is_unsupported(handles[b]):
                failed = handles[a] if is_unsupported(handles[a]) else handles[b]
                pairs.append(DevicePair(a=a, b=b, p2p_nvlink=failed, topology=failed))
                continue
            pairs.append(DevicePair(
                a=a, b=b,
                p2p_nvlink=query(nvml, "nvmlDeviceGetP2PStatus", handles[a], handles[b],
                                 nvml.NVML_P2P_CAPS_INDEX_NVLINK, convert=p2p_status),
                topology=query(nvml, "nvmlDeviceGetTopologyCommonAncestor", handles[a], handles[b],
                               convert=topology_level),
            ))
    return tuple(pairs)


def collect_nvml(nvml: Any = None) -> Nvml | NoNvml:
    """The driver and every GPU NVML sees (all of them: NVML ignores CUDA_VISIBLE_DEVICES)."""
    nvml, reason = load_nvml(nvml)
    if nvml is None:
        return NoNvml(reason=reason)
    reason = start_nvml(nvml)
    if reason is not None:
        return NoNvml(reason=reason)
    try:
        count = query(nvml, "nvmlDeviceGetCount", convert=int)
        known = 0 if is_unsupported(count) else count
        return Nvml(
            driver_version=query(nvml, "nvmlSystemGetDriverVersion"),
            cuda_driver_version=query(nvml, "nvmlSystemGetCudaDriverVersion",
                                      convert=cuda_driver_version_string),
            nvml_version=query(nvml, "nvmlSystemGetNVMLVersion"),
            device_count=count,
            devices=tuple(collect_device(nvml, i) for i in range(known)),
            pairs=collect_pairs(nvml, known),
        )
    finally:
        stop_nvml(nvml)


def normalised_uuid(uuid: Any) -> str | None:
    """NVML says 'GPU-1a2b...'; torch's uuid prints without the prefix. Compare without it."""
    if not isinstance(uuid, str) or not uuid:
        return None
    return uuid.lower().removeprefix("gpu-")


def map_torch_devices(torch_info: TorchBuild, nvml_info: Nvml | NoNvml) -> Nvml | NoNvml:
    """Each NVML device marked with the torch index that drives it (by UUID), when torch sees it."""
    if isinstance(nvml_info, NoNvml):
        return nvml_info
    by_uuid = {normalised_uuid(d.uuid): d.index for d in torch_info.devices}
    by_uuid.pop(None, None)
    devices = tuple(dataclasses.replace(d, torch_index=by_uuid.get(normalised_uuid(d.uuid)))
                    if isinstance(d, NvmlDevice) else d for d in nvml_info.devices)
    return dataclasses.replace(nvml_info, devices=devices)
