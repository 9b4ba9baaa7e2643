"""A stand-in for the pynvml module: GPUs described by dicts, any call refusable per device.

Constants and the NVMLError classes are pynvml's own, so error names, enum values
and return codes are the real ones; only the calls are fake. Handles are device
indices. ``refuse[(function, index)] = pynvml.NVMLError_NotSupported`` makes that
call raise for that device (index None: every device, or a device-less call).
"""

from __future__ import annotations

import types
from typing import Any

import pynvml


def fake_gpu(index: int, active_links: int = 4, answering_links: int = 18) -> dict:
    """An H100-like GPU: links 0..active_links-1 are up at NVLink 4.0 (enum 6)."""
    return {
        "name": f"Fake H100 {index}",
        "uuid": f"GPU-0000000{index}-aaaa-bbbb-cccc-dddddddddddd",
        "bus_id": f"00000000:{0x18 + index:02X}:00.0",
        "memory": (80 * 1024**3, 1024**3 * (index + 1)),  # total, used
        "clocks": {pynvml.NVML_CLOCK_SM: (1755, 1980), pynvml.NVML_CLOCK_MEM: (2619, 2619)},  # now, max
        "power_mw": (71_000 + index, 700_000),  # draw, enforced limit
        "temperature": 30 + index,
        "compute_mode": pynvml.NVML_COMPUTEMODE_DEFAULT,
        "utilization": 40 + index,  # percent of time a kernel ran
        "pcie": ((5, 16), (5, 16)),  # (gen, width) now, max
        "answering_links": answering_links,
        "links": {link: {"version": pynvml.NVML_NVLINK_VERSION_4_0,
                         "remote": f"00000000:{0xC0 + link:02X}:00.0"}
                  for link in range(active_links)},
        # scope (link, or 0xFFFFFFFF for all links) -> [tx KiB, rx KiB], cumulative.
        "counters": {0xFFFFFFFF: [0, 0], **{link: [0, 0] for link in range(active_links)}},
    }


class FieldValue:
    """What nvmlDeviceGetFieldValues fills in: an unsigned long long counter, or a failure code."""

    def __init__(self, field_id: int, scope: int, value: int | None, code: int):
        self.fieldId, self.scopeId, self.nvmlReturn = field_id, scope, code
        self.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
        self.value = types.SimpleNamespace(ullVal=value if value is not None else 0)


class FakeNVML(types.ModuleType):
    """pynvml's interface over ``gpus`` (see fake_gpu); ``calls`` records init/shutdown."""

    def __init__(self, gpus: list[dict], refuse: dict | None = None, init_error: type | None = None,
                 p2p: dict | None = None, topology: dict | None = None):
        super().__init__("fake_pynvml")
        for name in dir(pynvml):
            if name.startswith(("NVML_", "NVMLError")) or name == "nvmlExceptionClass":
                setattr(self, name, getattr(pynvml, name))
        self.gpus, self.refuse, self.init_error = gpus, refuse or {}, init_error
        self.p2p = p2p or {}
        self.topology = topology or {}
        self.calls: list[str] = []

    def _check(self, function: str, index: int | None = None) -> None:
        for key in ((function, index), (function, None)):
            if key in self.refuse:
                raise self.refuse[key]()

    def _gpu(self, function: str, handle: int) -> dict:
        self._check(function, handle)
        return self.gpus[handle]

    def nvmlInit(self):
        self.calls.append("init")
        if self.init_error is not None:
            raise self.init_error()

    def nvmlShutdown(self):
        self.calls.append("shutdown")

    def nvmlDeviceGetCount(self):
        self._check("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlSystemGetDriverVersion(self):
        self._check("nvmlSystemGetDriverVersion")
        return "550.54.15"

    def nvmlSystemGetCudaDriverVersion(self):
        self._check("nvmlSystemGetCudaDriverVersion")
        return 12040

    def nvmlSystemGetNVMLVersion(self):
        self._check("nvmlSystemGetNVMLVersion")
        return b"12.550.54.15"  # pynvml returns bytes here

    def nvmlDeviceGetHandleByIndex(self, index):
        self._check("nvmlDeviceGetHandleByIndex", index)
        if not 0 <= index < len(self.gpus):
            raise pynvml.NVMLError_InvalidArgument()
        return index

    def nvmlDeviceGetName(self, h):
        return self._gpu("nvmlDeviceGetName", h)["name"]

    def nvmlDeviceGetUUID(self, h):
        return self._gpu("nvmlDeviceGetUUID", h)["uuid"]

    def nvmlDeviceGetPciInfo(self, h):
        return types.SimpleNamespace(busId=self._gpu("nvmlDeviceGetPciInfo", h)["bus_id"].encode())

    def nvmlDeviceGetMemoryInfo(self, h):
        total, used = self._gpu("nvmlDeviceGetMemoryInfo", h)["memory"]
        return types.SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetClockInfo(self, h, clock):
        return self._gpu("nvmlDeviceGetClockInfo", h)["clocks"][clock][0]

    def nvmlDeviceGetMaxClockInfo(self, h, clock):
        return self._gpu("nvmlDeviceGetMaxClockInfo", h)["clocks"][clock][1]

    def nvmlDeviceGetPowerUsage(self, h):
        return self._gpu("nvmlDeviceGetPowerUsage", h)["power_mw"][0]

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return self._gpu("nvmlDeviceGetEnforcedPowerLimit", h)["power_mw"][1]

    def nvmlDeviceGetTemperature(self, h, sensor):
        assert sensor == pynvml.NVML_TEMPERATURE_GPU, sensor
        return self._gpu("nvmlDeviceGetTemperature", h)["temperature"]

    def nvmlDeviceGetComputeMode(self, h):
        return self._gpu("nvmlDeviceGetComputeMode", h)["compute_mode"]

    def nvmlDeviceGetUtilizationRates(self, h):
        return types.SimpleNamespace(gpu=self._gpu("nvmlDeviceGetUtilizationRates", h)["utilization"], memory=0)

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):
        return self._gpu("nvmlDeviceGetCurrPcieLinkGeneration", h)["pcie"][0][0]

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):
        return self._gpu("nvmlDeviceGetCurrPcieLinkWidth", h)["pcie"][0][1]

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h):
        return self._gpu("nvmlDeviceGetMaxPcieLinkGeneration", h)["pcie"][1][0]

    def nvmlDeviceGetMaxPcieLinkWidth(self, h):
        return self._gpu("nvmlDeviceGetMaxPcieLinkWidth", h)["pcie"][1][1]

    def _link(self, function: str, h: int, link: int) -> dict | None:
        gpu = self._gpu(function, h)
        if link >= gpu["answering_links"]:
            raise pynvml.NVMLError_InvalidArgument()
        return gpu["links"].get(link)

    def nvmlDeviceGetNvLinkState(self, h, link):
        return int(self._link("nvmlDeviceGetNvLinkState", h, link) is not None)

    def nvmlDeviceGetNvLinkVersion(self, h, link):
        return self._link("nvmlDeviceGetNvLinkVersion", h, link)["version"]

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h, link):
        remote = self._link("nvmlDeviceGetNvLinkRemotePciInfo", h, link)["remote"]
        return types.SimpleNamespace(busId=remote.encode())

    def nvmlDeviceGetP2PStatus(self, a, b, index):
        assert index == pynvml.NVML_P2P_CAPS_INDEX_NVLINK, index
        self._check("nvmlDeviceGetP2PStatus", a)
        return self.p2p.get((a, b), pynvml.NVML_P2P_STATUS_OK)

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):
        self._check("nvmlDeviceGetTopologyCommonAncestor", a)
        return self.topology.get(frozenset((a, b)), pynvml.NVML_TOPOLOGY_NODE)

    def nvmlDeviceGetFieldValues(self, h, field_ids: list[Any]):
        counters = self._gpu("nvmlDeviceGetFieldValues", h)["counters"]
        values = []
        for field_id, scope in field_ids:
            direction = {pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX: 0,
                         pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX: 1}[field_id]
            if scope in counters:
                values.append(FieldValue(field_id, scope, counters[scope][direction], pynvml.NVML_SUCCESS))
            else:
                values.append(FieldValue(field_id, scope, None, pynvml.NVML_ERROR_NOT_SUPPORTED))
        return values
